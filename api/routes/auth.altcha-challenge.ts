// GET /auth/altcha/challenge: a fresh proof-of-work challenge for the ALTCHA widget.
import { Effect } from "effect"
import { Challenge } from "../../src/auth/Challenge.js"
import { json } from "../reply.js"
import { route } from "../route.js"

export default route({
  method: "GET",
  path: "/auth/altcha/challenge",
  auth: "public",
  summary: "An ALTCHA challenge; solved ones go in the altcha field of signup and OTP start",
  tags: ["auth"],
  handler: () =>
    Effect.gen(function* () {
      const altcha = yield* Challenge
      return json(yield* Effect.promise(() => altcha.challenge()), 200, { "Cache-Control": "no-store" })
    }),
})
