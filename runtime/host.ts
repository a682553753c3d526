// The runtime role's process host: claims runs that need an owner (leases.ts: a lease row in
// Postgres, renewed while it lives), drives each with a RunDriver, listens for the api's commands
// on the bus, sweeps expired approvals and hang-ups a carrier did not take, and answers rt.ping.
// Its periodic work runs as Effect loops in one scope that stop() closes. Nothing here is the only
// copy of anything: another runtime process can take any run over from Postgres. A rehearsal
// campaign's run (src/rehearsals/) is driven like any other, on the sim carrier and free of charge.
import { Duration, Effect, Exit, Option, Scope } from "effect"
import { expireAndAnnounce } from "../src/approvals/approval-changes.js"
import { callTerms } from "../src/billing/call-terms.js"
import { renewalLoop } from "../src/billing/subscription.service.js"
import { reserveCalls, settleCalls } from "../src/billing/usage.service.js"
import { numberRentalLoop } from "../src/numbers/rental.service.js"
import { Credentials } from "../src/onboarding/Credentials.js"
import { carrierAccountCaps, type DialLimits, effectiveDialLimits, workspaceCaps } from "../src/plans/dial-limits.js"
import { workspaceDialCaps } from "../src/plans/dial-limits.repo.js"
import { AppConfig } from "../src/platform/AppConfig.js"
import { Bus } from "../src/platform/Bus.js"
import { BatchWriter } from "../src/platform/batch-writer.js"
import { Clock } from "../src/platform/Clock.js"
import { Db, retryOnDisconnect } from "../src/platform/Db.js"
import { Instance } from "../src/platform/Instance.js"
import { Log } from "../src/platform/Log.js"
import { trackRuntime } from "../src/platform/metrics.js"
import { periodic } from "../src/platform/periodic.js"
import {
  type ApprovalDecided,
  type CallHandoffRequest,
  KB_RULES_CHANGED_ANY,
  type KbRulesChanged,
  RT_APPROVAL_DECIDED,
  RT_CALL_HANDOFF_ANY,
  RT_PING,
  RT_RUN_CONTROL,
  RT_RUN_WAKE,
  RUNTIME_QUEUE,
  type RunControl,
  type RuntimePong,
} from "../src/platform/subjects.js"
import { ownLlmOf, providerResolver } from "../src/providers/accounts.js"
import { Llm } from "../src/providers/Llm.js"
import { Mail } from "../src/providers/Mail.js"
import { Telephony } from "../src/providers/Telephony.js"
import { makeSimTelephony } from "../src/providers/telephony/sim.telephony.js"
import type { TelephonyProvider } from "../src/providers/telephony/telephony.interface.js"
import { TurnWriters } from "../src/turns/turn-writer.js"
import { startAnalysisWorker } from "./analysis-worker.js"
import { startDataFetchWorker } from "./data-fetch.js"
import { HANGUP_SWEEP_MS, sweepHangups } from "./hangups.js"
import { runLeases } from "./leases.js"
import { Pacer, SlotCounter } from "./pacing.js"
import { type DialerSettings, type DriverDeps, RunDriver } from "./run-driver.js"
import { busWebhookChannel } from "./telco-channel.js"
import { TurnSink } from "./turns.js"
import { startWebhookDelivery } from "./webhook-delivery.js"

export interface RuntimeHost {
  /** Runs this process owns right now. */
  readonly ownedRuns: () => number[]
  stop(): Promise<void>
}

const APPROVAL_SWEEP_MS = 5_000

