// One owned run inside a runtime process: its run actor, the dialer loop that feeds it targets
// (dialer.ts), a call actor per attempt in flight (call-effects.ts) and an approval actor per
// pending proposal (approvals.ts); its snapshot is saved by persistence.ts. Postgres holds the
// truth (leases, attempts, outcomes); the actors hold the lifecycle; the bus carries turns.

import { type Actor, createActor } from "xstate"
import {
  MACHINE_VERSIONS,
  type RunSnapshot,
  type RunStatusChange,
  runMachine,
  runStatus,
} from "../../machines/index.js"
import { isConnectionError, retryOnDisconnect } from "../../src/platform/Db.js"
import { backgroundFailures } from "../../src/platform/metrics.js"
import type { Currency } from "../../src/platform/money.js"
import type { CallHandoffReply } from "../../src/platform/subjects.js"
import type { AgentRule } from "../../src/providers/llm/llm.interface.js"
import type { PhoneVoice } from "../../src/providers/speech/streaming.interface.js"
import * as repo from "../../src/runs/runs.repo.js"
import { callVoice } from "../../src/voices/call-voice.js"
import { findVoice, VOICES } from "../../src/voices/voices.catalog.js"
import { type RuleBook, recordsCalls } from "../../src/workflows/rulebook.schema.js"
import type { Schedule } from "../../src/workflows/workflow.schema.js"
import type { HostedSpeech } from "../voice/hosted-speech.js"
import { RunApprovals } from "./approvals.js"
import { CallEffects } from "./call-effects.js"
import { Dialer } from "./dialer.js"
import { RunPersistence } from "./persistence.js"
import { type CallVariant, loadRunExperiment, type RunExperiment, variantFor } from "./run-experiment.js"
import { RunRules } from "./run-rules.js"
import type { DriverDeps, LiveCall, RunScope } from "./run-scope.js"
import { endCallsAtShutdown } from "./shutdown.js"

export type { DialerSettings, DriverDeps } from "./run-scope.js"
export { billedSeconds } from "./run-scope.js"

/** How long the dial loop waits before trying again while the database is out of reach. */
const DB_RETRY_MS = 1_000

export class RunDriver implements RunScope {
  readonly runId: number
  readonly tenantId: number
  readonly workflowId: number
  run!: Actor<typeof runMachine>
  readonly calls = new Map<number, LiveCall>()
  stopped = false
  lost = false
  readonly ruleBook: RuleBook
  readonly schedule: Schedule
  readonly scheduleKind: "immediate" | "window" | "once"
  readonly currency: Currency
  readonly company: string
  readonly agentName: string
  voice: PhoneVoice
  /** The hosted recogniser and voice the run's audio calls use (the workspace's, else the platform's), if any. */
  speech: HostedSpeech | undefined
  readonly simulation: boolean
  /** Its calls heard as audio are recorded (the rule book discloses it and does not turn it off). */
  readonly records: boolean
  /** Whose knowledge-base rules the run follows: a simulation's are those of the workflow it rehearses. */
  readonly rulesWorkflowId: number
  /** The workflow's running experiment, as the run's calls follow it (reloaded when it changes). */
  private experiment: RunExperiment | undefined
  private readonly demo: boolean
  private readonly approvals: RunApprovals
  private readonly effects: CallEffects
  private readonly dialer: Dialer
  private readonly persistence: RunPersistence
  private readonly rules: RunRules
  private loop: Promise<void> | undefined
  /** Resolves when the run actor reaches a final state or the driver stops. */
  readonly done: Promise<void>
  private markDone!: () => void

  constructor(
    readonly deps: DriverDeps,
    claim: repo.ClaimedRun,
    setup: repo.RunSetup,
  ) {
    this.runId = claim.id
    this.tenantId = claim.tenant_id
    this.workflowId = claim.workflow_id
    const book = setup.rule_book as RuleBook
    // The persona's greeting opens the call in the book's place (a knowledge-base `opening` rule still wins).
    this.ruleBook = setup.persona_greeting === null ? book : { ...book, opening_line: setup.persona_greeting }
    this.schedule = setup.schedule as Schedule
    this.scheduleKind = setup.schedule_kind
    this.currency = setup.currency
    this.company = setup.tenant_name
    this.agentName = setup.persona_agent_name ?? findVoice(this.ruleBook.persona)?.name ?? "Alex"
    this.voice = (findVoice(this.ruleBook.persona) ?? VOICES[0]!).speech
    this.simulation = setup.kind === "rehearsal"
    // A public demo's callee is nobody's contact: nothing of it is kept.
    this.demo = setup.kind === "demo"
    this.records = !this.demo && recordsCalls(this.ruleBook)
    this.rulesWorkflowId = setup.simulation_of ?? claim.workflow_id
    this.approvals = new RunApprovals(this)
    this.effects = new CallEffects(this, (live, req) => this.approvals.request(live, req))
    this.dialer = new Dialer(this, (t, a, v) => this.effects.start(t, a, v))
    this.persistence = new RunPersistence(this)
    this.rules = new RunRules(deps.sql, deps.log, {
      runId: this.runId,
      tenantId: this.tenantId,
      workflowId: this.rulesWorkflowId,
    })
    this.done = new Promise((resolve) => (this.markDone = resolve))
  }

