// POST /api-keys/{key_id}/revoke: the key stops working in every process at once; idempotent.
import { Effect } from "effect"
import { z } from "zod"
import { revokeKey } from "../../src/keys/keys.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { userOf } from "../session.js"

export default route({
  method: "POST",
  path: "/api-keys/{key_id}/revoke",
  auth: "jwt-only",
  summary: "Revoke an API key",
  tags: ["api-keys"],
  params: z.object({ key_id: Id }),
  body: {
    json: z.object({ reason: z.string().trim().max(80, "must be at most 80 characters").optional() }).optional(),
  },
  handler: ({ principal, params, body, clientIp, headers }) =>
    Effect.gen(function* () {
      const user = yield* userOf(principal)
      const actor = { tenantId: user.tenantId, userId: user.userId, ip: clientIp, userAgent: headers["user-agent"] }
      return json(yield* revokeKey(actor, params.key_id, body?.reason || null))
    }),
})
