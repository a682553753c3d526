// GET /numbers: the workspace's provisioned and imported numbers, newest first (released ones
// too, unless status filters them).
import { Effect } from "effect"
import { z } from "zod"
import { listNumbers } from "../../src/numbers/numbers.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"

export default route({
  method: "GET",
  path: "/numbers",
  auth: "jwt",
  summary: "List the workspace's provisioned and imported numbers (status? active or released)",
  tags: ["numbers"],
  query: z.object({ status: z.enum(["active", "released"], { error: "must be active or released" }).optional() }),
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* listNumbers(caller.tenantId, query.status))
    }),
})