  /** Restores (or creates) the run actor, reconciles it with Postgres, and starts dialing. */
  async start(claim: repo.ClaimedRun): Promise<void> {
    const machine = runMachine.provide({
      actions: {
        persist: () => this.persistence.soon(),
        startDialing: () => this.poke(),
        stopDialing: () => this.poke(),
        statusChanged: (_, params: RunStatusChange) => void this.onStatus(params),
      },
    })
    const input = { runId: this.runId, tenantId: this.tenantId, workflowId: this.workflowId }
    const restorable = claim.snapshot !== null && claim.machine_version === MACHINE_VERSIONS.run
    this.run = restorable
      ? createActor(machine, { snapshot: claim.snapshot as RunSnapshot, input })
      : createActor(machine, { input })
    this.run.subscribe({
      complete: () => this.finish(),
      error: (err) => this.deps.log.error({ err, run_id: this.runId }, "run actor failed"),
    })
    this.run.start()

    if (claim.previous_owner !== null && claim.previous_owner !== this.deps.me)
      await this.effects.takeOver(claim.previous_owner)
    // Calls the snapshot counted in flight are gone with their process (finalised just above).
    for (let n = this.run.getSnapshot().context.active; n > 0; n--) this.run.send({ type: "CALL_ENDED", final: true })
    await this.approvals.restore()

    const state = runStatus(this.run.getSnapshot())
    if (claim.status === "running" && state === "paused") this.run.send({ type: "RESUME" })
    if (claim.status === "paused" && state === "running") {
      const reason = claim.pause_reason === "insufficient_funds" ? "insufficient_funds" : "user"
      this.run.send({ type: "PAUSE", reason })
    }
    this.persistence.soon()
    // The knowledge-base rules before the first call; a failure is logged and retried by that call.
    await this.rules.reload()
    // Calls heard as audio speak with the workflow's own voice (a cloned one) when it has one.
    if (this.deps.voice !== undefined)
      this.voice = await callVoice(this.deps.sql, this.tenantId, this.workflowId).catch((err: unknown) => {
        this.deps.log.warn({ err, run_id: this.runId }, "could not load the workflow's voice: the persona's speaks")
        return this.voice
      })
    // Hosted speech vendors, when the workspace brings its own or the platform has them (else the offline engines).
    if (this.deps.voice !== undefined)
      this.speech = await this.deps.voice
        .speechFor(this.tenantId, this.ruleBook.persona, { platformAccounts: this.deps.money.paysHostedSpeech })
        .catch((err: unknown) => {
          this.deps.log.warn({ err, run_id: this.runId }, "could not load the hosted speech vendors: offline engines")
          return undefined
        })
    await this.reloadExperiment()
    this.loop = this.dialLoop()
  }

  /** The run's own variant: its rule book, voice and agent, outside any experiment. */
  private base(): CallVariant {
    return {
      ruleBook: this.ruleBook,
      voice: this.voice,
      agentName: this.agentName,
      records: this.records,
      arm: undefined,
    }
  }

  /**
   * Loads the workflow's running experiment (none: the run's own variant for every call). A failure
   * keeps what was loaded before and is logged: calls go on.
   */
  async reloadExperiment(): Promise<void> {
    try {
      this.experiment = await loadRunExperiment(this.deps.sql, this.tenantId, this.workflowId, this.base(), this.demo)
    } catch (err) {
      this.deps.log.warn({ err, run_id: this.runId }, "could not load the workflow's experiment")
    }
  }

  /** The workflow's experiment changed (a bus message): the run's next calls follow it. */
  experimentChanged(): void {
    if (!this.stopped) void this.reloadExperiment()
  }

  variantFor(targetId: number): CallVariant {
    return variantFor(this.experiment, this.base(), targetId)
  }

  /** The dial loop; Postgres out of reach is waited out (docs/operations.md), anything else fails the run. */
  private async dialLoop(): Promise<void> {
    for (;;) {
      try {
        return await this.dialer.loop()
      } catch (err) {
        if (!this.stopped && isConnectionError(err)) {
          this.deps.log.warn({ err, run_id: this.runId }, "dialer paused: the database is out of reach")
          await new Promise((r) => setTimeout(r, DB_RETRY_MS))
          continue
        }
        this.deps.log.error({ err, run_id: this.runId }, "dialer loop failed")
        if (!this.stopped) this.run.send({ type: "FAIL", reason: "dialer_error" })
        return
      }
    }
  }

