// DELETE /api-keys/{key_id}: removes a revoked key's row (its audit trail stays); 409 otherwise.
import { Effect } from "effect"
import { z } from "zod"
import { deleteKey, keyActor } from "../../src/keys/keys.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { userOf } from "../session.js"

export default route({
  method: "DELETE",
  path: "/api-keys/{key_id}",
  auth: "jwt-only",
  // Any member manages keys within their role (src/keys/keys.service.ts: mayMint, mayManage).
  permission: "read",
  audit: "service",
  summary: "Delete a revoked API key",
  tags: ["api-keys"],
  params: z.object({ key_id: Id }),
  handler: ({ principal, params, clientIp, headers }) =>
    Effect.gen(function* () {
      const user = yield* userOf(principal)
      return json(yield* deleteKey(keyActor(user, clientIp, headers["user-agent"]), params.key_id))
    }),
})
