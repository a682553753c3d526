// Keeps recordings to their workspace's retention: every ten minutes, in each process that serves
// HTTP, recordings past their expiry are deleted (rows and pg chunks at once, S3 objects after), and
// S3 objects whose deletion failed earlier (an erase's, a replacement's) are tried again.
import { Duration, Effect, type Layer } from "effect"
import type { Clock } from "../platform/Clock.js"
import type { Instance } from "../platform/Instance.js"
import type { Log } from "../platform/Log.js"
import { httpSweeper } from "../platform/sweeper.js"
import { Recordings } from "./recordings.service.js"

export const RecordingSweeperLive: Layer.Layer<never, never, Recordings | Clock | Instance | Log> = httpSweeper({
  what: "recordings",
  every: Duration.minutes(10),
  sweep: () =>
    Effect.flatMap(Recordings, (r) =>
      Effect.promise(async () => {
        const expired = await r.sweepExpiredRecordings()
        const objects = await r.purgeDeletedObjects()
        return { expired, objects: objects.deleted, failed: objects.failed }
      }),
    ),
  swept: (r) => r.expired > 0 || r.objects > 0 || r.failed > 0,
})
