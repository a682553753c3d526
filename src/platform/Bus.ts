// The bus as an Effect service: NATS when NATS_URL is set, otherwise the in-process bus; either
// way drained when the process's scope closes.
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "./AppConfig.js"
import type { BusClient, BusMsg, Payload } from "./bus/bus.js"
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

/**
 * Publishes best effort: a message the bus did not take is logged (`what`, with `context`) and the caller
 * goes on. Only for what whoever listens also finds on its own (a poll, a claim, the next start).
 */
export const publishOrWarn = (
  subject: string,
  payload: Payload,
  what: string,
  context: Readonly<Record<string, unknown>> = {},
) =>
  Effect.gen(function* () {
    const bus = yield* Bus
    const log = yield* Log
    yield* Effect.try(() => bus.publish(subject, payload)).pipe(
      Effect.catchAll((err) => Effect.sync(() => log.warn({ err, subject, ...context }, what))),
    )
  })
