// The one way a process runs something periodically: sweeps of leftovers, the runtime's charges
// (subscription renewals, number rentals), its claims, lease renewals, approval sweeps and the
// workers' polls (call analyses, webhook deliveries). A tick runs at once (or, when asked, one pause
// after the start) and then `every` after the last one ended, never two at a time; a tick that dies
// is logged with what it was and the next runs on time; the loop ends with the scope (or the fiber)
// it runs in.
import { Duration, Effect, type Scope } from "effect"
import { Log } from "./Log.js"

export interface Periodic<A, R> {
  /** What the tick does, for the log: "preview clips sweep", "subscription renewals". */
  readonly what: string
  /** The pause after each tick; a function of its result for a loop that slows down when idle. */
  readonly every: Duration.DurationInput | ((last: A | undefined) => Duration.DurationInput)
  readonly tick: Effect.Effect<A, never, R>
  /** A log line's fields worth writing after a tick (counts of what it did), or nothing. */
  readonly report?: (a: A) => Record<string, unknown> | undefined
  /** That line's message ("preview clips swept"); `what` by default. */
  readonly reported?: string
  /** The first tick at once (the default), or one pause after the start. */
  readonly first?: "now" | "after-pause"
}

/** The loop itself, forever: fork it in a scope (or use `periodicScoped`). */
export const periodic = <A, R>(o: Periodic<A, R>): Effect.Effect<never, never, R | Log> =>
  Effect.gen(function* () {
    const log = yield* Log
    const once: Effect.Effect<A | undefined, never, R> = o.tick.pipe(
      Effect.tap((a) => {
        const fields = o.report?.(a)
        return fields === undefined ? Effect.void : Effect.sync(() => log.info(fields, o.reported ?? o.what))
      }),
      Effect.catchAllDefect((err) =>
        Effect.sync(() => {
          log.error({ err }, `${o.what} failed`)
          return undefined
        }),
      ),
    )
    const pause = (last: A | undefined): Duration.Duration =>
      Duration.decode(typeof o.every === "function" ? o.every(last) : o.every)
    let last = o.first === "after-pause" ? undefined : yield* once
    for (;;) {
      yield* Effect.sleep(pause(last))
      last = yield* once
    }
  })

/** Starts the loop in the current scope: it stops when the scope closes. */
export const periodicScoped = <A, R>(o: Periodic<A, R>): Effect.Effect<void, never, R | Log | Scope.Scope> =>
  Effect.asVoid(Effect.forkScoped(periodic(o)))
