// GET /api/internal/attribution/signups: signups of the last `days` days (1–3650, default 90) per
// source/medium/campaign, with how many verified their email and how many pay (X-System-Key).
import { Effect } from "effect"
import { z } from "zod"
import { DEFAULT_WINDOW_DAYS, signupReport } from "../../src/usage-events/attribution.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { QueryInt } from "../schemas.js"

export default route({
  method: "GET",
  path: "/api/internal/attribution/signups",
  auth: "system",
  summary:
    "Signups per source/medium/campaign over the last `days` days (1–3650, default 90): {window_days, total, " +
    "by_source: [{source, medium, campaign, signups, verified, paying}]}",
  tags: ["internal", "attribution"],
  query: z.object({ days: QueryInt(1, 3650).optional() }),
  responses: {
    200: {
      description:
        "Grouped by the first-touch cookie's channel when it had one, else the signup body's; source falls back to " +
        "the referrer's host, then (direct). verified: email verified; paying: a succeeded top-up or an active " +
        "subscription",
    },
  },
  handler: ({ query }) =>
    Effect.gen(function* () {
      return json(yield* signupReport(query.days ?? DEFAULT_WINDOW_DAYS))
    }),
})
