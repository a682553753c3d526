// The end of a run's calls when its runtime process stops (SIGTERM) and SHUTDOWN_TIMEOUT_MS ran
// out before they finished on their own: each is hung up and ended here, by its owner, as
// `interrupted` — charged once for the time it was connected, its target done (never dialed
// again), its dial slot freed — so the process that takes the run over finds nothing to finalise.
import * as calls from "../src/calls/calls.repo.js"
import { retryOnDisconnect } from "../src/platform/Db.js"
import { Decision } from "./dialer.policy.js"
import { billedSeconds, type LiveCall, type RunScope } from "./run-scope.js"

/** A call still reserving its funds is given this long to finish, so no reservation is left behind. */
const RESERVE_GRACE_MS = 2_000

/** Ends every call the run still holds; resolves once each is recorded (or could not be). */
export async function endCallsAtShutdown(s: RunScope): Promise<void> {
  const { sql, me, log, money, settings, slots } = s.deps
  // A reservation in flight would land after its release: wait for it (briefly) first.
  const graceUntil = Date.now() + RESERVE_GRACE_MS
  while (Date.now() < graceUntil && [...s.calls.values()].some((c) => c.actor.getSnapshot().matches("reserving")))
    await new Promise((r) => setTimeout(r, 20))
  const cut = [...s.calls.entries()]
  if (cut.length === 0) return
  log.warn({ run_id: s.runId, calls: cut.length }, "shutdown timeout: ending the calls still in flight")
  await Promise.all(
    cut.map(async ([callId, live]) => {
      // Out of the map first: the actor's own end (call-effects.ts) then writes nothing.
      s.calls.delete(callId)
      live.actor.stop()
      await live.leg?.hangup().catch(() => {})
      await endOne(callId, live).catch((err: unknown) =>
        log.error({ err, call_id: callId, run_id: s.runId }, "could not end a call at shutdown"),
      )
    }),
  )

  async function endOne(callId: number, live: LiveCall): Promise<void> {
    const now = Date.now()
    const seconds =
      live.answeredAtMs === null
        ? 0
        : billedSeconds(now - live.answeredAtMs, settings.timeScale, live.turns, s.ruleBook.max_call_seconds)
    const settled = await retryOnDisconnect(() => money.settle(`call:${callId}`, seconds), { maxMs: 3_000 })
    slots.leave([`tenant:${s.tenantId}`, `workflow:${s.workflowId}`])
    const charged = settled?.chargedMinor ?? null
    const attempt = {
      me,
      runId: s.runId,
      tenantId: s.tenantId,
      callId,
      runTargetId: live.runTargetId,
      outcome: "interrupted",
      connectedSeconds: seconds,
      costMinor: charged,
      reservedMinor: live.reservedMinor,
      endedAt: new Date(now),
      next: { kind: "done", outcome: "interrupted" } as const,
      decision: Decision.stop(live.targetId, now, "shutdown", { call_id: callId, connected_seconds: seconds }, charged),
      addToDnc: false,
      phone: live.phone,
    }
    // Idempotent (the call ends once): a Postgres blip is waited out briefly, within the shutdown's grace.
    await retryOnDisconnect(() => calls.finishAttempt(sql, attempt), { maxMs: 3_000 })
  }
}
