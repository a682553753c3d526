// The shape of the runtime role's periodic charges (subscription renewals, number rentals): a tick
// every minute that charges what is due, logs what it charged, and survives a failed tick.
import { Effect, Schedule } from "effect"
import { Log } from "../platform/Log.js"

export const chargeEveryMinute = <R>(
  tick: Effect.Effect<number, never, R>,
  what: string,
): Effect.Effect<never, never, R | Log> =>
  Effect.gen(function* () {
    const log = yield* Log
    const once = tick.pipe(
      Effect.tap((n) => (n > 0 ? Effect.sync(() => log.info({ charged: n }, `${what} charged`)) : Effect.void)),
      Effect.catchAllDefect((e) => Effect.sync(() => log.error({ err: e }, `${what} failed`))),
    )
    return yield* once.pipe(Effect.repeat(Schedule.spaced("1 minute")), Effect.andThen(Effect.never))
  })
