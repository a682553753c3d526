// POST /numbers/search: numbers for sale on the account the workspace buys from (the platform's,
// the workspace's own in byok mode, or the simulator), with what Parley charges a month for each.
import { Effect } from "effect"
import { z } from "zod"
import { SEARCH_LIMIT_MAX, searchNumbers } from "../../src/numbers/numbers.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"

export const Country = z
  .string({ error: "is required" })
  .trim()
  .min(2, "must be 2 to 4 characters")
  .max(4, "must be 2 to 4 characters")
  .regex(/^[A-Za-z]+$/, "must be letters (a country code such as US or IN)")
  .transform((c) => c.toUpperCase())

export const AreaCode = z
  .string()
  .trim()
  .regex(/^\d{1,6}$/, "must be 1 to 6 digits")

export default route({
  method: "POST",
  path: "/numbers/search",
  auth: "jwt",
  summary: `Search available numbers: country (2–4 characters), area_code?, limit 1–${SEARCH_LIMIT_MAX}`,
  tags: ["numbers"],
  body: {
    json: z.object({
      country: Country,
      area_code: AreaCode.optional(),
      limit: z
        .number({ error: `must be an integer from 1 to ${SEARCH_LIMIT_MAX}` })
        .int(`must be an integer from 1 to ${SEARCH_LIMIT_MAX}`)
        .min(1, `must be from 1 to ${SEARCH_LIMIT_MAX}`)
        .max(SEARCH_LIMIT_MAX, `must be from 1 to ${SEARCH_LIMIT_MAX}`),
    }),
  },
  handler: ({ principal, body }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(
        yield* searchNumbers(caller.tenantId, {
          country: body!.country,
          areaCode: body!.area_code,
          limit: body!.limit,
        }),
      )
    }),
})
