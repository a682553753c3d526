// Each outbound event's `data`: the object as its read endpoint returns it (the call of GET
// /api/calls/{call_id}, the run of GET /api/workflows/{id}/runs, the approval of GET /api/approvals,
// the message as outreach email answers; the wallet's is built in billing/wallet.view.ts), plus
// `version`. The read endpoints build their objects with these same functions (the call's is
// results/call-view.ts), so an event and a poll never disagree on a field. Pure: the emitting
// repositories read the rows in their own transactions (importing any of them here would be a cycle).
//
// `version` orders the events of one object for a receiver (delivery order is not guaranteed):
// runs, calls, messages and wallets carry the epoch milliseconds of the row's change (the changing
// transaction's time), approvals their step (1 requested, 2 resolved: an approval changes once).
//
// call.completed / call.failed, decided from the attempt's end (calls.answered_at, calls.outcome):
// - completed: a person answered (or a machine took the whole message: voicemail_left) and the call
//   ended as a conversation ends — agreed, agreed_with_concession, declined, callback_scheduled,
//   escalated, pending_approval, do_not_call, no_decision, callee_hung_up, max_duration, handed_off.
// - failed: nobody answered or the call broke — no_answer, busy, failed, voicemail (no message
//   left), insufficient_funds (never dialed), agent_error, aborted, interrupted (its process died),
//   handoff_failed; and any other outcome of a call that was never answered.

import type { Currency } from "../platform/money.js"
import { iso } from "../platform/time.js"
import { callView } from "../results/call-view.js"
import type { CallRow } from "../results/results.repo.js"
import type { EventType } from "./events.js"
import type { EmitInput } from "./outbox.repo.js"

const ms = (d: Date | string | null | undefined): number | null => (d == null ? null : new Date(d).getTime())

// --- calls -----------------------------------------------------------------------------------

/** Outcomes that end a call as failed even when it was answered. */
const FAILED_OUTCOMES: ReadonlySet<string> = new Set([
  "no_answer",
  "busy",
  "failed",
  "voicemail",
  "insufficient_funds",
  "agent_error",
  "aborted",
  "interrupted",
  "handoff_failed",
])

export const callEndType = (outcome: string | null, answered: boolean): "call.completed" | "call.failed" => {
  if (outcome === null || FAILED_OUTCOMES.has(outcome)) return "call.failed"
  return answered || outcome === "voicemail_left" ? "call.completed" : "call.failed"
}

/** An ended call as GET /api/calls/{call_id} reads it, with its workspace. */
export interface CallObjectRow extends CallRow {
  readonly tenant_id: number
}

/**
 * The call of GET /api/calls/{call_id} without its transcript and analysis: the turns may still be
 * on their way to Postgres when the call ends, and the analysis comes later with call.analyzed.
 * Plus connected_seconds, the name the timeline's call payload gives talk_seconds.
 */
export const callObject = (c: CallRow) => {
  const { transcript: _t, transcript_truncated: _tt, analysis: _a, ...call } = callView(c, [], undefined)
  return { ...call, connected_seconds: c.connected_seconds }
}

export const callEndedEvent = (c: CallObjectRow): EmitInput => ({
  tenantId: Number(c.tenant_id),
  type: callEndType(c.outcome, c.answered_at !== null),
  data: { ...callObject(c), version: ms(c.ended_at) },
})

// --- runs ------------------------------------------------------------------------------------

/** A run as GET /api/workflows/{id}/runs reads it (src/runs/runs.repo.ts, listRuns). */
export interface RunObjectRow {
  readonly id: number
  readonly workflow_id: number
  readonly status: string
  readonly pause_reason: string | null
  readonly end_reason: string | null
  readonly targets_queued: number
  readonly started_at: Date
  readonly ended_at: Date | null
  readonly targets_total: number
  readonly targets_dialed: number
  readonly targets_connected: number
  readonly approvals_pending: number
  readonly concessions_decided: number
  readonly workflow_name: string
  readonly targets_done: number
  readonly targets_dialing: number
  /** Final targets (done or skipped) by outcome (a skipped target's is why it was skipped). */
  readonly outcomes: Readonly<Record<string, number>>
  readonly spent_calls_minor: number
  readonly spent_analyses_minor: number
  readonly currency: Currency
}

/** Run statuses a run never leaves (but for a completed one an approved callback opens again). */
const FINISHED: ReadonlySet<string> = new Set(["completed", "cancelled", "failed"])

/**
 * The run object of GET /api/workflows/{id}/runs: its counters, its progress (targets done of the
 * total, final outcomes), whether it has finished, and its spend so far.
 */