interface Reservation {
  readonly tenantId: number
  readonly callRef: string
  readonly seconds: number
}
type Reserved = { ok: true; reservedMinor: number } | { ok: false }
type Charged = { chargedMinor: number }
/** A released run's wake is sent again after this long (see stop()). */
const HANDOVER_REWAKE_MS = 300
/** How often the dial limits of the workspaces whose runs are driven here are read again. */
const LIMITS_REFRESH_MS = 5_000

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
  const settings: DialerSettings = {
    timeScale: config.simTimeScale,
    callingHoursAny: config.callingHoursAny,
    leaseMs: config.runLeaseMs,
    perWorkflowConcurrency: config.dialer.maxConcurrentPerWorkflow,
    perTenantConcurrency: config.dialer.maxConcurrentPerTenant,
    maxAttempts: config.dialer.maxAttempts,
    retryBackoffMs: config.dialer.retryBackoffMs,
    ringTimeoutMs: 45_000,
    approvalHoldMs: config.approvalHoldMs,
    approvalHoldFloorMs: config.approvalHoldFloorMs,
    approvalTtlMs: config.approvalTtlMs,
  }
  const pacer = new Pacer({
    ratePerSecond: config.dialer.cpsPerTenant,
    burst: Math.max(1, Math.ceil(config.dialer.cpsPerTenant)),
  })
  const pacedCarriers = new Set<string>()
  /** A carrier account's pacing key, paced at the account's own rate (the sim: none) under DIALER_CPS_PER_CARRIER. */
  const carrierKey = (account: string): string => {
    const key = `carrier:${account}`
    if (!pacedCarriers.has(key)) {
      pacedCarriers.add(key)
      const cps = Math.min(carrierAccountCaps(account).callsPerSecond ?? Infinity, config.dialer.cpsPerCarrier)
      pacer.configure(key, cps, Math.max(1, Math.ceil(cps)))
    }
    return key
  }
  // A workspace's dial limits (src/plans/): its plan's or its own, under the DIALER_* ceilings; one
  // shared object per workspace that its run drivers read and refreshLimits() updates.
  const ceilings: DialLimits = {
    callsPerSecond: config.dialer.cpsPerTenant,
    maxConcurrentCalls: config.dialer.maxConcurrentPerTenant,
    maxConcurrentPerWorkflow: config.dialer.maxConcurrentPerWorkflow,
  }
  const tenantLimits = new Map<number, { current: DialLimits }>()
  const loadLimits = async (tenantId: number): Promise<{ current: DialLimits }> => {
    const caps = await workspaceDialCaps(sql, tenantId)
    const current = effectiveDialLimits(caps === undefined ? [] : [workspaceCaps(caps.plan, caps.own)], ceilings)
    const key = `tenant:${tenantId}`
    const ref = tenantLimits.get(tenantId)
    if (ref === undefined || ref.current.callsPerSecond !== current.callsPerSecond)
      pacer.configure(key, current.callsPerSecond, Math.max(1, Math.ceil(current.callsPerSecond)), Date.now())
    if (ref !== undefined) {
      ref.current = current
      return ref
    }
    const made = { current }
    tenantLimits.set(tenantId, made)
    return made
  }
  const refreshLimits = async (): Promise<void> => {
    const live = new Set([...drivers.values()].map((d) => d.tenantId))
    for (const id of tenantLimits.keys()) if (!live.has(id)) tenantLimits.delete(id)
    for (const id of live)
      await loadLimits(id).catch((err: unknown) => log.error({ err, tenant_id: id }, "loading dial limits failed"))
  }
  const providersFor = providerResolver({
    config,
    credentials,
    platformTelephony: telephony,
    platformLlm: llm,
    channel: busWebhookChannel(bus, log),
    log,
    terms: (tenantId) => callTerms(sql, tenantId, clock.now(), config.telcoA !== undefined),
  })
  const turns = new TurnSink(yield* TurnWriters, log)
  // Post-call analysis (runtime/analysis-worker.ts): on the workspace's own model when it has one.
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
  trackRuntime(() => ({ runs: drivers.size, calls: [...drivers.values()].reduce((n, d) => n + d.liveCalls, 0) }))
  let stopping = false

  // The settlements of calls ending together go in one transaction per group (runtime/settlements.ts).
  const settlements = new BatchWriter<"settle", { callRef: string; seconds: number }, Charged | undefined>(
    async (_, items) => {
      const group = items.map((i) => ({ callRef: i.callRef, connectedSeconds: i.seconds }))
      const r = await retryOnDisconnect(() => runEffect(settleCalls(group)))
      if (r._tag === "Left") return items.map(() => undefined)
      return r.right.map((x) => (x === undefined ? undefined : { chargedMinor: x.settled_minor ?? 0 }))
    },
    { maxBatch: 1_000, splitRefused: true },
  )
  /** A run's money: its calls are free of the per-minute rate only if they go out on the workspace's own accounts. */
  const moneyFor = (onOwnAccounts: boolean) => {
    // The reservations of calls of one workspace (and terms) starting together go in one transaction
    // and one wallet lock: a dial batch starts many calls in one loop turn.
    const reservations = new BatchWriter<string, Reservation, Reserved>(
      async (_, items) => {
        const { tenantId, seconds } = items[0]!
        const callRefs = items.map((i) => i.callRef)
        // Postgres out of reach is waited out (idempotent by call ref), not taken for a lack of funds.
        const r = await retryOnDisconnect(() => runEffect(reserveCalls(tenantId, callRefs, seconds, { onOwnAccounts })))
        if (r._tag === "Left") {
          log.info({ tenant_id: tenantId, reason: r.left.message }, "calls not funded")
          return callRefs.map(() => ({ ok: false as const }))
        }
        return r.right.map((x, i) => {
          if (x.ok) return { ok: true as const, reservedMinor: x.reserved_minor }
          log.info({ call_ref: callRefs[i], reason: "insufficient_funds" }, "call not funded")
          return { ok: false as const }
        })
      },
      { maxBatch: 500 },
    )
    return {
      reserve: (tenantId: number, callRef: string, seconds: number) =>
        reservations.submit(`${tenantId}:${seconds}`, { tenantId, callRef, seconds }),
      settle: (callRef: string, seconds: number) => {
        if (seconds > 0) analysis.callEnded()
        return settlements.submit("settle", { callRef, seconds })
      },
    }
  }
  const money = { platform: moneyFor(false), own: moneyFor(true) }
  /** The public demo's calls are the platform's own: nothing is held or charged, to anyone. */
  const free = {
    reserve: async () => ({ ok: true as const, reservedMinor: 0 }),
    settle: async (_callRef: string, seconds: number) => {
      if (seconds > 0) analysis.callEnded()
      return { chargedMinor: 0 }
    },
  }
  // A demo is now or never: its callee is not dialled again for a busy line or a callback.
  const demoSettings: DialerSettings = { ...settings, maxAttempts: 1 }

  /**
   * A simulation campaign's settings: its time scale; one attempt per callee (busy or no answer is an
   * outcome to count, not a retry); every calling window open; and a question held for the operator
   * SIM_APPROVAL_HOLD_MS of real time whatever the scale (the call machine multiplies the hold by it),
   * expiring with the hold so the campaign never waits on a question its call gave up on.
   */
  const simSettings = (timeScale: number): DialerSettings => ({
    ...settings,
    timeScale,
    callingHoursAny: true,
    maxAttempts: 1,
    approvalHoldMs: config.simApprovalHoldMs / Math.max(timeScale, 0.001),
    approvalTtlMs: config.simApprovalHoldMs,
  })
  /** The sim carrier at each campaign time scale in use (a campaign's calls never go out on a telco). */
  const simCarriers = new Map<number, TelephonyProvider>()
  const simCarrier = (timeScale: number): TelephonyProvider => {
    let t = simCarriers.get(timeScale)
    if (t === undefined) simCarriers.set(timeScale, (t = makeSimTelephony({ timeScale })))
    return t
  }

  const deps = { sql, bus, log, me, pacer, slots: new SlotCounter(), turns, settings }

  /** Claimed runs that need an owner (one given run, or any); a driver for each. */
  const leases = runLeases({
    sql,
    log,
    me,
    leaseMs: settings.leaseMs,
    drivers,
    stopping: () => stopping,
    drive: async (claimed, setup) => {
      const providers = await providersFor(claimed.tenant_id)
      const limits = await loadLimits(claimed.tenant_id)
      let runDeps: DriverDeps
      if (setup.kind === "rehearsal") {
        // A rehearsal: the sim carrier whatever accounts the workspace has, the workspace's language
        // model as its real runs use, nothing reserved or charged, and no carrier pacing to share.
        const timeScale = setup.sim_time_scale ?? config.simTimeScale
        runDeps = {
          ...deps,
          limits,
          settings: simSettings(timeScale),
          money: free,
          telephony: simCarrier(timeScale),
          llm: providers.llm,
          carrierKey: "sim",
        }
      } else {
        const demo = setup.kind === "demo"
        runDeps = {
          ...deps,
          limits,
          ...(demo && { settings: demoSettings }),
          money: demo ? free : providers.byok ? money.own : money.platform,
          telephony: providers.telephony,
          llm: providers.llm,
          carrierKey: carrierKey(providers.carrierAccount),
        }
      }
      const driver = new RunDriver(runDeps, claimed, setup)
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

  const pong: RuntimePong = {
    instance_id: instance.id,
    host: instance.host,
    started_at: instance.startedAt.toISOString(),
  }
  const subscriptions = [
    bus.subscribe(RT_PING, (msg) => void msg.respond(pong), { queue: RUNTIME_QUEUE }),
    // Any one runtime process claims a started or resumed run; the lease row decides, not the message.
    // A run it drives already looks for due targets again (a simulation campaign released a batch).
    bus.subscribe(
      RT_RUN_WAKE,
      (msg) => {
        const runId = msg.json<RunControl>().run_id
        drivers.get(runId)?.poke()
        return claim(runId)
      },
      { queue: RUNTIME_QUEUE },
    ),
    bus.subscribe(RT_RUN_CONTROL, (msg) => {
      const c = msg.json<RunControl>()
      if (c.command === "pause" || c.command === "resume" || c.command === "cancel")
        drivers.get(c.run_id)?.control(c.command)
      else if (c.command === "end_call" && c.call_id !== undefined) drivers.get(c.run_id)?.endCall(c.call_id)
    }),
    bus.subscribe(RT_APPROVAL_DECIDED, (msg) => {
      const d = msg.json<ApprovalDecided & { decided_by?: number | null }>()
      if (d.run_id !== null)
        drivers
          .get(d.run_id)
          ?.approvalDecided(d.approval_id, d.call_id, d.status, d.decided_by ?? null, d.value_minor ?? null)
    }),
    // Patch-in: every runtime process hears it (no queue group); only the one holding the call answers.
    bus.subscribe(RT_CALL_HANDOFF_ANY, (msg) => {
      const r = msg.json<CallHandoffRequest>()
      for (const d of drivers.values()) {
        if (d.tenantId !== r.tenant_id) continue
        const reply = d.handOff(r.call_id, r.operator_number)
        if (reply === undefined) continue
        // Not awaited: the conference takes a while and other calls' patch-ins must not queue behind it.
        void reply.then((rep) => msg.respond(rep))
        return
      }
    }),
    // Every runtime process hears every rule change (no queue group): each reloads its own runs'.
    bus.subscribe(KB_RULES_CHANGED_ANY, (msg) => {
      const c = msg.json<KbRulesChanged>()
      for (const d of drivers.values())
        if (d.tenantId === c.tenant_id && (c.workflow_id === null || c.workflow_id === d.rulesWorkflowId))
          d.rulesChanged()
    }),
    startDataFetchWorker({ sql, bus, log, config, now: () => clock.now() }),
  ]
  // Outbound webhooks: every runtime process posts due deliveries; leases keep each with one at a time.
  const webhooks = startWebhookDelivery({ sql, bus, log, config, me, mail: Option.getOrUndefined(mail) })

  // The host's periodic work, each a loop in this scope (the first tick one interval after start).
  const scope = yield* Scope.make()
  const every = (what: string, ms: number, tick: () => Promise<unknown>) =>
    Effect.forkIn(
      periodic({ what, every: Duration.millis(ms), tick: Effect.promise(tick), first: "after-pause" }),
      scope,
    )
  yield* every("run claim", config.runClaimIntervalMs, () => claim())
  yield* every("lease renewal", Math.max(100, Math.floor(settings.leaseMs / 3)), () => leases.renew())
  yield* every("approval sweep", APPROVAL_SWEEP_MS, () => expireAndAnnounce({ sql, bus, log }, "due"))
  yield* every("dial limits refresh", LIMITS_REFRESH_MS, refreshLimits)
  // Hang-ups a carrier did not take, tried again through each workspace's carrier (hangups.ts).
  yield* every("hang-up sweep", HANGUP_SWEEP_MS, () =>
    sweepHangups({ sql, log, telephonyFor: async (tenantId) => (await providersFor(tenantId)).telephony }),
  )
  void claim()

  // Background jobs of the runtime role; every runtime process runs them, safely in parallel.
  yield* Effect.forkIn(renewalLoop, scope)
  yield* Effect.forkIn(numberRentalLoop, scope)
  log.info({ instance: me }, "runtime host started")
  return {
    ownedRuns: () => [...drivers.keys()],
    stop: async () => {
      // Hand-over (docs/operations.md): claim nothing more, and leave the queue groups first, so
      // wakes and pings go to the other runtime processes from now on.
      stopping = true
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
      log.info({ released: handed.filter((d) => !d.lost).map((d) => d.runId) }, "runtime host stopped")
    },
  }
})
