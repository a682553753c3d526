// GET /api/workflows: the workspace's campaigns, newest first, optionally by status.
import { Effect } from "effect"
import { z } from "zod"
import { listWorkflows } from "../../src/workflows/workflows.service.js"
import { WORKFLOW_STATUSES } from "../../src/workflows/workflow.schema.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { QueryBool } from "../schemas.js"
import { callerOf } from "../session.js"

export default route({
  method: "GET",
  path: "/api/workflows",
  auth: "jwt",
  summary: "List workflows (soft-deleted ones only with include_archived=true)",
  tags: ["workflows"],
  query: z.object({
    status: z.enum(WORKFLOW_STATUSES, { error: `must be one of ${WORKFLOW_STATUSES.join(", ")}` }).optional(),
    include_archived: QueryBool.optional(),
  }),
  responses: { 200: { description: "{tenant_id, workflows:[{id,name,status,persona,schedule_kind,rule_book_id,updated_at,created_at,archived_at}]}" } },
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      const workflows = yield* listWorkflows(c.tenantId, { status: query.status, includeArchived: query.include_archived ?? false })
      return json({ tenant_id: c.tenantId, workflows })
    }),
})
