// One run's dial loop: picks the targets whose turn has come, screens each (DNC, NCPR, cool-down,
// calling window: src/dialing/screening.ts), paces it (carrier and tenant rate, concurrency slots:
// the account's and plan's limits under the deployment's ceilings, src/dialing/), and begins the
// batch's attempts in Postgres in one round trip before the call actors dial. Sleeps when there is
// nothing to do; poke() wakes it. A simulation campaign's callees are not people and go out on no
// carrier: no screening, no pacing.
import { runStatus } from "../../machines/index.js"
import type { DecisionEntry } from "../../src/calls/calls.repo.js"
import * as calls from "../../src/calls/calls.repo.js"
import { Decision } from "../../src/dialing/dialer.policy.js"
import { screenTarget } from "../../src/dialing/screening.js"
import { erasedAmong } from "../../src/erasure/suppression.js"
import * as targets from "../../src/runs/run-targets.repo.js"
import * as repo from "../../src/runs/runs.repo.js"
import { callsStarted } from "../runtime.metrics.js"
import type { CallVariant } from "./run-experiment.js"
import type { RunScope } from "./run-scope.js"

/** Targets one batch considers at most (their attempts begin in one round trip). */
const BATCH_MAX = 100
/** Call actors started between two yields to the event loop. */
const START_SLICE = 10
/** The longest the loop sleeps when idle: it looks at Postgres again (pauses, resumes) at least this often. */
const IDLE_MS = 1000

export type Attempt = { callId: number; attempt: number; targetId: number; phone: string }

export class Dialer {
  private wake: (() => void) | undefined
  /** A poke arrived while the loop was awake (querying): its next sleep returns at once. */
  private poked = false

  constructor(
    private readonly scope: RunScope,
    private readonly startCall: (t: targets.DueTarget, a: Attempt, variant: CallVariant) => void,
  ) {}

  poke(): void {
    const w = this.wake
    this.wake = undefined
    if (w === undefined) this.poked = true
    w?.()
  }

