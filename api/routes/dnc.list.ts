// GET /dnc: the workspace's do-not-call entries, newest first, a page at a time.
import { Effect } from "effect"
import { z } from "zod"
import { DNC_SOURCES, listDnc } from "../../src/compliance/dnc.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { QueryInt } from "../schemas.js"
import { callerOf } from "../session.js"

export default route({
  method: "GET",
  path: "/dnc",
  auth: "jwt",
  summary: "List do-not-call entries, newest first (limit 1–500, default 50; offset; source?)",
  tags: ["dnc"],
  query: z.object({
    limit: QueryInt(1, 500).optional(),
    offset: QueryInt(0, Number.MAX_SAFE_INTEGER).optional(),
    source: z.enum(DNC_SOURCES, { error: `must be one of ${DNC_SOURCES.join(", ")}` }).optional(),
  }),
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(
        yield* listDnc(caller.tenantId, { limit: query.limit ?? 50, offset: query.offset ?? 0, source: query.source }),
      )
    }),
})
