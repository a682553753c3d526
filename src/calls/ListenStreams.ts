// The api process's listen-stream hub as a service: built once per process (asking Postgres whether a
// call whose audio fell quiet is over), every listener's stream ended when the layer closes.
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import { Bus } from "../platform/Bus.js"
import { Db } from "../platform/Db.js"
import { Log } from "../platform/Log.js"
import { callOver } from "./listen.repo.js"
import { LISTEN_MAX_BUFFERED_BYTES, ListenHub } from "./listen-hub.js"

export class ListenStreams extends Context.Tag("parley/ListenStreams")<ListenStreams, ListenHub>() {}

export const ListenStreamsLive: Layer.Layer<ListenStreams, never, AppConfig | Bus | Db | Log> = Layer.scoped(
  ListenStreams,
  Effect.acquireRelease(
    Effect.gen(function* () {
      const config = yield* AppConfig
      const { sql } = yield* Db
      // A listener behind by more than this is cut (and its EventSource reconnects to the call as it is now).
      const settings = {
        ...config.sse,
        maxBufferedBytes: Math.min(config.sse.maxBufferedBytes, LISTEN_MAX_BUFFERED_BYTES),
      }
      return new ListenHub(yield* Bus, yield* Log, settings, Date.now, async (tenantId, callId) => {
        return !(await callOver(sql, tenantId, callId))
      })
    }),
    (hub) => Effect.sync(() => hub.close()),
  ),
)
