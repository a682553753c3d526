// DELETE /dnc/{phone_e164}: takes a number off the do-not-call list. The + should be sent as
// %2B; a literal + or none at all are read the same way.
import { Effect } from "effect"
import { z } from "zod"
import { removeDnc } from "../../src/compliance/dnc.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"

export default route({
  method: "DELETE",
  path: "/dnc/{phone_e164}",
  auth: "jwt",
  summary: "Remove a number from the do-not-call list (URL-encode the +: %2B)",
  tags: ["dnc"],
  params: z.object({ phone_e164: z.string().trim().min(1, "is required").max(64, "must be at most 64 characters") }),
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* removeDnc(caller.tenantId, params.phone_e164))
    }),
})
