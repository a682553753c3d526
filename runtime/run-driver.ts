// One owned run inside a runtime process: its run actor, the dialer loop that feeds it targets,
// a call actor per attempt in flight and an approval actor per pending proposal. Postgres holds
// the truth (leases, attempts, outcomes); the actors hold the lifecycle; the bus carries turns.
import { createActor, fromCallback, fromPromise, type Actor } from "xstate"
import {
  approvalMachine,
  callMachine,
  MACHINE_VERSIONS,
  runMachine,
  runStatus,
  type ApprovalInput,
  type ApprovalRequest,
  type CallOutput,
  type ConverseInboundEvent,
  type HangUpInput,
  type HangUpOutput,
  type LineInput,
  type ReserveFundsInput,
  type RunSnapshot,
  type RunStatusChange,
  type SettleInput,
} from "../machines/index.js"
import type { Logger } from "pino"
import { CALLBACK_DELAY_MS } from "../src/approvals/approvals.service.js"
import { converse } from "../src/calls/conversation.js"
import type { BusClient } from "../src/platform/bus/bus.js"
import type { DecisionStatus, LanguageModel, Proposal } from "../src/providers/llm/llm.interface.js"
import type { CallLeg, TelephonyProvider } from "../src/providers/telephony/telephony.interface.js"
import type { Sql } from "../src/platform/Db.js"
import type { RuleBook } from "../src/workflows/rulebook.schema.js"
import type { Schedule } from "../src/workflows/workflow.schema.js"
import { ncprBlocks } from "../src/compliance/ncpr.import.js"
import { findVoice } from "../src/voices/voices.catalog.js"
import { callingWindowCheck, Decision, retryDecision } from "./dialer.policy.js"
import type { Pacer, SlotCounter } from "./pacing.js"
import * as repo from "./runtime.repo.js"
import { SnapshotWriter } from "./snapshots.js"
import type { TurnSink } from "./turns.js"

const COOLDOWN_MS = 7 * 86_400_000
/** Targets considered at once by one run's dialer. */
const DIAL_PARALLELISM = 8
/** Lines of the conversation an approval carries, so whoever decides sees what led to it. */
const TRANSCRIPT_EXCERPT_LINES = 6
/** Snapshot saves for counter changes alone are at most this frequent. */
const SNAPSHOT_THROTTLE_MS = 1000

/** What the dialer needs from the process that hosts it. */
export interface DriverDeps {
  readonly sql: Sql
  readonly bus: BusClient
  readonly log: Logger
  readonly llm: LanguageModel
  readonly telephony: TelephonyProvider
  /** The pacing key of the carrier account this run's calls go out on. */
  readonly carrierKey: string
  readonly me: string
  readonly pacer: Pacer
  readonly slots: SlotCounter
  readonly turns: TurnSink
  readonly settings: DialerSettings
  /** Money, from the billing service: reserve before dialing, settle at hangup (both idempotent). */
  readonly money: {
    reserve(tenantId: number, callRef: string, seconds: number): Promise<{ ok: true; reservedMinor: number } | { ok: false }>
    settle(callRef: string, seconds: number): Promise<{ chargedMinor: number } | undefined>
  }
}

export interface DialerSettings {
  readonly timeScale: number
  readonly callingHoursAny: boolean
  readonly leaseMs: number
  readonly perWorkflowConcurrency: number
  readonly perTenantConcurrency: number
  readonly maxAttempts: number
  readonly retryBackoffMs: number
  readonly ringTimeoutMs: number
  readonly approvalHoldMs: number
  readonly approvalTtlMs: number
}

interface LiveCall {
  readonly actor: Actor<ReturnType<typeof callMachine.provide>>
  readonly runTargetId: number
  readonly targetId: number
  readonly phone: string
  /** The callee's name from the audience, for the agent to greet them by. */
  readonly name: string | null
  readonly attempt: number
  leg: CallLeg | undefined
  answeredAtMs: number | null
  reservedMinor: number | null
  chargedMinor: number | null
  turns: number
  /** The last few lines said, for an approval's context. */
  recent: string[]
  pendingDecision: ((d: DecisionStatus) => void) | undefined
}

type ApprovalActor = Actor<typeof approvalMachine>

