// DELETE /api-keys/{key_id}: removes a revoked key's row (its audit trail stays); 409 otherwise.
import { Effect } from "effect"
import { z } from "zod"
import { deleteKey } from "../../src/keys/keys.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { userOf } from "../session.js"

export default route({
  method: "DELETE",
  path: "/api-keys/{key_id}",
  auth: "jwt-only",
  summary: "Delete a revoked API key",
  tags: ["api-keys"],
  params: z.object({ key_id: Id }),
  handler: ({ principal, params, clientIp, headers }) =>
    Effect.gen(function* () {
      const user = yield* userOf(principal)
      return json(
        yield* deleteKey(
          { tenantId: user.tenantId, userId: user.userId, ip: clientIp, userAgent: headers["user-agent"] },
          params.key_id,
        ),
      )
    }),
})
