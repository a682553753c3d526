// POST /api/approvals/{id}/decide: approve or deny a proposal (a concession at another amount within
// the rule book's cap); exactly one decision wins, the call it came from resumes on whichever runtime
// process holds it, or, the call over, its result records the decision; the answer says which.
import { Effect } from "effect"
import { z } from "zod"
import { decideApproval } from "../../src/approvals/approvals.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"

export default route({
  method: "POST",
  path: "/api/approvals/{id}/decide",
  auth: "jwt",
  permission: "supervise",
  summary:
    "Approve or deny; approve a concession at another amount with value_minor (409 when already decided or " +
    "expired; 404 outside the workspace; 422 for a value_minor outside (0, the rule book's concession cap] or " +
    "for anything but approving a concession)",
  tags: ["approvals"],
  params: z.object({ id: Id }),
  body: {
    json: z.object({
      decision: z.enum(["approve", "deny"], { error: "must be approve or deny" }),
      note: z.string().trim().max(500, "must be at most 500 characters").optional(),
      value_minor: z
        .number({ error: "must be an integer number of minor units" })
        .int("must be an integer number of minor units")
        .positive("must be greater than 0")
        .optional(),
    }),
  },
  responses: {
    200: {
      description:
        "{id, status, decided_at, decided_by, note, approved_value_minor (an approved concession's amount: " +
        "value_minor, else the proposal's), phase: on_hold (the callee was still holding and hears it now) | " +
        "after_call (the call had ended, or was ending), effect: what the decision did, in one sentence — " +
        '"The callee is still on the line and will hear the approval of $10.00 now." | "The call had ended: the ' +
        'result now records the agreed $15.00; no one is called." | "The call had ended: the result now records ' +
        'the discount as denied; no one is called." | "The call had ended: a callback is scheduled for ' +
        "2026-01-05 14:00 UTC.\" …}. After the call, a concession approved turns the result's outcome " +
        "pending_approval into agreed_after_call (agreed_value_minor the approved amount), a denial into " +
        "denied_after_call, an escalation approved into escalated_after_call (for a colleague to follow up); " +
        "nobody is called, except for an approved callback, which is a new attempt",
    },
  },
  handler: ({ principal, params, body }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* decideApproval(c, params.id, body!.decision, body!.note || null, body!.value_minor))
    }),
})