  /** The rules a call starting now follows (waits for a reload in flight). */
  agentRules(): Promise<ReadonlyArray<AgentRule>> {
    return this.rules.current()
  }

  /** The workspace's rules changed (a bus message): the run's next calls follow the new ones. */
  rulesChanged(): void {
    if (!this.stopped) void this.rules.reload()
  }

  /** Wakes the dial loop. */
  poke(): void {
    this.dialer.poke()
  }

  /** Pause or resume now (a control message arrived); Postgres has already decided it. */
  control(command: "pause" | "resume" | "cancel"): void {
    const snap = this.run.getSnapshot()
    if (command === "pause" && snap.can({ type: "PAUSE", reason: "user" }))
      this.run.send({ type: "PAUSE", reason: "user" })
    if (command === "resume" && snap.can({ type: "RESUME" })) this.run.send({ type: "RESUME" })
    if (command === "cancel" && snap.can({ type: "CANCEL" })) this.run.send({ type: "CANCEL", reason: "user" })
    this.poke()
  }

  /** An approval was decided in Postgres (by an api process): its actor ends, its call resumes. */
  approvalDecided(
    approvalId: number,
    callId: number | null,
    status: "approved" | "denied",
    by: number | null,
    valueMinor: number | null = null,
  ): void {
    this.approvals.decided(approvalId, callId, status, by, valueMinor)
  }

  /** Patch-in (the api over the bus): undefined when this run does not hold the call. */
  handOff(callId: number, operatorNumber: string): Promise<CallHandoffReply> | undefined {
    return this.calls.has(callId) ? this.effects.handOff(callId, operatorNumber) : undefined
  }

  /**
   * Hangs up a call this run holds (a data-subject erase); the call then ends as an agent hang-up does.
   * The leg's hang-up never rejects: a failure is logged, counted and swept (hangups.ts).
   */
  endCall(callId: number): void {
    void this.calls.get(callId)?.leg?.hangup()
  }

  // ---- lifecycle -----------------------------------------------------------------------------

  private async onStatus(s: RunStatusChange): Promise<void> {
    const { sql, me, log } = this.deps
    if (this.lost) return
    try {
      if (s.status === "paused") await repo.setRunStatus(sql, this.runId, me, "paused", s.reason)
      else if (s.status !== "running") {
        await this.persistence.now()
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
    await this.persistence.now()
    await repo.releaseRun(this.deps.sql, this.deps.me, this.runId).catch((err: unknown) => this.releaseFailed(err))
    this.approvals.stop()
    this.markDone()
  }

  private finish(): void {
    this.stopped = true
    this.poke()
    this.approvals.stop()
    void this.persistence.now().finally(() => this.markDone())
  }

  /** Another process owns the run now: stop everything here without writing anything more. */
  loseLease(): void {
    if (this.lost) return
    this.lost = true
    this.stopped = true
    this.persistence.cancel()
    this.deps.log.warn({ run_id: this.runId }, "lost the run's lease; stopping its calls here")
    for (const c of this.calls.values()) {
      void c.leg?.hangup() // never rejects: a failure is recorded by reportingHangups
      c.actor.stop()
    }
    this.calls.clear()
    this.approvals.stop()
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
    await this.loop?.catch(() => {}) // dialLoop logs its own failure and fails the run
    // Past the deadline: the calls left are ended here, cleanly and billed once (shutdown.ts).
    if (this.calls.size > 0 && !this.lost) await endCallsAtShutdown(this)
    if (this.calls.size > 0 || this.lost) this.loseLease()
    else {
      // The run's turns are stored before another process may take it and write its own.
      await this.deps.turns.flush()
      await this.persistence.now()
      const { sql, me } = this.deps
      await retryOnDisconnect(() => repo.releaseRun(sql, me, this.runId), { maxMs: 3_000 }).catch((err: unknown) =>
        this.releaseFailed(err),
      )
      this.approvals.stop()
      this.run.stop()
      this.markDone()
    }
  }

  /** The lease was not given back: the run waits for it to lapse before another process may take it. */
  private releaseFailed(err: unknown): void {
    backgroundFailures.labels("run_release").inc()
    this.deps.log.error(
      { err, run_id: this.runId, tenant_id: this.tenantId },
      "could not give the run's lease back; it is taken over once the lease lapses",
    )
  }

  get liveCalls(): number {
    return this.calls.size
  }
}