  private sleep(ms: number): Promise<void> {
    if (this.poked) {
      this.poked = false
      return Promise.resolve()
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.poke(), Math.max(0, ms))
      this.wake = () => {
        clearTimeout(timer)
        resolve()
      }
    })
  }

  private get dialing(): boolean {
    return !this.scope.stopped && this.scope.run.getSnapshot().matches("running")
  }

  async loop(): Promise<void> {
    const s = this.scope
    const { sql } = s.deps
    while (!s.stopped && s.run.getSnapshot().status === "active") {
      if (!this.dialing) {
        await this.sleep(IDLE_MS)
        await this.syncStatus()
        continue
      }
      const room = s.deps.limits.current.maxConcurrentPerWorkflow - s.calls.size
      if (room <= 0) {
        await this.sleep(IDLE_MS)
        continue
      }
      // Clear before looking: a poke from here on (targets released, a call ended) is not lost.
      this.poked = false
      const due = await targets.dueTargets(sql, s.runId, Math.min(room, BATCH_MAX))
      if (due.length === 0) {
        const { pending, next_at } = await targets.pendingTargets(sql, s.runId)
        if (pending === 0) {
          if (!s.run.getSnapshot().context.queueEmpty) s.run.send({ type: "QUEUE_EMPTY" })
          await this.sleep(IDLE_MS)
        } else await this.sleep(untilDue(next_at, Date.now()))
        await this.syncStatus()
        continue
      }
      const waitMs = await this.batch(due)
      // At most IDLE_MS: a slow pace (a limit just lowered) is looked at again, never overflows a timer.
      if (waitMs !== undefined) await this.sleep(Math.min(waitMs, IDLE_MS))
    }
  }

  /** Keeps the run actor in step with Postgres, where api processes pause and resume runs. */
  async syncStatus(): Promise<void> {
    const s = this.scope
    if (s.stopped) return
    const row = await repo.runStatusOf(s.deps.sql, s.runId, s.deps.me)
    if (row === undefined || !row.owned) return s.loseLease()
    const run = s.run
    const state = runStatus(run.getSnapshot())
    if (row.status === "paused" && run.getSnapshot().can({ type: "PAUSE", reason: "user" }))
      run.send({ type: "PAUSE", reason: "user" })
    else if (row.status === "running" && state !== "running" && run.getSnapshot().can({ type: "RESUME" }))
      run.send({ type: "RESUME" })
    else if (row.status === "running" && run.getSnapshot().matches("pausing")) run.send({ type: "RESUME" })
  }

  /**
   * One batch of due targets, in order: each screened (skipped or held, written at once), paced
   * and given a slot in this process, until the pacer or a cap says wait; then the attempts of
   * those that passed begin in one round trip, and their call actors start. A number: wait that long.
   */
  private async batch(due: ReadonlyArray<targets.DueTarget>): Promise<number | undefined> {
    const s = this.scope
    const { sql, pacer, slots } = s.deps
    const limits = s.deps.limits.current
    const tenantKey = `tenant:${s.tenantId}`
    const workflowKey = `workflow:${s.workflowId}`
    const keys = [tenantKey, workflowKey]
    const caps = { [tenantKey]: limits.maxConcurrentCalls, [workflowKey]: limits.maxConcurrentPerWorkflow }
    const now = Date.now()
    // A data subject erased from the workspace (POST /dsr/erase) is never dialled: one look for the batch.
    const erased = s.simulation
      ? new Set<string>()
      : new Set(
          await erasedAmong(
            sql,
            s.tenantId,
            "phone",
            due.map((t) => t.phone_e164),
          ),
        )
    const picked: Array<{ t: targets.DueTarget; decision: DecisionEntry; variant: CallVariant }> = []
    let waitMs: number | undefined
    for (const t of due) {
      if (!this.dialing) break
      const reason = t.attempts === 0 ? "first_attempt" : "retry_due"
      let zones: ReadonlyArray<string> = []
      if (!s.simulation) {
        const screened = await this.screen(t, now, erased)
        if (screened === undefined) continue
        zones = screened
      }
      // Full: a call ending pokes the loop awake sooner than this.
      if (!slots.tryEnter(keys, caps)) {
        waitMs = 1000
        break
      }
      if (!s.simulation) {
        const paced = pacer.tryAcquire([s.deps.carrierKey, tenantKey], now)
        if (!paced.ok) {
          slots.leave(keys)
          waitMs = paced.waitMs
          break
        }
      }
      // The target's experiment arm, if its workflow runs one: a seeded hash, so its retries keep it.
      const variant = s.variantFor(Number(t.target_id))
      const decision = Decision.dial(t.target_id, now, reason, {
        zones,
        expected_seconds: variant.ruleBook.max_call_seconds,
        ...(s.simulation && { simulated: true }),
        ...(variant.arm !== undefined && { experiment_id: variant.arm.experimentId, arm: variant.arm.arm }),
      })
      picked.push({ t, decision, variant })
    }
    if (picked.length === 0) return waitMs
    if (!s.run.getSnapshot().can({ type: "CALL_STARTED" })) {
      for (let i = 0; i < picked.length; i++) slots.leave(keys)
      return 0
    }
    const { settings } = s.deps
    const results = await calls
      .beginAttempts(
        sql,
        {
          me: s.deps.me,
          runId: s.runId,
          tenantId: s.tenantId,
          workflowId: s.workflowId,
          provider: s.deps.telephony.name,
          tenantCap: limits.maxConcurrentCalls,
          slotLeaseMs: settings.leaseMs,
          recordContact: !s.simulation,
        },
        picked.map((p) => ({ runTargetId: p.t.id, decision: p.decision, arm: p.variant.arm })),
      )
      .catch((e: unknown) => {
        for (let i = 0; i < picked.length; i++) slots.leave(keys)
        throw e
      })
    let notOwner = false
    for (let i = 0; i < picked.length; i++) {
      const attempt = results[i]!
      if (typeof attempt === "string") {
        slots.leave(keys)
        if (attempt === "not_owner") notOwner = true
        else if (attempt === "tenant_cap") waitMs = Math.max(waitMs ?? 0, 1000)
        continue
      }
      if (s.stopped) {
        // Lost or stopped meanwhile: the attempt is in Postgres, whoever takes the run over finishes it.
        slots.leave(keys)
        continue
      }
      s.run.send({ type: "CALL_STARTED" })
      this.startCall(picked[i]!.t, attempt, picked[i]!.variant)
      callsStarted.inc()
      // Let timers and I/O in between starts: a whole batch of call actors at once would block the loop.
      if (i % START_SLICE === START_SLICE - 1) await new Promise<void>((r) => setImmediate(r))
    }
    if (notOwner) {
      await this.syncStatus()
      return 0
    }
    return waitMs
  }

  /**
   * The compliance checks of one target (src/dialing/screening.ts): skipped or held (written), or
   * the callee's time zones when it may be dialed now.
   */
  private async screen(
    t: targets.DueTarget,
    now: number,
    erased: ReadonlySet<string>,
  ): Promise<ReadonlyArray<string> | undefined> {
    const s = this.scope
    const { sql, settings } = s.deps
    const screened = screenTarget({
      target: t,
      now,
      erased,
      ncprCategory: s.ruleBook.ncpr_category,
      schedule: s.schedule,
      scheduleKind: s.scheduleKind,
      callingHoursAny: settings.callingHoursAny,
    })
    if (screened.dial) return screened.zones
    if (screened.holdUntil === null) await calls.skipTarget(sql, s.tenantId, s.runId, t.id, screened.decision)
    else await calls.holdTarget(sql, s.tenantId, s.runId, t.id, new Date(screened.holdUntil), screened.decision)
    return undefined
  }
}

/**
 * How long an idle loop sleeps when targets remain but none is due: until the earliest is due,
 * between 5 ms and IDLE_MS. A simulation campaign holds its unreleased targets at 'infinity' (an
 * invalid Date from the driver): nothing is due until a release pokes the loop, so it sleeps IDLE_MS.
 */
export const untilDue = (nextAt: Date | null, now: number): number => {
  const at = nextAt?.getTime() ?? Number.NaN
  if (!Number.isFinite(at)) return IDLE_MS
  return Math.min(IDLE_MS, Math.max(5, at - now))
}
