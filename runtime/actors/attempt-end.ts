// The end of an attempt that ended in this process: its dial slot freed, its next step (done, a
// retry or a callback at its time, back in the queue when it was not funded) and its decision,
// recorded with the other endings of the moment; decisions made after the hold applied; the run told.
import type { CallOutput } from "../../machines/index.js"
import { applyDecisionsAfterCall, CALLBACK_DELAY_MS } from "../../src/approvals/late-decisions.js"
import type { AttemptEnd, TargetNext } from "../../src/calls/calls.repo.js"
import { Decision, type DialDecision, retryDecision } from "../../src/dialing/dialer.policy.js"
import { retryOnDisconnect } from "../../src/platform/Db.js"
import { runCallbacks } from "../../src/runs/run-callbacks.js"
import * as repo from "../../src/runs/runs.repo.js"
import { billedSeconds, type LiveCall, type RunScope } from "./run-scope.js"
import { finishAttemptGrouped } from "./settlements.js"

/** An attempt ended: its slot freed, its outcome, retry and decision recorded, the run told. */
export async function endAttempt(s: RunScope, callId: number, live: LiveCall, out: CallOutput): Promise<void> {
  if (!s.calls.has(callId)) return
  s.calls.delete(callId)
  // An unanswered call's media session never heard its stream stop: it is let go here.
  live.leg?.release?.()
  const { settings, sql, log, slots } = s.deps
  slots.leave([`tenant:${s.tenantId}`, `workflow:${s.workflowId}`])
  const now = Date.now()
  const outcome = out.outcome ?? "failed"
  let next: TargetNext
  let decision: DialDecision
  if (!out.funded) {
    next = { kind: "requeue", outcome }
    decision = Decision.hold(live.targetId, now, "insufficient_funds", { call_id: callId })
  } else {
    const detail = { call_id: callId, outcome, connected_seconds: out.connectedSeconds, turns: out.turns }
    if (outcome === "callback_scheduled" && live.attempt < settings.maxAttempts) {
      // The callee agreed to a later call: a new attempt at that time, which is not a retry.
      const at = now + CALLBACK_DELAY_MS * settings.timeScale
      next = { kind: "retry", at, outcome }
      decision = Decision.retry(
        live.targetId,
        now,
        "callback_scheduled",
        { ...detail, retry_at: at },
        live.chargedMinor,
      )
    } else {
      const r = retryDecision({
        outcome,
        attempt: live.attempt,
        maxAttempts: settings.maxAttempts,
        baseBackoffMs: settings.retryBackoffMs,
        timeScale: settings.timeScale,
        now,
        seed: live.targetId,
      })
      next = r.retry ? { kind: "retry", at: r.at, outcome } : { kind: "done", outcome }
      decision = Decision.fromRetry(live.targetId, now, r, detail, live.chargedMinor)
    }
  }
  try {
    const seconds =
      live.answeredAtMs === null
        ? 0
        : billedSeconds(now - live.answeredAtMs, settings.timeScale, live.turns, live.variant.ruleBook.max_call_seconds)
    // Idempotent (the call ends once): Postgres out of reach is waited out, or the target stays in progress.
    // Grouped with the other attempts ending now (runtime/actors/settlements.ts).
    const end: AttemptEnd = {
      me: s.deps.me,
      runId: s.runId,
      tenantId: s.tenantId,
      callId,
      runTargetId: live.runTargetId,
      outcome,
      connectedSeconds: seconds,
      costMinor: live.chargedMinor,
      reservedMinor: live.reservedMinor,
      endedAt: new Date(now),
      next,
      decision,
      // A simulated callee is not a person: their "do not call me" goes on nobody's list.
      addToDnc: outcome === "do_not_call" && !s.simulation,
      phone: live.phone,
    }
    await finishAttemptGrouped(sql, end)
  } catch (err) {
    log.error({ err, call_id: callId }, "could not record the end of a call")
  }
  // Decisions that came after the callee stopped holding (before the end was written) reach the
  // result now; one made after the end was written applied itself (src/approvals/late-decisions.ts).
  if (live.heldOut.length > 0)
    await retryOnDisconnect(() =>
      applyDecisionsAfterCall(
        sql,
        { id: callId, run_target_id: live.runTargetId },
        live.heldOut,
        settings.timeScale,
        runCallbacks,
      ),
    ).catch((err: unknown) => log.error({ err, call_id: callId }, "could not apply decisions made after the hold"))
  if (s.stopped) return
  // A retry puts the target back in the queue before the call counts as ended: the other way round,
  // the run's last call ending on an empty queue completes the run with this target still waiting.
  if (next.kind === "retry" && s.run.getSnapshot().context.queueEmpty) s.run.send({ type: "TARGETS_ADDED" })
  s.run.send({ type: "CALL_ENDED", final: next.kind === "done" })
  // A simulation is never short of funds (it reserves nothing) and never touches a workflow's status.
  if (next.kind === "requeue" && !s.simulation) {
    await repo
      .pauseForFunds(sql, s.runId, s.deps.me)
      .catch((err: unknown) => log.error({ err }, "could not pause for funds"))
    if (s.run.getSnapshot().can({ type: "PAUSE", reason: "insufficient_funds" }))
      s.run.send({ type: "PAUSE", reason: "insufficient_funds" })
  }
  s.poke()
}
