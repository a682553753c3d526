// The api process's approval-stream hub as a service: built once per process (counting pending
// approvals in Postgres), its watchers told to reconnect elsewhere when the process stops and every
// stream ended when the layer closes.
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import { Bus } from "../platform/Bus.js"
import { Db } from "../platform/Db.js"
import { Log } from "../platform/Log.js"
import { ApprovalHub } from "./approval-hub.js"
import { countPending } from "./approval-queue.repo.js"

export class ApprovalStreams extends Context.Tag("parley/ApprovalStreams")<ApprovalStreams, ApprovalHub>() {}

export const ApprovalStreamsLive: Layer.Layer<ApprovalStreams, never, AppConfig | Bus | Db | Log> = Layer.scoped(
  ApprovalStreams,
  Effect.acquireRelease(
    Effect.gen(function* () {
      const config = yield* AppConfig
      const { sql } = yield* Db
      return new ApprovalHub(yield* Bus, yield* Log, config.sse, Date.now, (tenantId) => countPending(sql, tenantId))
    }),
    (hub) => Effect.sync(() => hub.close()),
  ),
)
