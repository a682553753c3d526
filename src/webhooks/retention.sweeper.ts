// Keeps the webhook outbox bounded: events older than 30 days whose deliveries are all settled
// (delivered, failed, or pending only to a deleted endpoint) are deleted with their deliveries and
// attempts, every ten minutes, in batches, in each process that serves HTTP.
import { Duration, Effect, type Layer } from "effect"
import type { Clock } from "../platform/Clock.js"
import { Db } from "../platform/Db.js"
import type { Instance } from "../platform/Instance.js"
import type { Log } from "../platform/Log.js"
import { httpSweeper } from "../platform/sweeper.js"
import { pruneOldEvents } from "./outbox.repo.js"

export const WEBHOOK_RETENTION_DAYS = 30
/** Events deleted per statement: a large backlog goes in short transactions, not one long one. */
const BATCH = 1000
/** Batches per sweep; the rest waits for the next sweep. */
const MAX_BATCHES = 50

export const WebhookRetentionSweeperLive: Layer.Layer<never, never, Db | Clock | Instance | Log> = httpSweeper({
  what: "old webhook events",
  every: Duration.minutes(10),
  sweep: () =>
    Effect.flatMap(Db, ({ sql }) =>
      Effect.promise(async () => {
        let deleted = 0
        for (let i = 0; i < MAX_BATCHES; i++) {
          const n = await pruneOldEvents(sql, WEBHOOK_RETENTION_DAYS, BATCH)
          deleted += n
          if (n < BATCH) break
        }
        return { deleted }
      }),
    ),
  swept: (r) => r.deleted > 0,
})
