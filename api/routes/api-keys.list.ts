// GET /api-keys: every key of the workspace (active, expired, revoked), newest first, no secrets.
import { Effect } from "effect"
import { listKeys } from "../../src/keys/keys.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { userOf } from "../session.js"

export default route({
  method: "GET",
  path: "/api-keys",
  auth: "jwt-only",
  summary: "List the workspace's API keys",
  tags: ["api-keys"],
  handler: ({ principal }) =>
    Effect.gen(function* () {
      const user = yield* userOf(principal)
      return json({ keys: yield* listKeys(user.tenantId) })
    }),
})
