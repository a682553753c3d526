// The api process's turn-stream hub as a service: built once per process, closed (every stream
// ended) when the process shuts down. It reads a hole in a run's seqs, and where a run's stream
// starts, from Postgres, and has its streams reconnect once the bus is back (docs/operations.md).
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import { Bus } from "../platform/Bus.js"
import { Db } from "../platform/Db.js"
import { Log } from "../platform/Log.js"
import { TurnHub } from "./turn-hub.js"
import { lastTurnSeq, turnsAfter } from "./turns.repo.js"

/** How often the bus's connection is looked at (a reconnect makes the streams resync). */
const BUS_WATCH_MS = 500

export class TurnStreams extends Context.Tag("parley/TurnStreams")<TurnStreams, TurnHub>() {}

export const TurnStreamsLive: Layer.Layer<TurnStreams, never, AppConfig | Bus | Db | Log> = Layer.scoped(
  TurnStreams,
  Effect.gen(function* () {
    const config = yield* AppConfig
    const { sql } = yield* Db
    const hub = new TurnHub(
      yield* Bus,
      yield* Log,
      config.sse,
      Date.now,
      (runId, afterSeq, limit) => turnsAfter(sql, runId, afterSeq, undefined, limit),
      (runId) => lastTurnSeq(sql, runId),
    )
    // Back from a bus outage: the streams are told to reconnect and read what they missed.
    const bus = yield* Bus
    let connected = true
    const watch = setInterval(() => {
      const now = bus.status().connected
      if (now && !connected) hub.resync()
      connected = now
    }, BUS_WATCH_MS)
    watch.unref()
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        clearInterval(watch)
        hub.close()
      }),
    )
    return hub
  }),
)
