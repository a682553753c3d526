// The bus as an Effect service: NATS when NATS_URL is set, otherwise the in-process bus; either
// way drained when the process's scope closes.
import { Context, Effect, Layer } from "effect"
import type { BusClient } from "../bus/bus.js"
import { makeMemoryBus } from "../bus/memory.bus.js"
import { namespaced } from "../bus/namespaced.bus.js"
import { connectNatsBus } from "../bus/nats.bus.js"
import { AppConfig } from "./AppConfig.js"
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
    const bus = yield* Effect.acquireRelease(
      url === undefined
        ? Effect.sync(() => makeMemoryBus())
        : Effect.promise(() => connectNatsBus({ url, name: `parley-${instance.role}-${instance.id}` })),
      (b) => Effect.promise(() => b.drain()),
    )
    log.info({ kind: bus.kind, namespace: config.busNamespace || undefined }, "bus connected")
    return namespaced(bus, config.busNamespace)
  }),
)