export const runObject = <R extends RunObjectRow>(r: R) => {
  const { spent_calls_minor, spent_analyses_minor, currency, ...rest } = r
  return {
    ...rest,
    run_id: r.id,
    started_at: iso(r.started_at),
    ended_at: iso(r.ended_at),
    finished: FINISHED.has(r.status),
    spend: {
      calls_minor: Number(spent_calls_minor),
      analyses_minor: Number(spent_analyses_minor),
      total_minor: Number(spent_calls_minor) + Number(spent_analyses_minor),
      currency,
    },
  }
}

/** workflow.run.started (a start, a resume, or a finished run opened again for a callback). */
export const runStartedEvent = (tenantId: number, r: RunObjectRow, resumed: boolean, changedAt: Date): EmitInput => ({
  tenantId,
  type: "workflow.run.started",
  data: { ...runObject(r), resumed, version: ms(changedAt) },
})

/** workflow.run.ended: completed, cancelled or failed (a pause is not an end). */
export const runEndedEvent = (tenantId: number, r: RunObjectRow, changedAt: Date): EmitInput => ({
  tenantId,
  type: "workflow.run.ended",
  data: { ...runObject(r), version: ms(changedAt) },
})

// --- approvals -------------------------------------------------------------------------------

export interface ApprovalObjectRow {
  readonly id: number
  readonly tenant_id?: number
  readonly workflow_id: number
  readonly run_id: number | null
  readonly call_id: number | null
  readonly target_phone: string | null
  readonly proposed_action: "concession" | "callback" | "escalate"
  readonly proposed_value_minor: number | null
  readonly currency: Currency
  readonly rationale: string | null
  readonly context: Record<string, unknown>
  readonly status: "pending" | "approved" | "denied" | "expired"
  readonly created_at: Date
  readonly expires_at: Date
  readonly decided_at: Date | null
  readonly decided_by: number | null
  readonly decided_by_api_key_id: number | null
  readonly note: string | null
  readonly phase: "on_hold" | "after_call" | null
  readonly approved_value_minor: number | null
  readonly decided_phase: "on_hold" | "after_call" | null
  readonly effect: string | null
  readonly decided_by_kind: "user" | "api_key" | "system" | null
  readonly decided_by_name: string | null
  readonly decided_by_email: string | null
  readonly target_name: string | null
  readonly workflow_name: string | null
}

/**
 * The approval object of GET /api/approvals. `phase` is read with the row (an event carries the
 * phase when it was written: a requested approval's is on_hold while its callee holds).
 */
export const approvalObject = (r: ApprovalObjectRow) => ({
  id: r.id,
  workflow_id: r.workflow_id,
  run_id: r.run_id,
  call_id: r.call_id,
  target_phone: r.target_phone,
  proposed_action: r.proposed_action,
  proposed_value_minor: r.proposed_value_minor,
  currency: r.currency,
  rationale: r.rationale,
  context: r.context,
  status: r.status,
  created_at: iso(r.created_at),
  expires_at: iso(r.expires_at),
  decided_at: iso(r.decided_at),
  decided_by: r.decided_by,
  decided_by_api_key_id: r.decided_by_api_key_id,
  note: r.note,
  phase: r.phase,
  approved_value_minor: r.approved_value_minor,
  decided_phase: r.decided_phase,
  effect: r.effect,
  decided_by_kind: r.decided_by_kind,
  decided_by_name: r.decided_by_name,
  decided_by_email: r.decided_by_email,
  target_name: r.target_name,
  workflow_name: r.workflow_name,
})

/** approval.requested for a pending approval, approval.resolved for an approved, denied or expired one. */
export const approvalEvent = (tenantId: number, r: ApprovalObjectRow): EmitInput => ({
  tenantId,
  type: r.status === "pending" ? "approval.requested" : "approval.resolved",
  data: { ...approvalObject(r), version: r.status === "pending" ? 1 : 2 },
})

// --- outreach email messages ----------------------------------------------------------------

export interface MessageObjectRow {
  readonly id: number
  readonly tenant_id: number
  readonly to_email: string
  readonly channel: string
  readonly subject: string
  readonly state: string
  readonly provider: string | null
  readonly provider_message_id: string | null
  readonly created_at: Date
  readonly updated_at: Date
}

/** An outreach email as POST /api/internal/outreach-email answers and the timeline's message events name it. */
export const messageObject = (m: MessageObjectRow) => ({
  id: m.id,
  message_id: m.id,
  to: m.to_email,
  channel: m.channel,
  subject: m.subject,
  state: m.state,
  provider: m.provider,
  provider_message_id: m.provider_message_id,
  created_at: iso(m.created_at),
  updated_at: iso(m.updated_at),
})

export const messageEvent = (
  type: Extract<EventType, "message.sent" | "message.delivered" | "message.replied">,
  m: MessageObjectRow,
): EmitInput => ({
  tenantId: Number(m.tenant_id),
  type,
  data: { ...messageObject(m), version: ms(m.updated_at) },
})
