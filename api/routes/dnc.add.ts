// POST /dnc/add: puts a number on the workspace's do-not-call list; adding it again refreshes
// its reason and timestamp (one entry per number).
import { Effect } from "effect"
import { z } from "zod"
import { addDnc, REASON_MAX } from "../../src/compliance/dnc.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"

export default route({
  method: "POST",
  path: "/dnc/add",
  auth: "jwt",
  summary: "Add a number to the do-not-call list (idempotent)",
  tags: ["dnc"],
  body: {
    json: z.object({
      phone_e164: z
        .string({ error: "is required" })
        .trim()
        .min(1, "is required")
        .max(64, "must be at most 64 characters"),
      reason: z.string().trim().max(REASON_MAX, `must be at most ${REASON_MAX} characters`).nullish(),
    }),
  },
  handler: ({ principal, body }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      const reason = body!.reason === undefined || body!.reason === null || body!.reason === "" ? null : body!.reason
      return json(yield* addDnc(caller.tenantId, body!.phone_e164, reason))
    }),
})
