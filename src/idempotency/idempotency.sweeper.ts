// Keeps idempotency_keys bounded: rows past their 24 hours are deleted every ten minutes, in each
// process that serves HTTP (the ones that write them).
import { Duration, Effect, type Layer } from "effect"
import type { Clock } from "../platform/Clock.js"
import type { Db } from "../platform/Db.js"
import type { Instance } from "../platform/Instance.js"
import type { Log } from "../platform/Log.js"
import { httpSweeper } from "../platform/sweeper.js"
import { pruneExpired } from "./idempotency.service.js"

export const IdempotencySweeperLive: Layer.Layer<never, never, Db | Clock | Instance | Log> = httpSweeper({
  what: "expired idempotency keys",
  every: Duration.minutes(10),
  sweep: () => Effect.map(pruneExpired, (expired) => ({ expired })),
  swept: (r) => r.expired > 0,
})
