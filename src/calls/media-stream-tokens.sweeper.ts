// Keeps media_stream_tokens bounded: tokens an hour past their expiry (taken or not) are deleted
// every ten minutes, in each process that serves HTTP (the ones that take them).
import { Duration, Effect, type Layer } from "effect"
import type { Clock } from "../platform/Clock.js"
import { Db } from "../platform/Db.js"
import type { Instance } from "../platform/Instance.js"
import type { Log } from "../platform/Log.js"
import { httpSweeper } from "../platform/sweeper.js"
import { sweepStreamTokens } from "./media-stream-tokens.repo.js"

export const StreamTokenSweeperLive: Layer.Layer<never, never, Db | Clock | Instance | Log> = httpSweeper({
  what: "media stream tokens",
  every: Duration.minutes(10),
  sweep: () =>
    Effect.flatMap(Db, ({ sql }) =>
      Effect.map(
        Effect.promise(() => sweepStreamTokens(sql, 3_600_000)),
        (deleted) => ({ deleted }),
      ),
    ),
  swept: (r) => r.deleted > 0,
})
