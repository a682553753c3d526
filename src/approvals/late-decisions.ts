// What a decision does to its call, said as a sentence (the decide response's `effect`) and, when
// the call is over, applied to the target's result in the deciding transaction: a concession agreed
// after the call, a refusal, an escalation for a colleague to follow up, a callback as a new attempt
// (the target's result and the callback asked of runs through the RunCallbacks port).
import { fillAgreedValue, fillCallbackAt } from "../analysis/analysis.repo.js"
import type { Sql, Tx } from "../platform/Db.js"
import { formatAmount } from "../platform/money.js"
import {
  type ApprovalRow,
  type DecidedCall,
  type DecisionEffect,
  type DecisionEffects,
  setDecisionEffect,
  unappliedDecisions,
} from "./approvals.repo.js"
import type { RunCallbacksPort } from "./RunCallbacks.js"

/** How far ahead an approved callback is dialed again (scaled by SIM_TIME_SCALE in simulation). */
export const CALLBACK_DELAY_MS = 2 * 3_600_000

/**
 * Outcomes a decision made after the call writes into the target's result (its call had ended
 * owing the decision: pending_approval). callback_scheduled is the callback's, as during a call.
 */
export const LATE_OUTCOMES = ["agreed_after_call", "denied_after_call", "escalated_after_call"] as const

/** What the callee was asked about, in words. */
const WHAT: Readonly<Record<ApprovalRow["proposed_action"], string>> = {
  concession: "discount",
  callback: "callback",
  escalate: "transfer to a colleague",
}

/** The approved amount of a concession, as people read it ("$15.00"); null without one. */
const amountOf = (row: ApprovalRow): string | null => {
  const value = row.approved_value_minor ?? row.proposed_value_minor
  return value === null ? null : formatAmount(Number(value), row.currency)
}

/** A time as a sentence shows it to whoever reads it anywhere: "2026-01-05 14:00 UTC". */
const utc = (at: Date): string => `${at.toISOString().slice(0, 16).replace("T", " ")} UTC`

/** The sentence for a decision its callee hears while still holding. */
const heardNow = (row: ApprovalRow): string => {
  if (row.status === "denied") return "The callee is still on the line and will hear the refusal now."
  const amount = row.proposed_action === "concession" ? amountOf(row) : null
  return amount === null
    ? "The callee is still on the line and will hear the approval now."
    : `The callee is still on the line and will hear the approval of ${amount} now.`
}

/** The sentence for a decision made as the call ends (its hold over): the call's end applies it. */
const onceEnded = (row: ApprovalRow): string => {
  const lead = "The callee is no longer holding and the call is ending: once it has ended, "
  if (row.status === "denied")
    return `${lead}the result will record the ${WHAT[row.proposed_action]} as denied; no one is called.`
  if (row.proposed_action === "callback") return `${lead}a callback will be scheduled.`
  if (row.proposed_action === "escalate")
    return `${lead}the result will record the transfer as approved, for a colleague to follow up; no one is called.`
  const amount = amountOf(row)
  return `${lead}the result will record the agreed ${amount ?? "discount"}; no one is called.`
}

/**
 * Applies a decision made after its call ended to the target's result: a callback approved becomes
 * a new attempt (as before); otherwise, when the call ended owing the decision (pending_approval), the
 * result records it. Anything else leaves the result as it is. Inside the caller's transaction.
 */
export async function applyAfterCall(
  tx: Tx,
  row: ApprovalRow,
  call: { readonly id: number; readonly run_target_id: number },
  timeScale: number,
  runs: RunCallbacksPort,
): Promise<{ lateOutcome: string; effect: string }> {
  const [target] = await tx<[{ status: string; outcome: string | null }?]>`
    select status, outcome from run_targets where id = ${call.run_target_id} for update`
  if (row.proposed_action === "callback" && row.status === "approved" && row.run_id !== null) {
    const at = new Date(Date.now() + CALLBACK_DELAY_MS * timeScale)
    if (await runs.scheduleCallback(tx, row.run_id, call.run_target_id, at)) {
      // The call's analysis may already be stored: its callback_at is this callback.
      await fillCallbackAt(tx, call.id, at)
      return {
        lateOutcome: "callback_scheduled",
        effect: `The call had ended: a callback is scheduled for ${utc(at)}.`,
      }
    }
    return {
      lateOutcome: "unchanged",
      effect: "The call had ended: the target is not waiting on this call any more, so no callback is scheduled.",
    }
  }
  if (target?.status !== "done" || target.outcome !== "pending_approval") {
    const how = target?.outcome ? ` (${target.outcome})` : ""
    return {
      lateOutcome: "unchanged",
      effect: `The call had ended${how}: the decision is recorded; the result is unchanged and no one is called.`,
    }
  }
  let outcome: (typeof LATE_OUTCOMES)[number]
  let effect: string
  if (row.status === "denied") {
    outcome = "denied_after_call"
    effect = `The call had ended: the result now records the ${WHAT[row.proposed_action]} as denied; no one is called.`
  } else if (row.proposed_action === "escalate") {
    outcome = "escalated_after_call"
    effect =
      "The call had ended: the result now records the transfer as approved, for a colleague to follow up; " +
      "no one is called."
  } else {
    outcome = "agreed_after_call"
    const value = row.approved_value_minor ?? row.proposed_value_minor
    if (value !== null) await fillAgreedValue(tx, call.id, Number(value))
    effect = `The call had ended: the result now records the agreed ${amountOf(row) ?? "discount"}; no one is called.`
  }
  await runs.recordLateOutcome(tx, call.run_target_id, outcome)
  return { lateOutcome: outcome, effect }
}

/**
 * The deciding transaction's effects (approvals.repo.ts decide): the phase, the sentence, and after
 * the call, the result.
 */
export const decisionEffects =
  (timeScale: number, runs: RunCallbacksPort): DecisionEffects =>
  async (tx: Tx, row: ApprovalRow, call: DecidedCall | undefined): Promise<DecisionEffect> => {
    if (call === undefined)
      return {
        phase: "after_call",
        lateOutcome: "unchanged",
        effect: "The call is over: the decision is recorded; no one is called.",
      }
    if (call.holding) return { phase: "on_hold", lateOutcome: null, effect: heardNow(row) }
    if (!call.ended) return { phase: "after_call", lateOutcome: null, effect: onceEnded(row) }
    return { phase: "after_call", ...(await applyAfterCall(tx, row, call, timeScale, runs)) }
  }

/**
 * A call ended after it stopped holding for `approvalIds` (their holds ran out): those decided
 * meanwhile, which the callee never heard, apply to the result now, each once (a decision that
 * finds the call ended applies itself instead). The number applied.
 */
export const applyDecisionsAfterCall = (
  sql: Sql,
  call: { readonly id: number; readonly run_target_id: number },
  approvalIds: readonly number[],
  timeScale: number,
  runs: RunCallbacksPort,
): Promise<number> =>
  sql.begin(async (tx) => {
    const rows = await unappliedDecisions(tx, call.id, approvalIds)
    for (const row of rows) {
      const { lateOutcome, effect } = await applyAfterCall(tx, row, call, timeScale, runs)
      await setDecisionEffect(tx, row.id, lateOutcome, effect)
    }
    return rows.length
  }) as Promise<number>