/** Billed seconds are call-time seconds: real elapsed time divided by the simulator's time scale. */
export const billedSeconds = (elapsedMs: number, timeScale: number, turns: number, capSeconds: number): number => {
  if (elapsedMs <= 0) return 0
  const seconds = timeScale > 0 ? Math.ceil(elapsedMs / timeScale / 1000) : turns * 4
  return Math.max(1, Math.min(capSeconds, seconds))
}

export class RunDriver {
  readonly runId: number
  readonly tenantId: number
  readonly workflowId: number
  private run!: Actor<typeof runMachine>
  private readonly calls = new Map<number, LiveCall>()
  private providedCallMachine: ReturnType<typeof callMachine.provide> | undefined
  private persistedState: string | undefined
  private persistTimer: NodeJS.Timeout | undefined
  private readonly approvals = new Map<number, ApprovalActor>()
  private readonly snapshots: SnapshotWriter
  private stopped = false
  private lost = false
  private wake: (() => void) | undefined
  private loop: Promise<void> | undefined
  private readonly ruleBook: RuleBook
  private readonly schedule: Schedule
  private readonly scheduleKind: "immediate" | "window" | "once"
  private readonly currency: "INR" | "USD"
  private readonly company: string
  private readonly agentName: string
  /** Resolves when the run actor reaches a final state or the driver stops. */
  readonly done: Promise<void>
  private markDone!: () => void

  constructor(
    private readonly deps: DriverDeps,
    claim: repo.ClaimedRun,
    setup: repo.RunSetup,
  ) {
    this.runId = claim.id
    this.tenantId = claim.tenant_id
    this.workflowId = claim.workflow_id
    this.ruleBook = setup.rule_book as RuleBook
    this.schedule = setup.schedule as Schedule
    this.scheduleKind = setup.schedule_kind
    this.currency = setup.currency
    this.company = setup.tenant_name
    this.agentName = findVoice(this.ruleBook.persona)?.name ?? "Alex"
    this.snapshots = new SnapshotWriter((snapshot) => repo.saveRunSnapshot(deps.sql, this.runId, deps.me, snapshot, MACHINE_VERSIONS.run), deps.log)
    this.done = new Promise((resolve) => (this.markDone = resolve))
  }

  /** Restores (or creates) the run actor, reconciles it with Postgres, and starts dialing. */
  async start(claim: repo.ClaimedRun): Promise<void> {
    const machine = runMachine.provide({
      actions: {
        persist: () => this.persistSoon(),
        startDialing: () => this.poke(),
        stopDialing: () => this.poke(),
        statusChanged: (_, params: RunStatusChange) => void this.onStatus(params),
      },
    })
    const restorable = claim.snapshot !== null && claim.machine_version === MACHINE_VERSIONS.run
    this.run = restorable
      ? createActor(machine, { snapshot: claim.snapshot as RunSnapshot, input: { runId: this.runId, tenantId: this.tenantId, workflowId: this.workflowId } })
      : createActor(machine, { input: { runId: this.runId, tenantId: this.tenantId, workflowId: this.workflowId } })
    this.run.subscribe({ complete: () => this.finish(), error: (err) => this.deps.log.error({ err, run_id: this.runId }, "run actor failed") })
    this.run.start()

    if (claim.previous_owner !== null && claim.previous_owner !== this.deps.me) await this.takeOver(claim.previous_owner)
    // Calls the snapshot counted in flight are gone with their process (finalised just above).
    for (let n = this.run.getSnapshot().context.active; n > 0; n--) this.run.send({ type: "CALL_ENDED", final: true })
    await this.restoreApprovals()

    const state = runStatus(this.run.getSnapshot())
    if (claim.status === "running" && state === "paused") this.run.send({ type: "RESUME" })
    if (claim.status === "paused" && state === "running") this.run.send({ type: "PAUSE", reason: claim.pause_reason === "insufficient_funds" ? "insufficient_funds" : "user" })
    this.persistSoon()
    this.loop = this.dialLoop().catch((err: unknown) => {
      this.deps.log.error({ err, run_id: this.runId }, "dialer loop failed")
      if (!this.stopped) this.run.send({ type: "FAIL", reason: "dialer_error" })
    })
  }

