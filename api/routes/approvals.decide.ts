// POST /api/approvals/{id}/decide: approve or deny a proposal; exactly one decision wins, and the
// call it came from resumes on whichever runtime process holds it.
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
  summary: "Approve or deny (409 when already decided or expired; 404 outside the workspace)",
  tags: ["approvals"],
  params: z.object({ id: Id }),
  body: {
    json: z.object({
      decision: z.enum(["approve", "deny"], { error: "must be approve or deny" }),
      note: z.string().trim().max(500, "must be at most 500 characters").optional(),
    }),
  },
  responses: { 200: { description: "{id, status, decided_at, decided_by}" } },
  handler: ({ principal, params, body }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* decideApproval(c, params.id, body!.decision, body!.note || null))
    }),
})
