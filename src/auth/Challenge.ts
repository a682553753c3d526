// The ALTCHA proof-of-work challenge as a service: one HMAC key per deployment (configured, or
// generated once and shared through the database), and the check that signup and OTP start
// run when ALTCHA_REQUIRED is on.
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import { Db } from "../platform/Db.js"
import { BadRequest } from "../platform/errors.js"
import { systemSecret } from "../platform/secret-store.js"
import { type Altcha, makeAltcha } from "./altcha.js"

export class Challenge extends Context.Tag("parley/Challenge")<Challenge, Altcha>() {
  /** Passes when challenges are off, or when `payload` is a fresh solution of one of ours. */
  static require(payload: string | undefined): Effect.Effect<void, BadRequest, Challenge | AppConfig> {
    return Effect.gen(function* () {
      const config = yield* AppConfig
      if (!config.altchaRequired) return
      if (payload === undefined)
        return yield* Effect.fail(
          new BadRequest({
            code: "CHALLENGE_REQUIRED",
            field: "altcha",
            message: "solve the challenge from GET /auth/altcha/challenge and send it as altcha",
          }),
        )
      const altcha = yield* Challenge
      if (!(yield* Effect.promise(() => altcha.verify(payload))))
        return yield* Effect.fail(
          new BadRequest({
            code: "CHALLENGE_FAILED",
            field: "altcha",
            message: "the challenge solution is wrong, expired or already used",
          }),
        )
    })
  }
}

export const ChallengeLive: Layer.Layer<Challenge, never, AppConfig | Db> = Layer.effect(
  Challenge,
  Effect.gen(function* () {
    const config = yield* AppConfig
    const { sql } = yield* Db
    const hmacKey = config.altchaHmacKey ?? (yield* Effect.promise(() => systemSecret(sql, "altcha_hmac")))
    return makeAltcha({ hmacKey, sql })
  }),
)