  /** Finalises the calls a dead owner left in flight: each is charged once and never dialed again. */
  private async takeOver(previousOwner: string): Promise<void> {
    const { sql, me, log } = this.deps
    const orphans = await repo.orphanCalls(sql, this.runId, me)
    log.warn({ run_id: this.runId, previous_owner: previousOwner, orphans: orphans.length }, "taking over run")
    for (const c of orphans) {
      await repo.adoptCall(sql, c.id, me)
      // Bill what we know happened: from the answer to the last recorded turn.
      const until = c.last_turn_at ?? c.answered_at
      const seconds = c.answered_at === null || until === null ? 0 : billedSeconds(until.getTime() - c.answered_at.getTime(), this.deps.settings.timeScale, 0, this.ruleBook.max_call_seconds)
      const settled = await this.deps.money.settle(`call:${c.id}`, seconds)
      const at = Date.now()
      await repo.finishAttempt(sql, {
        me,
        runId: this.runId,
        tenantId: this.tenantId,
        callId: c.id,
        runTargetId: c.run_target_id,
        outcome: "interrupted",
        connectedSeconds: seconds,
        costMinor: settled?.chargedMinor ?? null,
        reservedMinor: null,
        endedAt: new Date(at),
        next: { kind: "done", outcome: "interrupted" },
        decision: Decision.stop(c.target_id, at, "owner_lost", { previous_owner: previousOwner, call_id: c.id }, settled?.chargedMinor ?? null),
        addToDnc: false,
        phone: c.phone_e164,
      })
    }
  }

  private async restoreApprovals(): Promise<void> {
    const rows = await repo.pendingApprovalsOfRun(this.deps.sql, this.runId)
    for (const a of rows) {
      if (this.approvals.has(a.id)) continue
      const actor = this.approvalActor(a.snapshot !== null && a.machine_version === MACHINE_VERSIONS.approval ? a.snapshot : undefined, {
        approvalId: a.id,
        tenantId: a.tenant_id,
        runId: a.run_id,
        callId: a.call_id,
        action: a.proposed_action,
        valueMinor: a.proposed_value_minor,
        expiresAt: a.expires_at.getTime(),
        now: Date.now(),
      })
      actor.send({ type: "REARM", now: Date.now() })
    }
  }

  // ---- the dialer ----------------------------------------------------------------------------

