// A periodic sweep of leftovers (expired clips, demo voices, abandoned demo calls), started with
// its layer and stopped with its scope, in the processes that serve HTTP: the runtime role stores
// none of them. A failed sweep is logged, and the next one runs on time (src/platform/periodic.ts).
import { type Duration, Effect, Layer } from "effect"
import { Clock } from "./Clock.js"
import { Instance } from "./Instance.js"
import type { Log } from "./Log.js"
import { periodicScoped } from "./periodic.js"

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
      yield* periodicScoped({
        what: `${o.what} sweep`,
        every: o.every,
        tick: Effect.suspend(() => o.sweep(clock.now())),
        report: (r) => (o.swept(r) ? { ...(r as Record<string, unknown>) } : undefined),
        reported: `${o.what} swept`,
      })
    }),
  )
}
