// The bus as an Effect service: NATS when NATS_URL is set, otherwise the in-process bus; either
// way drained when the process's scope closes.
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "./AppConfig.js"
import type { BusClient, BusMsg } from "./bus/bus.js"
import { makeMemoryBus } from "./bus/memory.bus.js"
import { namespaced } from "./bus/namespaced.bus.js"
import { connectNatsBus } from "./bus/nats.bus.js"
import { StartupError } from "./errors.js"
import { Instance } from "./Instance.js"
import { Log } from "./Log.js"

export class Bus extends Context.Tag("parley/Bus")<Bus, BusClient>() {}

export const BusLive: Layer.Layer<Bus, never, AppConfig | Log | Instance> = Layer.scoped(
  Bus,
  Effect.gen(function* () {
    const config = yield* AppConfig
    const log = yield* Log
    const instance = yield* Instance
    const url = config.natsUrl
    // A handler that throws is a bug in that handler; the subscription lives on, the log says so.
    const onError = (err: unknown, msg: BusMsg) => log.error({ err, subject: msg.subject }, "bus handler failed")
    const bus = yield* Effect.acquireRelease(
      url === undefined
        ? Effect.sync(() => makeMemoryBus({ onError }))
        : Effect.tryPromise({
            try: () => connectNatsBus({ url, name: `parley-${instance.role}-${instance.id}`, onError }),
            catch: (e) => new StartupError(`could not connect to NATS at ${url}: ${(e as Error).message}`),
          }).pipe(Effect.orDie),
      (b) => Effect.promise(() => b.drain()),
    )
    log.info({ kind: bus.kind, namespace: config.busNamespace || undefined }, "bus connected")
    return namespaced(bus, config.busNamespace)
  }),
)
