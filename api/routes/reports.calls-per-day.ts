// GET /api/reports/calls-per-day: calls placed per UTC day over the last `days` days (default 30,
// at most 366), every day listed: the console's Reports chart, counted like the weekly PDF's bars.
import { Effect } from "effect"
import { z } from "zod"
import { recentCallsPerDay } from "../../src/reports/reports.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { QueryInt } from "../schemas.js"
import { callerOf } from "../session.js"

export default route({
  method: "GET",
  path: "/api/reports/calls-per-day",
  auth: "jwt",
  summary:
    "Calls placed per UTC day over the last `days` days, today included (1–366, default 30): {from, to, days: " +
    "[{day, calls}]}, days without calls as 0",
  tags: ["reports"],
  query: z.object({ days: QueryInt(1, 366).optional() }),
  responses: { 200: { description: "{from, to, days: [{day: YYYY-MM-DD, calls}]}, oldest first" } },
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* recentCallsPerDay(c.tenantId, query.days ?? 30))
    }),
})
