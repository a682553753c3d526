// GET /api/approvals: the workspace's approvals, newest first or, for a supervisor's queue, by time
// left (order=time_left); filters make it the polling form of approval.requested (status=pending,
// created_after) and approval.resolved (decided_after), and phase splits the pending ones.
import { Effect } from "effect"
import { z } from "zod"
import { listApprovals } from "../../src/approvals/approvals.service.js"
import { ValidationFailed } from "../../src/platform/errors.js"
import { route } from "../route.js"
import { Id, QueryInt } from "../schemas.js"
import { callerOf } from "../session.js"
import { sharedJson, untilEarliest } from "../shared-read.js"

const Timestamp = z.iso.datetime({ offset: true, error: "must be an ISO 8601 timestamp" }).transform((s) => new Date(s))

export default route({
  method: "GET",
  path: "/api/approvals",
  auth: "jwt",
  cached: true,
  summary:
    "List approvals (pending, approved, denied; a pending one past expires_at reads as expired): newest first, or " +
    "with order=time_left pending ones whose callee is still held first (soonest context.hold_until first), then " +
    "pending ones after their call (soonest expires_at first), then the rest newest first; phase=on_hold|after_call " +
    "keeps pending ones in that phase (422 with another status)",
  tags: ["approvals"],
  query: z.object({
    workflow_id: Id.optional(),
    status: z
      .enum(["pending", "approved", "denied", "expired"], { error: "must be pending, approved, denied or expired" })
      .optional(),
    decided_after: Timestamp.optional(),
    created_after: Timestamp.optional(),
    before_id: Id.optional(),
    phase: z
      .enum(["on_hold", "after_call"], { error: "must be on_hold or after_call" })
      .optional()
      .describe("pending approvals in this phase only"),
    order: z
      .enum(["newest", "time_left"], { error: "must be newest or time_left" })
      .optional()
      .describe("newest (default) or time_left"),
    limit: QueryInt(1, 500).optional(),
  }),
  responses: {
    200: {
      description:
        "{approvals:[{id, workflow_id, run_id, call_id, target_phone, proposed_action, proposed_value_minor, " +
        "currency, rationale, context: {attempt, target_id, turns, " +
        "transcript: [the call's last lines, 'speaker: text'], " +
        "hold_until: when the held callee stops waiting}, status, created_at, expires_at (decidable until), " +
        "decided_at, decided_by, note, phase (pending only, else null): on_hold (the call is live and its callee " +
        "still holds for this decision) | after_call (the call ended; the decision still counts until expires_at), " +
        "approved_value_minor (an approved concession's amount), decided_phase (on_hold | after_call: where the " +
        "call stood when it was decided), effect (what the decision did, as POST decide said it), decided_by_kind " +
        "(user | api_key | system: a data-subject erase), decided_by_name (the member's full name, else their " +
        "address; or the API key's name), decided_by_email (a member's), target_name (the callee's name), " +
        "workflow_name (the campaign's)}]}",
    },
  },
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      if (query.phase !== undefined && query.status !== undefined && query.status !== "pending")
        return yield* Effect.fail(
          new ValidationFailed({
            message: "phase applies to pending approvals only",
            errors: [{ field: "phase", message: "applies to pending approvals only: leave status out or set pending" }],
          }),
        )
      const approvals = listApprovals(c.tenantId, {
        workflowId: query.workflow_id,
        status: query.status,
        decidedAfter: query.decided_after,
        createdAfter: query.created_after,
        beforeId: query.before_id,
        phase: query.phase,
        order: query.order,
        limit: query.limit ?? 100,
      })
      // A dashboard's polls of the same filter share one read (api/shared-read.ts).
      return yield* sharedJson(
        `approvals.list:${c.tenantId}:${JSON.stringify(query)}`,
        Effect.map(approvals, (list) => ({ approvals: list })),
        // A pending approval's status and phase change when its hold or its time runs out.
        ({ approvals }) =>
          untilEarliest(
            approvals.flatMap((a) =>
              a.status === "pending" ? [a.expires_at, (a.context as { hold_until?: unknown } | null)?.hold_until] : [],
            ),
          ),
      )
    }),
})
