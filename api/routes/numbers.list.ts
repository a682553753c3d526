// GET /numbers: the workspace's provisioned and imported numbers, newest first (released ones
// too, unless status filters them), in cursor pages (limit 1–200, default 50; next_cursor).
import { Effect } from "effect"
import { z } from "zod"
import { listNumbers } from "../../src/numbers/numbers.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { PageCursor, PageLimit } from "../schemas.js"
import { callerOf } from "../session.js"

export default route({
  method: "GET",
  path: "/numbers",
  auth: "jwt",
  summary:
    "List the workspace's provisioned and imported numbers (status? active or released); limit 1–200 (default 50), " +
    "cursor = next_cursor of the page before",
  tags: ["numbers"],
  query: z.object({
    status: z.enum(["active", "released"], { error: "must be active or released" }).optional(),
    limit: PageLimit,
    cursor: PageCursor.optional(),
  }),
  responses: { 200: { description: "{numbers:[number objects], next_cursor (null on the last page)}" } },
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* listNumbers(caller.tenantId, query.status, { limit: query.limit, before: query.cursor }))
    }),
})
