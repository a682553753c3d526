// POST /api-keys/{key_id}/revoke: the key stops working in every process at once; idempotent.
import { Effect } from "effect"
import { z } from "zod"
import { keyActor, revokeKey } from "../../src/keys/keys.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { userOf } from "../session.js"

export default route({
  method: "POST",
  path: "/api-keys/{key_id}/revoke",
  auth: "jwt-only",
  // Any member manages keys within their role (src/keys/keys.service.ts: mayMint, mayManage).
  permission: "read",
  audit: "service",
  summary: "Revoke an API key",
  tags: ["api-keys"],
  params: z.object({ key_id: Id }),
  body: {
    json: z.object({ reason: z.string().trim().max(80, "must be at most 80 characters").optional() }).optional(),
  },
  handler: ({ principal, params, body, clientIp, headers }) =>
    Effect.gen(function* () {
      const user = yield* userOf(principal)
      return json(
        yield* revokeKey(keyActor(user, clientIp, headers["user-agent"]), params.key_id, body?.reason || null),
      )
    }),
})
