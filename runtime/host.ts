// The runtime role's process host: claims runs that need an owner (actors/leases.ts: a lease row in
// Postgres, renewed while it lives), drives each with a RunDriver, listens for the api's commands
// on the bus (host/bus-commands.ts), runs its periodic work as Effect loops in one scope that stop()
// closes (host/loops.ts) and the background workers (workers/). Nothing here is the only copy of
// anything: another runtime process can take any run over from Postgres. What each run dials on,
// and what it costs, is chosen per run (host/run-providers.ts, host/call-money.ts).

import { Effect, Exit, Option, Scope } from "effect"
import { SlotCounter } from "../src/dialing/pacing.js"
import { Credentials } from "../src/onboarding/Credentials.js"
import { AppConfig } from "../src/platform/AppConfig.js"
import { Bus } from "../src/platform/Bus.js"
import { Clock } from "../src/platform/Clock.js"
import { Db } from "../src/platform/Db.js"
import { FairTimers } from "../src/platform/fair-timers.js"
import { Instance } from "../src/platform/Instance.js"
import { Log } from "../src/platform/Log.js"
import { RT_PING, RT_RUN_WAKE, type RunControl } from "../src/platform/subjects.js"
import { ownLlmOf } from "../src/providers/accounts.js"
import { makeRecordingEncoder } from "../src/providers/audio/recording-encoder.js"
import { Llm } from "../src/providers/Llm.js"
import { Mail } from "../src/providers/Mail.js"
import { Telephony } from "../src/providers/Telephony.js"
import { makeRecordings, recordingStoreFor } from "../src/recordings/recordings.service.js"
import { TurnWriters } from "../src/turns/turn-writer.js"
import { runLeases } from "./actors/leases.js"
import { RunDriver } from "./actors/run-driver.js"
import { TurnSink } from "./actors/turns.js"
import { listenForCommands } from "./host/bus-commands.js"
import { callMoney } from "./host/call-money.js"
import { dialLimitsCache } from "./host/dial-limits-cache.js"
import { dialerSettings } from "./host/dial-settings.js"
import { forkBillingJobs, forkHostLoops } from "./host/loops.js"
import { runProviders } from "./host/run-providers.js"
import { trackRuntime } from "./runtime.metrics.js"
import { type Recognition, startVoiceRuntime } from "./voice/voice-runtime.js"
import { startAnalysisWorker } from "./workers/analysis-worker.js"
import { startDataFetchWorker } from "./workers/data-fetch.js"
import { startWebhookDelivery } from "./workers/webhook-delivery.js"

export interface RuntimeHost {
  /** Runs this process owns right now. */
  readonly ownedRuns: () => number[]
  /** How calls heard as audio are recognised here; undefined when MEDIA_STREAMS=none. */
  readonly recognition: Recognition | undefined
  /** This process's api listens on `port` (--role all): the simulated carrier's streams connect there. */
  apiListening(port: number): void
  stop(): Promise<void>
}

/** A released run's wake is sent again after this long (see stop()). */
const HANDOVER_REWAKE_MS = 300

export const startRuntimeHost: Effect.Effect<
  RuntimeHost,
  never,
  Bus | Instance | Log | Db | Clock | AppConfig | Llm | Telephony | Credentials | TurnWriters
