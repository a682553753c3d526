// Wall-clock time as a service: domain code asks this instead of Date.now() so tests can pin
// or advance time (expiries, cool-downs, calling windows).
import { Context, Layer } from "effect"

export interface WallClock {
  now(): Date
  nowMs(): number
}

export class Clock extends Context.Tag("parley/Clock")<Clock, WallClock>() {
  static readonly live: Layer.Layer<Clock> = Layer.succeed(Clock, {
    now: () => new Date(),
    nowMs: () => Date.now(),
  })

  /** A clock that stands still until moved; for tests. */
  static fixed(start: Date): { layer: Layer.Layer<Clock>; advance(ms: number): void; set(at: Date): void } {
    let t = start.getTime()
    return {
      layer: Layer.succeed(Clock, { now: () => new Date(t), nowMs: () => t }),
      advance: (ms) => {
        t += ms
      },
      set: (at) => {
        t = at.getTime()
      },
    }
  }
}
