// One run's dial loop: picks the targets whose turn has come, screens each (DNC, NCPR, cool-down,
// calling window), paces it (carrier and tenant rate, concurrency slots), and begins an attempt in
// Postgres before the call actor dials. Sleeps when there is nothing to do; poke() wakes it. A
// simulation campaign's callees are not people and go out on no carrier: no screening, no pacing.
import { runStatus } from "../machines/index.js"
import * as calls from "../src/calls/calls.repo.js"
import { ncprBlocks } from "../src/compliance/ncpr.import.js"
import { isErasedIdentifier } from "../src/dsr/suppression.js"
import * as targets from "../src/runs/run-targets.repo.js"
import * as repo from "../src/runs/runs.repo.js"
import { callingWindowCheck, Decision } from "./dialer.policy.js"
import type { RunScope } from "./run-scope.js"

const COOLDOWN_MS = 7 * 86_400_000
/** Targets considered at once by one run's dialer. */
const DIAL_PARALLELISM = 8
/** The longest the loop sleeps when idle: it looks at Postgres again (pauses, resumes) at least this often. */
const IDLE_MS = 1000

export type Attempt = { callId: number; attempt: number; targetId: number; phone: string }

export class Dialer {
  private wake: (() => void) | undefined
  /** A poke arrived while the loop was awake (querying): its next sleep returns at once. */
  private poked = false

  constructor(
    private readonly scope: RunScope,
    private readonly startCall: (t: targets.DueTarget, a: Attempt) => void,
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
    const { sql, settings } = s.deps
    while (!s.stopped && s.run.getSnapshot().status === "active") {
      if (!this.dialing) {
        await this.sleep(IDLE_MS)
        await this.syncStatus()
        continue
      }
      const room = settings.perWorkflowConcurrency - s.calls.size
      if (room <= 0) {
        await this.sleep(IDLE_MS)
        continue
      }
      // Clear before looking: a poke from here on (targets released, a call ended) is not lost.
      this.poked = false
      const due = await targets.dueTargets(sql, s.runId, Math.min(room, 200))
      if (due.length === 0) {
        const { pending, next_at } = await targets.pendingTargets(sql, s.runId)
        if (pending === 0) {
          if (!s.run.getSnapshot().context.queueEmpty) s.run.send({ type: "QUEUE_EMPTY" })
          await this.sleep(IDLE_MS)
        } else await this.sleep(untilDue(next_at, Date.now()))
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

  /** One due target: skipped, held, paced, or dialed. A number: stop this batch and wait that long. */
  private async consider(t: targets.DueTarget): Promise<number | undefined> {
    const s = this.scope
    if (s.simulation) return this.dial(t, Date.now(), t.attempts === 0 ? "first_attempt" : "retry_due", [])
    const { sql, settings, pacer } = s.deps
    const now = Date.now()
    if (t.on_dnc) {
      await calls.skipTarget(sql, s.tenantId, s.runId, t.id, Decision.skip(t.target_id, now, "dnc_listed"))
      return undefined
    }
    // A data subject erased from the workspace (POST /dsr/erase) is never dialled.
    if (t.phone_e164.startsWith("erased:") || (await isErasedIdentifier(sql, s.tenantId, "phone", t.phone_e164))) {
      await calls.skipTarget(sql, s.tenantId, s.runId, t.id, Decision.skip(t.target_id, now, "contact_erased"))
      return undefined
    }
    if (
      t.ncpr_preference !== null &&
      t.phone_e164.startsWith("+91") &&
      ncprBlocks(t.ncpr_preference, s.ruleBook.ncpr_category)
    ) {
      const decision = Decision.skip(t.target_id, now, "ncpr_registered", { preference: t.ncpr_preference })
      await calls.skipTarget(sql, s.tenantId, s.runId, t.id, decision)
      return undefined
    }
    // The cool-down protects people from other campaigns; this run's own retries are its business.
    if (t.attempts === 0 && t.last_contacted_at !== null && now - t.last_contacted_at.getTime() < COOLDOWN_MS) {
      const detail = { last_contacted_at: t.last_contacted_at.toISOString() }
      await calls.skipTarget(sql, s.tenantId, s.runId, t.id, Decision.skip(t.target_id, now, "cooldown", detail))
      return undefined
    }
    const window = callingWindowCheck({
      phoneE164: t.phone_e164,
      schedule: s.schedule,
      scheduleKind: s.scheduleKind,
      now,
      any: settings.callingHoursAny,
    })
    if (!window.ok) {
      const decision = Decision.fromWindow(t.target_id, now, window)
      if (window.nextOpenAt === null) await calls.skipTarget(sql, s.tenantId, s.runId, t.id, decision)
      else await calls.holdTarget(sql, s.tenantId, s.runId, t.id, new Date(window.nextOpenAt), decision)
      return undefined
    }
    const paced = pacer.tryAcquire([s.deps.carrierKey, `tenant:${s.tenantId}`], now)
    if (!paced.ok) return paced.waitMs
    return this.dial(t, now, t.attempts === 0 ? "first_attempt" : "retry_due", window.zones)
  }

  /** A screened, paced target: a concurrency slot, the attempt in Postgres, then its call actor. */
  private async dial(
    t: targets.DueTarget,
    now: number,
    reason: "first_attempt" | "retry_due",
    zones: ReadonlyArray<string>,
  ): Promise<number | undefined> {
    const s = this.scope
    const { sql, settings, slots } = s.deps
    const tenantKey = `tenant:${s.tenantId}`
    const workflowKey = `workflow:${s.workflowId}`
    // Full: a call ending pokes the loop awake sooner than this.
    const caps = { [tenantKey]: settings.perTenantConcurrency, [workflowKey]: settings.perWorkflowConcurrency }
    if (!slots.tryEnter([tenantKey, workflowKey], caps)) return 1000
    if (!s.run.getSnapshot().can({ type: "CALL_STARTED" })) {
      slots.leave([tenantKey, workflowKey])
      return 0
    }
    const expected = s.ruleBook.max_call_seconds
    const attempt = await calls
      .beginAttempt(sql, {
        me: s.deps.me,
        runId: s.runId,
        tenantId: s.tenantId,
        workflowId: s.workflowId,
        runTargetId: t.id,
        provider: s.deps.telephony.name,
        tenantCap: settings.perTenantConcurrency,
        slotLeaseMs: settings.leaseMs,
        decision: Decision.dial(t.target_id, now, reason, {
          zones,
          expected_seconds: expected,
          ...(s.simulation && { simulated: true }),
        }),
        recordContact: !s.simulation,
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
    s.run.send({ type: "CALL_STARTED" })
    this.startCall(t, attempt)
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
