// The runtime role's process host: joins the runtime queue group on the bus and answers for this
// process. Run, call and approval actors are hosted here as they land.
import { Effect } from "effect"
import { Bus } from "../src/services/Bus.js"
import { Instance } from "../src/services/Instance.js"
import { Log } from "../src/services/Log.js"
import { RT_PING, RUNTIME_QUEUE, type RuntimePong } from "./subjects.js"

export interface RuntimeHost {
  stop(): Promise<void>
}

export const startRuntimeHost: Effect.Effect<RuntimeHost, never, Bus | Instance | Log> = Effect.gen(function* () {
  const bus = yield* Bus
  const instance = yield* Instance
  const log = yield* Log
  const pong: RuntimePong = { instance_id: instance.id, host: instance.host, started_at: instance.startedAt.toISOString() }
  const ping = bus.subscribe(RT_PING, (msg) => void msg.respond(pong), { queue: RUNTIME_QUEUE })
  log.info({ instance: instance.id }, "runtime host started")
  return {
    stop: async () => {
      await ping.drain()
      log.info("runtime host stopped")
    },
  }
})
