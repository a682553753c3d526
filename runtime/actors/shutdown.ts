// The end of a run's calls when its runtime process stops (SIGTERM) and SHUTDOWN_TIMEOUT_MS ran
// out before they finished on their own: each is hung up and ended here, by its owner, as
// `interrupted` — charged once for the time it was connected, its target done (never dialed
// again), its dial slot freed — so the process that takes the run over finds nothing to finalise.
// The endings are grouped (runtime/actors/settlements.ts): thousands of calls are settled and recorded in
// a few transactions, not several round trips each.
import type { AttemptEnd } from "../../src/calls/calls.repo.js"
import { Decision } from "../../src/dialing/dialer.policy.js"
import { billedSeconds, type LiveCall, type RunScope } from "./run-scope.js"
import { finishAttemptGrouped } from "./settlements.js"

/** A call still reserving its funds is given this long to finish, so no reservation is left behind. */
const RESERVE_GRACE_MS = 2_000
/**
 * How long the endings may take, after the reserve grace (the process exits
 * SHUTDOWN_TIMEOUT_MS + 5 s after SIGTERM at the latest). A call whose end is not written by then
 * stays in flight in Postgres: the process that takes the run over finalises it (each write is
 * idempotent and conditional on the owner, so a late write of ours and theirs never both count).
 */
const END_BUDGET_MS = 2_500

/** Ends every call the run still holds; resolves once each is recorded (or could not be). */
export async function endCallsAtShutdown(s: RunScope): Promise<void> {
  const { sql, me, log, money, settings, slots } = s.deps
  // A reservation in flight would land after its release: wait for it (briefly) first.
  const t0 = Date.now()
  const graceUntil = t0 + RESERVE_GRACE_MS
  while (Date.now() < graceUntil && [...s.calls.values()].some((c) => c.actor.getSnapshot().matches("reserving")))
    await new Promise((r) => setTimeout(r, 20))
  const cut = [...s.calls.entries()]
  if (cut.length === 0) return
  log.warn({ run_id: s.runId, calls: cut.length }, "shutdown timeout: ending the calls still in flight")
  const ended = Promise.all(
    cut.map(async ([callId, live]) => {
      // Out of the map first: the actor's own end (call-effects.ts) then writes nothing.
      s.calls.delete(callId)
      live.actor.stop()
      live.leg?.release?.()
      // Hung up while it is billed (to now): a slow carrier does not hold the others' endings back.
      // The leg's hang-up never rejects: a failure is logged, counted and swept (hangups.ts).
      await Promise.all([
        live.leg?.hangup(),
        endOne(callId, live).catch((err: unknown) =>
          log.error({ err, call_id: callId, run_id: s.runId }, "could not end a call at shutdown"),
        ),
      ])
    }),
  )
  let timer: NodeJS.Timeout | undefined
  const budget = new Promise<"late">((r) => {
    timer = setTimeout(() => r("late"), END_BUDGET_MS)
  })
  const late = (await Promise.race([ended, budget])) === "late"
  clearTimeout(timer)
  const ms = Date.now() - t0
  if (late)
    log.warn({ run_id: s.runId, ms }, "shutdown: some call endings not written in time; the next owner ends them")
  else log.info({ run_id: s.runId, calls: cut.length, ms }, "shutdown: calls ended")

  async function endOne(callId: number, live: LiveCall): Promise<void> {
    const now = Date.now()
    const seconds =
      live.answeredAtMs === null
        ? 0
        : billedSeconds(now - live.answeredAtMs, settings.timeScale, live.turns, live.variant.ruleBook.max_call_seconds)
    // Grouped with the other calls ending now; Postgres out of reach is waited out within the budget.
    const settled = await money.settle(`call:${callId}`, seconds)
    slots.leave([`tenant:${s.tenantId}`, `workflow:${s.workflowId}`])
    const charged = settled?.chargedMinor ?? null
    const attempt: AttemptEnd = {
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
      next: { kind: "done", outcome: "interrupted" },
      decision: Decision.stop(live.targetId, now, "shutdown", { call_id: callId, connected_seconds: seconds }, charged),
      addToDnc: false,
      phone: live.phone,
    }
    // Idempotent (the call ends once): a Postgres blip is waited out, within the shutdown's budget.
    await finishAttemptGrouped(sql, attempt)
  }
}
