// The api process's approval-stream hub as a service: built once per process, its watchers told to
// reconnect elsewhere when the process stops and every stream ended when the layer closes.
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import { Bus } from "../platform/Bus.js"
import { Log } from "../platform/Log.js"
import { ApprovalHub } from "./approval-hub.js"

export class ApprovalStreams extends Context.Tag("parley/ApprovalStreams")<ApprovalStreams, ApprovalHub>() {}

export const ApprovalStreamsLive: Layer.Layer<ApprovalStreams, never, AppConfig | Bus | Log> = Layer.scoped(
  ApprovalStreams,
  Effect.acquireRelease(
    Effect.gen(function* () {
      const config = yield* AppConfig
      return new ApprovalHub(yield* Bus, yield* Log, config.sse)
    }),
    (hub) => Effect.sync(() => hub.close()),
  ),
)
