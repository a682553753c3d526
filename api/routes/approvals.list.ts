// GET /api/approvals: the workspace's approvals, newest first; filters make it the polling form of
// approval.requested (status=pending, created_after) and approval.resolved (decided_after).
import { Effect } from "effect"
import { z } from "zod"
import { listApprovals } from "../../src/approvals/approvals.service.js"
import { route } from "../route.js"
import { Id, QueryInt } from "../schemas.js"
import { callerOf } from "../session.js"
import { sharedJson } from "../shared-read.js"

const Timestamp = z.iso.datetime({ offset: true, error: "must be an ISO 8601 timestamp" }).transform((s) => new Date(s))

export default route({
  method: "GET",
  path: "/api/approvals",
  auth: "jwt",
  summary: "List approvals (pending, approved, denied; a pending one past expires_at reads as expired)",
  tags: ["approvals"],
  query: z.object({
    workflow_id: Id.optional(),
    status: z
      .enum(["pending", "approved", "denied", "expired"], { error: "must be pending, approved, denied or expired" })
      .optional(),
    decided_after: Timestamp.optional(),
    created_after: Timestamp.optional(),
    before_id: Id.optional(),
    limit: QueryInt(1, 500).optional(),
  }),
  responses: {
    200: {
      description:
        "{approvals:[{id, workflow_id, run_id, call_id, target_phone, proposed_action, proposed_value_minor, " +
        "currency, rationale, context: {attempt, target_id, turns, " +
        "transcript: [the call's last lines, 'speaker: text'], " +
        "hold_until: when the held callee stops waiting}, status, created_at, expires_at (decidable until), " +
        "decided_at, decided_by, note}]}",
    },
  },
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      const approvals = listApprovals(c.tenantId, {
        workflowId: query.workflow_id,
        status: query.status,
        decidedAfter: query.decided_after,
        createdAfter: query.created_after,
        beforeId: query.before_id,
        limit: query.limit ?? 100,
      })
      // A dashboard's polls of the same filter share one read (api/shared-read.ts).
      return yield* sharedJson(
        `approvals.list:${c.tenantId}:${JSON.stringify(query)}`,
        Effect.map(approvals, (list) => ({ approvals: list })),
      )
    }),
})
