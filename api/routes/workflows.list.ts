// GET /api/workflows: the workspace's campaigns, newest first, optionally by status, in cursor
// pages (limit 1–200, default 50; next_cursor beside the list, null on the last page).
import { Effect } from "effect"
import { z } from "zod"
import { WORKFLOW_STATUSES } from "../../src/workflows/workflow.schema.js"
import { listWorkflows } from "../../src/workflows/workflows.service.js"
import { route } from "../route.js"
import { PageCursor, PageLimit, QueryBool } from "../schemas.js"
import { callerOf } from "../session.js"
import { sharedJson } from "../shared-read.js"

export default route({
  method: "GET",
  path: "/api/workflows",
  auth: "jwt",
  cached: true,
  summary:
    "List workflows (soft-deleted ones only with include_archived=true); limit 1–200 (default 50), cursor = " +
    "next_cursor of the page before",
  tags: ["workflows"],
  query: z.object({
    status: z.enum(WORKFLOW_STATUSES, { error: `must be one of ${WORKFLOW_STATUSES.join(", ")}` }).optional(),
    include_archived: QueryBool.optional(),
    limit: PageLimit,
    cursor: PageCursor.optional(),
  }),
  responses: {
    200: {
      description:
        "{tenant_id, " +
        "workflows:[{id,name,status,persona,schedule_kind,rule_book_id,updated_at,created_at,archived_at}], " +
        "next_cursor (null on the last page)}",
    },
  },
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      // A dashboard's polls of the same page share one read (api/shared-read.ts).
      return yield* sharedJson(
        `workflows.list:${c.tenantId}:${JSON.stringify(query)}`,
        Effect.map(
          listWorkflows(
            c.tenantId,
            { status: query.status, includeArchived: query.include_archived ?? false },
            { limit: query.limit, before: query.cursor },
          ),
          (page) => ({ tenant_id: c.tenantId, ...page }),
        ),
      )
    }),
})
