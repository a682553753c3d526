// The runtime role's process host: joins the runtime queue group on the bus and answers for this
// process. Run, call and approval actors are hosted here as they land.
import { Effect, Fiber } from "effect"
import { renewalLoop } from "../src/billing/subscription.service.js"
import { Clock } from "../src/services/Clock.js"
import { Db } from "../src/services/Db.js"
import { Bus } from "../src/services/Bus.js"
import { Instance } from "../src/services/Instance.js"
import { Log } from "../src/services/Log.js"
import { RT_PING, RUNTIME_QUEUE, type RuntimePong } from "./subjects.js"

export interface RuntimeHost {
  stop(): Promise<void>
}

export const startRuntimeHost: Effect.Effect<RuntimeHost, never, Bus | Instance | Log | Db | Clock> = Effect.gen(function* () {
  const bus = yield* Bus
  const instance = yield* Instance
  const log = yield* Log
  const pong: RuntimePong = { instance_id: instance.id, host: instance.host, started_at: instance.startedAt.toISOString() }
  const ping = bus.subscribe(RT_PING, (msg) => void msg.respond(pong), { queue: RUNTIME_QUEUE })
  // Background jobs of the runtime role; every runtime process runs them, safely in parallel.
  const renewals = yield* Effect.forkDaemon(renewalLoop)
  log.info({ instance: instance.id }, "runtime host started")
  return {
    stop: async () => {
      await Effect.runPromise(Fiber.interrupt(renewals))
      await ping.drain()
      log.info("runtime host stopped")
    },
  }
})
