// Keeps the preview clip store bounded: deletes clips unused for PREVIEW_CLIP_TTL_DAYS and, least
// recently used first, clips beyond the store's count caps. Runs hourly in every api process.
import { Duration, Effect, type Layer } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import type { Clock } from "../platform/Clock.js"
import type { Db } from "../platform/Db.js"
import type { Instance } from "../platform/Instance.js"
import type { Log } from "../platform/Log.js"
import { httpSweeper } from "../platform/sweeper.js"
import { deleteBeyond, deleteUnusedSince } from "./previews.repo.js"

/**
 * Clips only anonymous callers asked for that are kept, however recently used: with clips of at
 * most ~180 KB (500 characters, ~30 s) that bounds what a public flood can store to ~1.8 GB, and
 * it can evict only its own kind.
 */
export const MAX_ANONYMOUS_CLIPS = 10_000
/** All clips kept (~9 GB at the largest clip size; opening lines are typically ~25 KB). */
export const MAX_CLIPS = 50_000

/** Rows one delete statement takes: a short statement that holds few locks. */
const SWEEP_BATCH = 500
/** Statements one sweep runs at most per rule; what is left waits for the next sweep. */
const MAX_BATCHES = 100
const SWEEP_EVERY = Duration.hours(1)
const DAY_MS = 86_400_000

export interface SweepLimits {
  readonly maxAnonymous: number
  readonly maxClips: number
  readonly batch: number
}

export interface SweepResult {
  /** Unused for longer than the TTL. */
  readonly expired: number
  /** Beyond a cap. */
  readonly evicted: number
}

/** Runs `step` (one bounded delete) until it takes less than a batch or the budget is spent. */
const drain = (step: Effect.Effect<number, never, Db>, batch: number): Effect.Effect<number, never, Db> =>
  Effect.gen(function* () {
    let total = 0
    for (let i = 0; i < MAX_BATCHES; i++) {
      const n = yield* step
      total += n
      if (n < batch) break
    }
    return total
  })

/**
 * One sweep as of `now`: clips last used more than the TTL before it go, then anonymous clips
 * beyond their cap, then any beyond the total cap. Safe to run in several processes at once.
 */
export const sweepPreviewClips = (
  now: Date,
  limits: Partial<SweepLimits> = {},
): Effect.Effect<SweepResult, never, Db | AppConfig> =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const { maxAnonymous = MAX_ANONYMOUS_CLIPS, maxClips = MAX_CLIPS, batch = SWEEP_BATCH } = limits
    const before = new Date(now.getTime() - config.previewClipTtlDays * DAY_MS)
    const expired = yield* drain(deleteUnusedSince(before, batch), batch)
    const anonymous = yield* drain(deleteBeyond(maxAnonymous, true, batch), batch)
    const overall = yield* drain(deleteBeyond(maxClips, false, batch), batch)
    return { expired, evicted: anonymous + overall }
  })

/**
 * The hourly sweep, started with the layer and stopped with its scope; only processes serving
 * HTTP run it (the runtime role never stores clips). A failed sweep is logged and the next runs.
 */
export const PreviewSweeperLive: Layer.Layer<never, never, Db | AppConfig | Clock | Instance | Log> = httpSweeper({
  what: "preview clips",
  every: SWEEP_EVERY,
  sweep: sweepPreviewClips,
  swept: (r) => r.expired + r.evicted > 0,
})
