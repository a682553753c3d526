// A periodic sweep of leftovers (expired clips, demo voices, abandoned demo calls), started with
// its layer and stopped with its scope, in the processes that serve HTTP: the runtime role stores
// none of them. A failed sweep is logged, and the next one runs on time.
import { type Duration, Effect, Layer, Schedule } from "effect"
import { Clock } from "./Clock.js"
import { Instance } from "./Instance.js"
import { Log } from "./Log.js"

export function httpSweeper<A extends object, R>(o: {
  /** What is swept, for the log: "preview clips", "demo leftovers". */
  readonly what: string
  readonly every: Duration.DurationInput
  readonly sweep: (now: Date) => Effect.Effect<A, never, R>
  /** Whether a sweep's counts are worth a log line. */
  readonly swept: (counts: A) => boolean
}): Layer.Layer<never, never, R | Clock | Instance | Log> {
  return Layer.scopedDiscard(
    Effect.gen(function* () {
      const instance = yield* Instance
      if (instance.role === "runtime") return
      const clock = yield* Clock
      const log = yield* Log
      const once = Effect.suspend(() => o.sweep(clock.now())).pipe(
        Effect.tap((r) =>
          o.swept(r)
            ? Effect.sync(() => log.info({ ...(r as Record<string, unknown>) }, `${o.what} swept`))
            : Effect.void,
        ),
        Effect.catchAllDefect((e) => Effect.sync(() => log.error({ err: e }, `${o.what} sweep failed`))),
      )
      yield* once.pipe(Effect.repeat(Schedule.spaced(o.every)), Effect.forkScoped)
    }),
  )
}
