// GET /dnc/check: whether a number would be filtered out of an audience, and why (the
// workspace's DNC list, the national registry for +91 numbers, the 7-day cool-down).
import { Effect } from "effect"
import { z } from "zod"
import { checkDnc } from "../../src/compliance/dnc.service.js"
import { restorePlus } from "../../src/phones/phone.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"

export default route({
  method: "GET",
  path: "/dnc/check",
  auth: "jwt",
  summary: "Check a number against the DNC list, the national registry and the cool-down",
  tags: ["dnc"],
  // An unencoded + arrives as a space: " 9198…" is "+9198…".
  query: z.object({
    phone_e164: z
      .string({ error: "is required" })
      .transform(restorePlus)
      .pipe(z.string().trim().min(1, "is required").max(64, "must be at most 64 characters")),
  }),
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* checkDnc(caller.tenantId, query.phone_e164))
    }),
})