  private poke(): void {
    const w = this.wake
    this.wake = undefined
    w?.()
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.poke(), Math.max(0, ms))
      this.wake = () => {
        clearTimeout(timer)
        resolve()
      }
    })
  }

  private get dialing(): boolean {
    return !this.stopped && this.run.getSnapshot().matches("running")
  }

  private async dialLoop(): Promise<void> {
    const { sql, settings } = this.deps
    while (!this.stopped && this.run.getSnapshot().status === "active") {
      if (!this.dialing) {
        await this.sleep(1000)
        await this.syncStatus()
        continue
      }
      const room = settings.perWorkflowConcurrency - this.calls.size
      if (room <= 0) {
        await this.sleep(1000)
        continue
      }
      const due = await repo.dueTargets(sql, this.runId, Math.min(room, 200))
      if (due.length === 0) {
        const { pending, next_at } = await repo.pendingTargets(sql, this.runId)
        if (pending === 0) {
          if (!this.run.getSnapshot().context.queueEmpty) this.run.send({ type: "QUEUE_EMPTY" })
          await this.sleep(1000)
        } else await this.sleep(Math.min(1000, Math.max(5, (next_at?.getTime() ?? 0) - Date.now())))
        await this.syncStatus()
        continue
      }
      // A few targets at a time: each attempt is a database round trip or two, and the pacer and
      // slot counters decide synchronously, so parallel workers cannot overshoot them.
      const queue = [...due]
      let waitMs: number | undefined
      const worker = async (): Promise<void> => {
        while (queue.length > 0 && waitMs === undefined && this.dialing) {
          const wait = await this.consider(queue.shift()!)
          if (wait !== undefined) waitMs = Math.max(waitMs ?? 0, wait)
        }
      }
      await Promise.all(Array.from({ length: Math.min(DIAL_PARALLELISM, queue.length) }, worker))
      if (waitMs !== undefined) await this.sleep(waitMs)
    }
  }

  /** Keeps the run actor in step with Postgres, where api processes pause and resume runs. */
  private async syncStatus(): Promise<void> {
    if (this.stopped) return
    const row = await repo.runStatusOf(this.deps.sql, this.runId, this.deps.me)
    if (row === undefined || !row.owned) return this.loseLease()
    const state = runStatus(this.run.getSnapshot())
    if (row.status === "paused" && this.run.getSnapshot().can({ type: "PAUSE", reason: "user" })) this.run.send({ type: "PAUSE", reason: "user" })
    else if (row.status === "running" && state !== "running" && this.run.getSnapshot().can({ type: "RESUME" })) this.run.send({ type: "RESUME" })
    else if (row.status === "running" && this.run.getSnapshot().matches("pausing")) this.run.send({ type: "RESUME" })
  }

  /** Pause or resume now (a control message arrived); Postgres has already decided it. */
  control(command: "pause" | "resume" | "cancel"): void {
    const snap = this.run.getSnapshot()
    if (command === "pause" && snap.can({ type: "PAUSE", reason: "user" })) this.run.send({ type: "PAUSE", reason: "user" })
    if (command === "resume" && snap.can({ type: "RESUME" })) this.run.send({ type: "RESUME" })
    if (command === "cancel" && snap.can({ type: "CANCEL" })) this.run.send({ type: "CANCEL", reason: "user" })
    this.poke()
  }

  /** One due target: skipped, held, paced, or dialed. A number: stop this batch and wait that long. */
  private async consider(t: repo.DueTarget): Promise<number | undefined> {
    const { sql, settings, pacer, slots } = this.deps
    const now = Date.now()
    if (t.on_dnc) {
      await repo.skipTarget(sql, this.tenantId, this.runId, t.id, Decision.skip(t.target_id, now, "dnc_listed"))
      return undefined
    }
    if (t.ncpr_preference !== null && t.phone_e164.startsWith("+91") && ncprBlocks(t.ncpr_preference, this.ruleBook.ncpr_category)) {
      await repo.skipTarget(sql, this.tenantId, this.runId, t.id, Decision.skip(t.target_id, now, "ncpr_registered", { preference: t.ncpr_preference }))
      return undefined
    }
    // The cool-down protects people from other campaigns; this run's own retries are its business.
    if (t.attempts === 0 && t.last_contacted_at !== null && now - t.last_contacted_at.getTime() < COOLDOWN_MS) {
      await repo.skipTarget(sql, this.tenantId, this.runId, t.id, Decision.skip(t.target_id, now, "cooldown", { last_contacted_at: t.last_contacted_at.toISOString() }))
      return undefined
    }
    const window = callingWindowCheck({ phoneE164: t.phone_e164, schedule: this.schedule, scheduleKind: this.scheduleKind, now, any: settings.callingHoursAny })
    if (!window.ok) {
      const decision = Decision.fromWindow(t.target_id, now, window)
      if (window.nextOpenAt === null) await repo.skipTarget(sql, this.tenantId, this.runId, t.id, decision)
      else await repo.holdTarget(sql, this.tenantId, this.runId, t.id, new Date(window.nextOpenAt), decision)
      return undefined
    }
    const carrierKey = this.deps.carrierKey
    const tenantKey = `tenant:${this.tenantId}`
    const workflowKey = `workflow:${this.workflowId}`
    const paced = pacer.tryAcquire([carrierKey, tenantKey], now)
    if (!paced.ok) return paced.waitMs
    // Full: a call ending pokes the loop awake sooner than this.
    if (!slots.tryEnter([tenantKey, workflowKey], { [tenantKey]: settings.perTenantConcurrency, [workflowKey]: settings.perWorkflowConcurrency })) return 1000
    if (!this.run.getSnapshot().can({ type: "CALL_STARTED" })) {
      slots.leave([tenantKey, workflowKey])
      return 0
    }
    const expected = this.ruleBook.max_call_seconds
    const attempt = await repo
      .beginAttempt(sql, {
        me: this.deps.me,
        runId: this.runId,
        tenantId: this.tenantId,
        workflowId: this.workflowId,
        runTargetId: t.id,
        provider: this.deps.telephony.name,
        tenantCap: settings.perTenantConcurrency,
        slotLeaseMs: settings.leaseMs,
        decision: Decision.dial(t.target_id, now, t.attempts === 0 ? "first_attempt" : "retry_due", { zones: window.zones, expected_seconds: expected }),
      })
      .catch((e: unknown) => {
        slots.leave([tenantKey, workflowKey])
        throw e
      })
    if (typeof attempt === "string") {
      slots.leave([tenantKey, workflowKey])
      if (attempt === "not_owner") await this.syncStatus()
      return attempt === "not_due" ? undefined : attempt === "tenant_cap" ? 1000 : 0
    }
    this.run.send({ type: "CALL_STARTED" })
    this.startCall(t, attempt)
    return undefined
  }

  // ---- calls ---------------------------------------------------------------------------------

  /**
   * The call machine with this run's effects, made once per run: providing a machine builds its
   * whole state tree again, which per call cost more heap than the call itself. The effects find
   * their call by id.
   */
  private callMachineOf(): ReturnType<typeof callMachine.provide> {
    if (this.providedCallMachine !== undefined) return this.providedCallMachine
    const { settings, money, telephony, sql, log } = this.deps
    const scale = Math.max(settings.timeScale, 0.001)
    const liveOf = (callId: number): LiveCall => {
      const live = this.calls.get(callId)
      if (live === undefined) throw new Error(`call ${callId} is not live in this process`)
      return live
    }
    this.providedCallMachine = callMachine.provide({
      actors: {
        reserveFunds: fromPromise<void, ReserveFundsInput>(async ({ input }) => {
          const r = await money.reserve(input.tenantId, `call:${input.callId}`, input.expectedSeconds)
          if (!r.ok) throw new Error("insufficient_funds")
          liveOf(input.callId).reservedMinor = r.reservedMinor
        }),
        placeCall: fromCallback<{ type: string }, LineInput>(({ sendBack, input }) => {
          const live = liveOf(input.callId)
          const leg = telephony.dial({ callId: input.callId, to: input.phone, from: null, tenantId: input.tenantId }, (e) => {
            if (e.type === "ANSWERED") {
              if (e.by === "human") {
                live.answeredAtMs = e.at
                this.run.send({ type: "CALL_CONNECTED" })
                void repo.markAnswered(sql, input.callId, new Date(e.at)).catch((err: unknown) => log.error({ err }, "could not record an answer"))
              }
              sendBack({ type: "ANSWERED", by: e.by, at: e.at })
            } else if (e.type === "FAILED") sendBack({ type: "FAILED", reason: e.reason })
            else if (e.type !== "HANGUP") sendBack({ type: e.type })
          })
          live.leg = leg
          return () => {}
        }),
        converse: fromCallback<ConverseInboundEvent, LineInput>(({ sendBack, receive, input }) => {
          const live = liveOf(input.callId)
          const stop = new AbortController()
          receive((e) => {
            const resolve = live.pendingDecision
            live.pendingDecision = undefined
            resolve?.(e.type === "APPROVAL_DECIDED" ? e.decision : "timeout")
          })
          void this.converseOn(live, input, stop.signal, "human", (e) => sendBack(e))
          return () => stop.abort()
        }),
        leaveMessage: fromPromise<void, LineInput>(async ({ input, signal }) => {
          await this.converseOn(liveOf(input.callId), input, signal, "machine", () => {})
        }),
        hangUp: fromPromise<HangUpOutput, HangUpInput>(async ({ input }) => {
          await this.calls.get(input.callId)?.leg?.hangup().catch(() => {})
          return { at: Date.now() }
        }),
        settle: fromPromise<void, SettleInput>(async ({ input }) => {
          const live = liveOf(input.callId)
          const seconds = live.answeredAtMs === null ? 0 : billedSeconds(Date.now() - live.answeredAtMs, settings.timeScale, live.turns, this.ruleBook.max_call_seconds)
          const r = await money.settle(`call:${input.callId}`, seconds)
          live.chargedMinor = r?.chargedMinor ?? 0
        }),
      },
      actions: {
        persist: () => {},
        requestApproval: (_, params: ApprovalRequest) => {
          const live = this.calls.get(params.callId)
          if (live !== undefined) void this.requestApproval(live, params)
        },
      },
      delays: {
        ringTimeout: settings.ringTimeoutMs * scale,
        maxCall: this.ruleBook.max_call_seconds * 1000 * scale,
        approvalHold: settings.approvalHoldMs * scale,
      },
    })
    return this.providedCallMachine
  }

  private startCall(t: repo.DueTarget, a: { callId: number; attempt: number; targetId: number; phone: string }): void {
    const { settings, log } = this.deps
    const scale = Math.max(settings.timeScale, 0.001)
    const live: LiveCall = {
      actor: undefined as never,
      runTargetId: t.id,
      targetId: a.targetId,
      phone: a.phone,
      name: t.name,
      attempt: a.attempt,
      leg: undefined,
      answeredAtMs: null,
      reservedMinor: null,
      chargedMinor: null,
      turns: 0,
      recent: [],
      pendingDecision: undefined,
    }
    const machine = this.callMachineOf()
    const actor = createActor(machine, {
      input: {
        callId: a.callId,
        runId: this.runId,
        tenantId: this.tenantId,
        targetId: a.targetId,
        phone: a.phone,
        attempt: a.attempt,
        expectedSeconds: this.ruleBook.max_call_seconds,
        maxCallMs: this.ruleBook.max_call_seconds * 1000 * scale,
        ringTimeoutMs: settings.ringTimeoutMs * scale,
        approvalHoldMs: settings.approvalHoldMs * scale,
        voicemail: this.ruleBook.voicemail,
      },
    })
    ;(live as { actor: typeof actor }).actor = actor
    this.calls.set(a.callId, live)
    actor.subscribe({
      complete: () => {
        // A call stopped without finishing (its run moved to another process) ends there, not here.
        const output = actor.getSnapshot().output as CallOutput | undefined
        if (output !== undefined) void this.endCall(a.callId, live, output)
      },
      error: (err) => {
        log.error({ err, call_id: a.callId }, "call actor failed")
        void this.endCall(a.callId, live, { callId: a.callId, outcome: "failed", connectedSeconds: 0, answered: false, retryable: false, funded: true, settled: false, turns: live.turns })
      },
    })
    actor.start()
  }

  /** Runs the agent loop on the call's leg, reporting turns to the call actor and the run's stream. */
  private async converseOn(live: LiveCall, input: LineInput, signal: AbortSignal, answeredBy: "human" | "machine", sendBack: (e: { type: string; [k: string]: unknown }) => void): Promise<void> {
    const leg = live.leg
    if (leg === undefined) {
      sendBack({ type: "CALLEE_HUNG_UP", at: Date.now() })
      return
    }
    const result = await converse({
      leg,
      llm: this.deps.llm,
      ruleBook: this.ruleBook,
      callee: { name: live.name },
      agentName: this.agentName,
      company: this.company,
      answeredBy,
      signal,
      onTurn: (turn) => {
        live.turns++
        live.recent.push(`${turn.speaker}: ${turn.text}`)
        if (live.recent.length > TRANSCRIPT_EXCERPT_LINES) live.recent.shift()
        this.deps.turns.push({ tenantId: this.tenantId, runId: this.runId, targetId: input.targetId, callId: input.callId, turnIndex: turn.turnIndex, speaker: turn.speaker, text: turn.text, at: turn.at })
        sendBack({ type: "TURN", speaker: turn.speaker, text: turn.text, at: turn.at })
      },
      requestApproval: (p: Proposal) =>
        new Promise<DecisionStatus>((resolve) => {
          live.pendingDecision = resolve
          sendBack({ type: "PROPOSE", action: p.action, valueMinor: p.value_minor, rationale: p.rationale })
        }),
    }).catch((err: unknown) => {
      this.deps.log.error({ err, call_id: input.callId }, "conversation failed")
      return { outcome: "agent_error", turns: live.turns, calleeHungUp: false }
    })
    if (signal.aborted) return
    sendBack({ type: "CONVERSATION_ENDED", outcome: result.outcome, at: Date.now() })
  }

  private async requestApproval(live: LiveCall, req: ApprovalRequest): Promise<void> {
    const { sql, settings, log } = this.deps
    try {
      const row = await repo.insertApproval(sql, {
        tenantId: this.tenantId,
        workflowId: this.workflowId,
        runId: this.runId,
        callId: req.callId,
        phone: req.phone,
        action: req.proposal.action,
        valueMinor: req.proposal.valueMinor,
        currency: this.currency,
        rationale: req.proposal.rationale,
        context: { attempt: live.attempt, target_id: live.targetId, turns: live.turns, transcript: [...live.recent] },
        ttlMs: settings.approvalTtlMs,
      })
      this.approvalActor(undefined, {
        approvalId: row.id,
        tenantId: this.tenantId,
        runId: this.runId,
        callId: req.callId,
        action: req.proposal.action,
        valueMinor: req.proposal.valueMinor,
        expiresAt: row.expires_at.getTime(),
        now: Date.now(),
      })
      live.actor.send({ type: "APPROVAL_CREATED", approvalId: row.id })
    } catch (err) {
      log.error({ err, call_id: req.callId }, "could not create an approval")
    }
  }

  private approvalActor(snapshot: unknown, input: ApprovalInput): ApprovalActor {
    const { sql, log } = this.deps
    const writer = new SnapshotWriter((s) => repo.saveApprovalSnapshot(sql, input.approvalId, s, MACHINE_VERSIONS.approval), log)
    const machine = approvalMachine.provide({
      actions: {
        persist: () => queueMicrotask(() => writer.write(actor.getPersistedSnapshot())),
        decided: (_, r) => {
          if (r.status === "expired") void repo.expireApproval(sql, r.approvalId).catch(() => {})
        },
      },
    })
    const actor: ApprovalActor = snapshot === undefined ? createActor(machine, { input }) : createActor(machine, { snapshot: snapshot as never, input })
    this.approvals.set(input.approvalId, actor)
    actor.subscribe({ complete: () => this.approvals.delete(input.approvalId) })
    actor.start()
    return actor
  }

  /** An approval was decided in Postgres (by an api process): its actor ends, its call resumes. */
  approvalDecided(approvalId: number, callId: number | null, status: "approved" | "denied", by: number | null): void {
    const actor = this.approvals.get(approvalId)
    if (actor !== undefined && actor.getSnapshot().can({ type: "DECIDE", decision: status === "approved" ? "approve" : "deny", by: by ?? 0, at: Date.now() }))
      actor.send({ type: "DECIDE", decision: status === "approved" ? "approve" : "deny", by: by ?? 0, at: Date.now() })
    const call = callId === null ? undefined : this.calls.get(callId)
    call?.actor.send({ type: "APPROVAL_DECIDED", approvalId, decision: status })
  }

  private async endCall(callId: number, live: LiveCall, out: CallOutput): Promise<void> {
    if (!this.calls.has(callId)) return
    this.calls.delete(callId)
    const { settings, sql, log, slots } = this.deps
    slots.leave([`tenant:${this.tenantId}`, `workflow:${this.workflowId}`])
    const now = Date.now()
    const outcome = out.outcome ?? "failed"
    let next: repo.TargetNext
    let decision
    if (!out.funded) {
      next = { kind: "requeue", outcome }
      decision = Decision.hold(live.targetId, now, "insufficient_funds", { call_id: callId })
    } else {
      const detail = { call_id: callId, outcome, connected_seconds: out.connectedSeconds, turns: out.turns }
      if (outcome === "callback_scheduled" && live.attempt < settings.maxAttempts) {
        // The callee agreed to a later call: a new attempt at that time, which is not a retry.
        const at = now + CALLBACK_DELAY_MS * settings.timeScale
        next = { kind: "retry", at, outcome }
        decision = Decision.retry(live.targetId, now, "callback_scheduled", { ...detail, retry_at: at }, live.chargedMinor)
      } else {
        const r = retryDecision({ outcome, attempt: live.attempt, maxAttempts: settings.maxAttempts, baseBackoffMs: settings.retryBackoffMs, timeScale: settings.timeScale, now, seed: live.targetId })
        next = r.retry ? { kind: "retry", at: r.at, outcome } : { kind: "done", outcome }
        decision = Decision.fromRetry(live.targetId, now, r, detail, live.chargedMinor)
      }
    }
    try {
      const seconds = live.answeredAtMs === null ? 0 : billedSeconds(now - live.answeredAtMs, settings.timeScale, live.turns, this.ruleBook.max_call_seconds)
      await repo.finishAttempt(sql, {
        me: this.deps.me,
        runId: this.runId,
        tenantId: this.tenantId,
        callId,
        runTargetId: live.runTargetId,
        outcome,
        connectedSeconds: seconds,
        costMinor: live.chargedMinor,
        reservedMinor: live.reservedMinor,
        endedAt: new Date(now),
        next,
        decision,
        addToDnc: outcome === "do_not_call",
        phone: live.phone,
      })
    } catch (err) {
      log.error({ err, call_id: callId }, "could not record the end of a call")
    }
    if (this.stopped) return
    this.run.send({ type: "CALL_ENDED", final: next.kind === "done" })
    if (next.kind === "requeue") {
      await repo.pauseForFunds(sql, this.runId, this.deps.me).catch((err: unknown) => log.error({ err }, "could not pause for funds"))
      if (this.run.getSnapshot().can({ type: "PAUSE", reason: "insufficient_funds" })) this.run.send({ type: "PAUSE", reason: "insufficient_funds" })
    } else if (next.kind === "retry" && this.run.getSnapshot().context.queueEmpty) this.run.send({ type: "TARGETS_ADDED" })
    this.poke()
  }

  // ---- lifecycle -----------------------------------------------------------------------------

  /**
   * Saves the run actor's snapshot: at once when its state changed, else at most once a second.
   * Counter changes come with every call, and each save locks the run's row that dial attempts
   * share-lock; a takeover recounts from the calls themselves, so a second-old count is enough.
   */
  private persistSoon(): void {
    queueMicrotask(() => {
      if (this.lost) return
      const state = JSON.stringify(this.run.getSnapshot().value)
      if (state !== this.persistedState) {
        this.persistedState = state
        if (this.persistTimer !== undefined) clearTimeout(this.persistTimer)
        this.persistTimer = undefined
        this.snapshots.write(this.run.getPersistedSnapshot())
      } else
        this.persistTimer ??= setTimeout(() => {
          this.persistTimer = undefined
          if (!this.lost) this.snapshots.write(this.run.getPersistedSnapshot())
        }, SNAPSHOT_THROTTLE_MS)
    })
  }

  /** Writes the latest snapshot now (a throttled save included) and waits for it. */
  private saveSnapshotNow(): Promise<void> {
    if (this.persistTimer !== undefined) clearTimeout(this.persistTimer)
    this.persistTimer = undefined
    if (!this.lost) this.snapshots.write(this.run.getPersistedSnapshot())
    return this.snapshots.flush()
  }

  private async onStatus(s: RunStatusChange): Promise<void> {
    const { sql, me, log } = this.deps
    if (this.lost) return
    try {
      if (s.status === "paused") await repo.setRunStatus(sql, this.runId, me, "paused", s.reason)
      else if (s.status !== "running") {
        await this.saveSnapshotNow()
        await repo.setRunStatus(sql, this.runId, me, s.status, s.reason)
      }
    } catch (err) {
      log.error({ err, run_id: this.runId }, "could not record the run's status")
    }
    // A paused run with nothing in flight needs no owner: give it up so any process may resume it.
    if (s.status === "paused" && this.calls.size === 0) void this.release()
  }

  private async release(): Promise<void> {
    if (this.stopped) return
    this.stopped = true
    this.poke()
    await this.saveSnapshotNow()
    await repo.releaseRun(this.deps.sql, this.deps.me, this.runId).catch(() => {})
    this.stopApprovals()
    this.markDone()
  }

  private finish(): void {
    this.stopped = true
    this.poke()
    this.stopApprovals()
    void this.saveSnapshotNow().finally(() => this.markDone())
  }

  private stopApprovals(): void {
    for (const a of this.approvals.values()) a.stop()
    this.approvals.clear()
  }

  /** Another process owns the run now: stop everything here without writing anything more. */
  loseLease(): void {
    if (this.lost) return
    this.lost = true
    this.stopped = true
    if (this.persistTimer !== undefined) clearTimeout(this.persistTimer)
    this.deps.log.warn({ run_id: this.runId }, "lost the run's lease; stopping its calls here")
    for (const c of this.calls.values()) {
      void c.leg?.hangup().catch(() => {})
      c.actor.stop()
    }
    this.calls.clear()
    this.stopApprovals()
    this.run.stop()
    this.poke()
    this.markDone()
  }

  /** Process shutdown: stop dialing, let calls in flight end, then give the run back. */
  async shutdown(timeoutMs: number): Promise<void> {
    this.stopped = true
    this.poke()
    const deadline = Date.now() + timeoutMs
    while (this.calls.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    await this.loop?.catch(() => {})
    if (this.calls.size > 0) this.loseLease()
    else {
      await this.saveSnapshotNow()
      await repo.releaseRun(this.deps.sql, this.deps.me, this.runId).catch(() => {})
      this.stopApprovals()
      this.run.stop()
      this.markDone()
    }
  }

  get liveCalls(): number {
    return this.calls.size
  }
}