> = Effect.gen(function* () {
  const bus = yield* Bus
  const instance = yield* Instance
  const log = yield* Log
  const config = yield* AppConfig
  const { sql } = yield* Db
  const llm = yield* Llm
  const telephony = yield* Telephony
  const credentials = yield* Credentials
  const clock = yield* Clock
  // Optional: a host built without the mail service (tests) still delivers webhooks, and logs instead of mailing.
  const mail = yield* Effect.serviceOption(Mail)
  const context = yield* Effect.context<Db | Clock | Log | Bus | AppConfig>()
  const runEffect = <A, E>(eff: Effect.Effect<A, E, Db | Clock | Log | Bus | AppConfig>) =>
    Effect.runPromise(Effect.either(Effect.provide(eff, context)))

  const me = instance.id
  const settings = dialerSettings(config)
  const limits = dialLimitsCache({ sql, log, config })
  const turns = new TurnSink(yield* TurnWriters, log)
  // Post-call analysis (runtime/workers/analysis-worker.ts): on the workspace's own model when it has one.
  const analysis = startAnalysisWorker({
    sql,
    bus,
    log,
    config,
    me: instance.id,
    platformLlm: llm,
    ownLlm: async (tenantId) => {
      const own = await credentials.active(tenantId, "llm")
      return own === undefined ? undefined : ownLlmOf(own, config)
    },
  })
  const drivers = new Map<number, RunDriver>()
  const untrackRuntime = trackRuntime({
    runs: () => drivers.size,
    calls: () => [...drivers.values()].reduce((n, d) => n + d.liveCalls, 0),
  })
  let stopping = false

  // Calls heard as audio (MEDIA_STREAMS): the media streams, the voice pipeline's engines, and the
  // encoder (a worker thread) and store of the calls recorded.
  const recordings = makeRecordings({ sql, log, store: recordingStoreFor(config, sql) })
  const encoder = config.mediaStreams === "none" ? undefined : makeRecordingEncoder()
  const voice =
    encoder === undefined
      ? undefined
      : yield* Effect.promise(() =>
          startVoiceRuntime({
            config,
            sql,
            bus,
            log,
            credentials,
            withApi: instance.role === "all",
            recordings: { encoder, save: (r) => recordings.saveCallRecording(r) },
          }),
        )
  const money = callMoney({ log, runEffect, callEnded: () => analysis.callEnded() })
  const providers = runProviders({
    config,
    credentials,
    sql,
    bus,
    log,
    clock,
    platformTelephony: telephony,
    platformLlm: llm,
    voice,
    deps: {
      ...(voice !== undefined && { voice }),
      sql,
      bus,
      log,
      me,
      pacer: limits.pacer,
      slots: new SlotCounter(),
      turns,
      timers: new FairTimers(),
      settings,
    },
    limits,
    money,
  })

  /** Claimed runs that need an owner (one given run, or any); a driver for each. */
  const leases = runLeases({
    sql,
    log,
    me,
    leaseMs: settings.leaseMs,
    drivers,
    stopping: () => stopping,
    drive: async (claimed, setup) => {
      const driver = new RunDriver(await providers.depsFor(claimed, setup), claimed, setup)
      drivers.set(claimed.id, driver)
      void driver.done.then(() => {
        if (drivers.get(claimed.id) === driver) drivers.delete(claimed.id)
        turns.forget(claimed.id)
      })
      await driver.start(claimed)
      log.info({ run_id: claimed.id, status: claimed.status, previous_owner: claimed.previous_owner }, "run claimed")
    },
  })
  const claim = leases.claim

  const subscriptions = [
    ...listenForCommands({ bus, instance, drivers, claim, recognition: voice?.recognition }),
    startDataFetchWorker({ sql, bus, log, config, now: () => clock.now() }),
  ]
  // Outbound webhooks: every runtime process posts due deliveries; leases keep each with one at a time.
  const webhooks = startWebhookDelivery({ sql, bus, log, config, me, mail: Option.getOrUndefined(mail) })

  const scope = yield* Scope.make()
  yield* forkHostLoops(scope, {
    sql,
    bus,
    log,
    claimIntervalMs: config.runClaimIntervalMs,
    leaseMs: settings.leaseMs,
    leases,
    refreshLimits: () => limits.refresh(drivers.values()),
    telephonyFor: async (tenantId) => (await providers.providersFor(tenantId)).telephony,
  })
  void claim()
  yield* forkBillingJobs(scope)
  log.info({ instance: me }, "runtime host started")
  return {
    ownedRuns: () => [...drivers.keys()],
    recognition: voice?.recognition,
    apiListening: (port) => voice?.apiListening(port),
    stop: async () => {
      // Hand-over (docs/operations.md): claim nothing more, and leave the queue groups first, so
      // wakes and pings go to the other runtime processes from now on.
      stopping = true
      untrackRuntime()
      // Webhook posts in flight finish (each within WEBHOOK_TIMEOUT_MS) beside the calls.
      const webhooksStopped = webhooks.stop()
      await Promise.all(
        subscriptions.filter((s) => s.subject === RT_PING || s.subject === RT_RUN_WAKE).map((s) => s.drain()),
      )
      await leases.settled()
      // Calls in flight finish (up to the shutdown budget; the rest are ended, billed once) while
      // the leases are still renewed; then each run is released and another process woken to take
      // it at once rather than at its next claim tick.
      const wake = (d: RunDriver): void => {
        try {
          bus.publish(RT_RUN_WAKE, { run_id: d.runId, tenant_id: d.tenantId, command: "resume" } satisfies RunControl)
        } catch (err) {
          log.warn({ err, run_id: d.runId }, "could not wake another runtime for a released run")
        }
      }
      const handOver = async (d: RunDriver): Promise<void> => {
        if (d.lost) return
        wake(d)
        log.info({ run_id: d.runId }, "run handed over")
        // Once more a moment later: a claim skips a run row another transaction holds locked.
        await new Promise((r) => setTimeout(r, HANDOVER_REWAKE_MS))
        wake(d)
      }
      const handed = await Promise.all(
        [...drivers.values()].map(async (d) => {
          await d.shutdown(config.shutdownTimeoutMs)
          await handOver(d)
          return d
        }),
      )
      await analysis.stop()
      // Ends every loop of the host (claims, lease renewals, sweeps, renewals and rentals).
      await Effect.runPromise(Scope.close(scope, Exit.void))
      await bus.flush().catch(() => {}) // a bus already gone has nothing left to send
      await turns.flush()
      await webhooksStopped
      await Promise.all(subscriptions.map((s) => s.drain()))
      voice?.stop()
      await encoder?.close().catch((err: unknown) => log.warn({ err }, "the recording encoder did not close"))
      log.info({ released: handed.filter((d) => !d.lost).map((d) => d.runId) }, "runtime host stopped")
    },
  }
})
