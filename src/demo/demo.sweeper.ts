// Keeps the public demo's leftovers bounded: anonymous voice clones past their TTL go (their row,
// and by cascade their preview clips and token; their sample unless another voice has the same
// bytes; the vendor's copy), and demo calls the dialer should no longer dial are given up. Runs
// every minute in each process that serves HTTP, with the platform Clock.
import { rm } from "node:fs/promises"
import { resolve } from "node:path"
import { Duration, Effect, type Layer } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import type { Clock } from "../platform/Clock.js"
import { Db } from "../platform/Db.js"
import type { Instance } from "../platform/Instance.js"
import { Log } from "../platform/Log.js"
import { httpSweeper } from "../platform/sweeper.js"
import { Speech } from "../providers/Speech.js"
import { type AvatarRow, deleteExpiredDemoAvatars, sampleInUse } from "../voices/avatars.repo.js"
import { giveUpUndialled } from "./demo.feed.js"

const SWEEP_EVERY = Duration.minutes(1)
/** Rows one delete takes; a sweep runs at most MAX_BATCHES of them and leaves the rest for the next. */
const SWEEP_BATCH = 100
const MAX_BATCHES = 20

export interface DemoSweep {
  /** Expired demo voices removed. */
  readonly voices: number
  /** Their sample files removed (none when another voice has the same bytes). */
  readonly samples: number
  /** Demo calls given up undialled. */
  readonly calls: number
}

/** The vendor forgets a removed voice it made (best effort: a failure is logged, not retried). */
const forgetAtVendor = (rows: readonly AvatarRow[]) =>
  Effect.gen(function* () {
    const speech = yield* Speech
    const log = yield* Log
    const forget = speech.deleteVoice?.bind(speech)
    if (forget === undefined) return
    for (const row of rows) {
      const vendorId = row.provider_voice_id
      if (vendorId === null || row.provider !== speech.name) continue
      yield* Effect.tryPromise(() => forget(vendorId)).pipe(
        Effect.catchAll((e) =>
          Effect.sync(() =>
            log.warn({ err: e.error, voice: row.id }, "the speech provider did not forget a demo voice"),
          ),
        ),
      )
    }
  })

/** One sweep as of `now`. Safe to run in several processes at once. */
export const sweepDemo = (now: Date): Effect.Effect<DemoSweep, never, Db | AppConfig | Speech | Log> =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const config = yield* AppConfig
    let voices = 0
    let samples = 0
    for (let i = 0; i < MAX_BATCHES; i++) {
      const rows = yield* Effect.promise(() => deleteExpiredDemoAvatars(sql, now, SWEEP_BATCH))
      voices += rows.length
      const files = new Map(rows.map((r) => [r.sample_sha256.toString("hex"), r]))
      for (const row of files.values()) {
        if (yield* Effect.promise(() => sampleInUse(sql, row.sample_sha256))) continue
        yield* Effect.promise(() => rm(resolve(config.dataDir, row.sample_path), { force: true }))
        samples++
      }
      yield* forgetAtVendor(rows)
      if (rows.length < SWEEP_BATCH) break
    }
    const calls = yield* giveUpUndialled(now.getTime())
    return { voices, samples, calls }
  })

/**
 * The minute's sweep, started with the layer and stopped with its scope; only processes serving
 * HTTP run it (they are the ones that mint demo voices and calls). A failed sweep is logged.
 */
export const DemoSweeperLive: Layer.Layer<never, never, Db | AppConfig | Clock | Instance | Log | Speech> = httpSweeper(
  {
    what: "demo leftovers",
    every: SWEEP_EVERY,
    sweep: sweepDemo,
    swept: (r) => r.voices + r.calls > 0,
  },
)
