// The api process's turn-stream hub as a service: built once per process, closed (every stream
// ended) when the process shuts down.
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import { Bus } from "../platform/Bus.js"
import { Log } from "../platform/Log.js"
import { TurnHub } from "./turn-hub.js"

export class TurnStreams extends Context.Tag("parley/TurnStreams")<TurnStreams, TurnHub>() {}

export const TurnStreamsLive: Layer.Layer<TurnStreams, never, AppConfig | Bus | Log> = Layer.scoped(
  TurnStreams,
  Effect.gen(function* () {
    const config = yield* AppConfig
    const hub = new TurnHub(yield* Bus, yield* Log, config.sse)
    yield* Effect.addFinalizer(() => Effect.sync(() => hub.close()))
    return hub
  }),
)
