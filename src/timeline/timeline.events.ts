// Rows of each timeline source as the spec's event shape {at, kind, direction, workflow_id,
// run_id, summary, payload}, with the sentence a person reads in the summary. Pure functions.
import { type Currency, formatAmount } from "../platform/money.js"
import { iso } from "../platform/time.js"
import { encodeCursor } from "./timeline.cursor.js"
import type {
  AccountEventRow,
  ApiKeyEventRow,
  ApprovalRow,
  CallRow,
  DialerRow,
  DncRow,
  InboundCallRow,
  KbEventRow,
  MessageEventRow,
  Ordered,
  TurnSummaryRow,
  UserRow,
  WorkflowRow,
} from "./timeline.repo.js"

export type EventKind =
  | "call"
  | "turns"
  | "decision"
  | "dnc"
  | "dialer"
  | "api_key"
  | "workflow"
  | "consent"
  | "account"
  | "email"
  | "kb"

export interface TimelineEvent {
  readonly at: string
  readonly kind: EventKind
  readonly direction: "inbound" | "outbound"
  readonly workflow_id: number | null
  readonly run_id: number | null
  readonly summary: string
  readonly payload: Record<string, unknown>
  /** Pass as `before` to get the events after this one. */
  readonly cursor: string
}

/** An event with what merging needs: its exact time and tiebreak key. */
export interface Sortable extends Ordered {
  readonly event: TimelineEvent
}

const event = (row: Ordered, e: Omit<TimelineEvent, "at" | "cursor">): Sortable => ({
  at_us: row.at_us,
  key: row.key,
  event: { at: new Date(Math.floor(row.at_us / 1000)).toISOString(), ...e, cursor: encodeCursor(row.at_us, row.key) },
})

/** Newest first; equal times by key, the order the cursor pages in. */
export const newestFirst = (a: Ordered, b: Ordered): number => b.at_us - a.at_us || b.key - a.key

/** 95 → "1 min 35 s", 120 → "2 min", 7 → "7 s". */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds))
  const m = Math.floor(s / 60)
  const rest = s % 60
  if (m === 0) return `${rest} s`
  return rest === 0 ? `${m} min` : `${m} min ${rest} s`
}

const words = (token: string) => token.replace(/_/g, " ")

const clip = (text: string, max = 120) => (text.length <= max ? text : `${text.slice(0, max - 1).trimEnd()}…`)

// ---------------------------------------------------------------------------------------------
// A phone number

const UNANSWERED: Readonly<Record<string, string>> = {
  no_answer: "No answer",
  busy: "Busy",
  failed: "Call failed",
  insufficient_funds: "Not placed: insufficient funds",
  interrupted: "Call interrupted",
}

export function callSummary(
  c: Pick<CallRow, "status" | "outcome" | "answered_at" | "connected_seconds" | "attempt">,
): string {
  if (c.status === "dialing") return `Dialing (attempt ${c.attempt})`
  if (c.status === "connected") return `Call in progress (attempt ${c.attempt})`
  if (c.answered_at !== null)
    return `Call answered — ${words(c.outcome ?? "ended")}, ${duration(c.connected_seconds ?? 0)}`
  const label = c.outcome === null ? "Call ended" : (UNANSWERED[c.outcome] ?? `Call ended — ${words(c.outcome)}`)
  return `${label} (attempt ${c.attempt})`
}

export const callEvent = (c: CallRow): Sortable =>
  event(c, {
    kind: "call",
    direction: "outbound",
    workflow_id: c.workflow_id,
    run_id: c.run_id,
    summary: callSummary(c),
    payload: {
      call_id: c.id,
      attempt: c.attempt,
      status: c.status,
      outcome: c.outcome,
      connected_seconds: c.connected_seconds,
      cost_minor: c.cost_minor,
      currency: c.currency,
      target_id: c.target_id,
      started_at: iso(c.started_at),
      answered_at: iso(c.answered_at),
      ended_at: iso(c.ended_at),
      // null until the call has an analysis (a call that never connected never gets one).
      analysis:
        c.analysis_status === null
          ? null
          : { status: c.analysis_status, summary: c.analysis_summary, goal_met: c.goal_met, sentiment: c.sentiment },
    },
  })

export const turnsEvent = (t: TurnSummaryRow): Sortable => {
  const parts = [
    t.first_agent_line === null ? undefined : `agent: “${clip(t.first_agent_line, 80)}”`,
    t.last_callee_line === null ? undefined : `callee: “${clip(t.last_callee_line, 80)}”`,
  ].filter((p) => p !== undefined)
  return event(t, {
    kind: "turns",
    direction: "outbound",
    workflow_id: t.workflow_id,
    run_id: t.run_id,
    summary: `${t.turns} ${t.turns === 1 ? "turn" : "turns"}${parts.length > 0 ? ` — ${parts.join(" … ")}` : ""}`,
    payload: {
      call_id: t.call_id,
      target_id: t.target_id,
      count: t.turns,
      first_agent_line: t.first_agent_line,
      last_callee_line: t.last_callee_line,
      first_at: iso(t.first_at),
      last_at: iso(t.last_at),
    },
  })
}

const proposal = (a: ApprovalRow): string => {
  switch (a.proposed_action) {
    case "concession":
      return a.proposed_value_minor === null
        ? "a concession"
        : `a concession of ${formatAmount(a.proposed_value_minor, a.currency as Currency)}`
    case "callback":
      return "a callback"
    case "escalate":
      return "an escalation to a human"
  }
}

const approvalPayload = (a: ApprovalRow) => ({
  approval_id: a.id,
  proposed_action: a.proposed_action,
  proposed_value_minor: a.proposed_value_minor,
  currency: a.currency,
  rationale: a.rationale,
  status: a.status,
  target_phone: a.target_phone,
  call_id: a.call_id,
  created_at: iso(a.created_at),
  expires_at: iso(a.expires_at),
  decided_at: iso(a.decided_at),
  decided_by: a.decided_by,
  note: a.note,
})

/** The agent asked a human: outbound from the conversation to the workspace. */
export const approvalRequestedEvent = (a: ApprovalRow): Sortable =>
  event(a, {
    kind: "decision",
    direction: "outbound",
    workflow_id: a.workflow_id,
    run_id: a.run_id,
    summary: `Approval requested for ${proposal(a)}`,
    payload: { ...approvalPayload(a), stage: "requested" },
  })

/** The human's answer (or its lapse) coming back in. */
export const approvalResolvedEvent = (a: ApprovalRow): Sortable => {
  const by = a.decided_by_email ?? (a.decided_by === null ? null : `user ${a.decided_by}`)
  const summary =
    a.status === "expired"
      ? `Approval for ${proposal(a)} expired undecided`
      : `${a.status === "approved" ? "Approved" : "Denied"} ${proposal(a)}${by === null ? "" : ` (${by})`}` +
        `${a.target_phone === null ? "" : ` for ${a.target_phone}`}`
  return event(a, {
    kind: "decision",
    direction: "inbound",
    workflow_id: a.workflow_id,
    run_id: a.run_id,
    summary,
    payload: { ...approvalPayload(a), stage: "resolved" },
  })
}

/** Inbound when the contact asked for it (on a call, by unsubscribing); outbound when the workspace added it. */
export const dncEvent = (d: DncRow): Sortable =>
  event(d, {
    kind: "dnc",
    direction: d.source === "call" || d.source === "unsubscribe" ? "inbound" : "outbound",
    workflow_id: null,
    run_id: null,
    summary: `Added to the do-not-call list (${d.source})${d.reason === null ? "" : `: ${clip(d.reason)}`}`,
    payload: { entry_id: d.id, phone_e164: d.phone_e164, source: d.source, reason: d.reason },
  })

export const inboundCallEvent = (i: InboundCallRow): Sortable =>
  event(i, {
    kind: "call",
    direction: "inbound",
    workflow_id: i.workflow_id,
    run_id: null,
    summary: `Called our number ${i.to_e164}${i.duration_seconds === null ? "" : `, ${i.duration_seconds} s`}`,
    payload: {
      inbound_call_id: i.id,
      provider: i.provider,
      provider_call_id: i.provider_call_id,
      to: i.to_e164,
      status: i.status,
      greeting: i.greeting,
    },
  })

const DIALER_VERB: Readonly<Record<string, string>> = { skip: "skipped", hold: "held", stop: "stopped" }

export const dialerEvent = (d: DialerRow): Sortable =>
  event(d, {
    kind: "dialer",
    direction: "outbound",
    workflow_id: d.workflow_id,
    run_id: d.run_id,
    summary: `Dialer ${DIALER_VERB[d.decision] ?? d.decision} the number: ${words(d.reason)}`,
    payload: {
      decision_id: d.id,
      decision: d.decision,
      reason: d.reason,
      detail: d.detail,
      target_id: d.target_id,
      call_id: d.call_id,
    },
  })

// ---------------------------------------------------------------------------------------------
// A user of the workspace

export const apiKeyEvent = (e: ApiKeyEventRow): Sortable =>
  event(e, {
    kind: "api_key",
    direction: "inbound",
    workflow_id: null,
    run_id: null,
    summary:
      `${e.action === "created" ? "Created" : e.action === "revoked" ? "Revoked" : "Deleted"} API key ` +
      `${e.name === null ? `#${e.key_id}` : `“${e.name}” (${e.prefix}…)`}`,
    payload: {
      key_id: e.key_id,
      action: e.action,
      name: e.name,
      prefix: e.prefix,
      scope: e.scope,
      ip: e.ip,
      revoked_reason: e.action === "revoked" ? e.revoked_reason : null,
    },
  })

export const workflowEvent = (w: WorkflowRow): Sortable =>
  event(w, {
    kind: "workflow",
    direction: "inbound",
    workflow_id: w.id,
    run_id: null,
    summary: `Created workflow “${w.name}”`,
    payload: { workflow_id: w.id, name: w.name, status: w.status, persona: w.persona },
  })

export const consentEvent = (w: WorkflowRow): Sortable =>
  event(w, {
    kind: "consent",
    direction: "inbound",
    workflow_id: w.id,
    run_id: null,
    summary: `Attested consent for workflow “${w.name}”`,
    payload: {
      workflow_id: w.id,
      consent_attestation_text: w.compliance["consent_attestation_text"] ?? null,
      tcpa_sender_id: w.compliance["tcpa_sender_id"] ?? null,
      dpdp_consent_method: w.compliance["dpdp_consent_method"] ?? null,
    },
  })

export const accountEvent = (user: UserRow, e: AccountEventRow): Sortable => {
  switch (e.kind) {
    case "signup":
      return event(e, {
        kind: "account",
        direction: "inbound",
        workflow_id: null,
        run_id: null,
        summary: user.role === "owner" ? "Signed up and created the workspace" : `Account created (${user.role})`,
        payload: { user_id: user.id, email: user.email, role: user.role, stage: "signup" },
      })
    case "verification_email":
      return event(e, {
        kind: "email",
        direction: "outbound",
        workflow_id: null,
        run_id: null,
        summary: `Verification email sent to ${user.email}`,
        payload: { to: user.email, purpose: "verify_email", expires_at: iso(e.expires_at), used_at: iso(e.used_at) },
      })
    case "email_verified":
      return event(e, {
        kind: "account",
        direction: "inbound",
        workflow_id: null,
        run_id: null,
        summary: `Email address ${user.email} verified`,
        payload: { user_id: user.id, email: user.email, stage: "email_verified" },
      })
  }
}

// ---------------------------------------------------------------------------------------------
// The knowledge base

const VERDICT_PHRASE: Readonly<Record<string, string>> = {
  ban: "Ban on",
  punish: "Punishment for",
  reward: "Reward for",
}

const LEARNT_FROM: Readonly<Record<string, string>> = {
  ban: "learnt from a ban",
  punish: "proposed from punishments, paused for review",
  reward: "learnt from rewards",
}

const ARTICLE: Readonly<Record<string, string>> = { ban: "a ban", punish: "a punishment", reward: "a reward" }

function kbSummary(e: KbEventRow): string {
  const d = e.detail
  const rule = `Rule${e.title === null ? (e.rule_id === null ? "" : ` #${e.rule_id}`) : ` “${clip(e.title, 80)}”`}`
  const line = typeof d["line"] === "string" ? d["line"] : e.line
  switch (e.action) {
    case "feedback_given": {
      const was = d["previous_verdict"]
      const replaced = typeof was === "string" && was !== e.verdict ? ` (was ${ARTICLE[was] ?? was})` : ""
      return (
        `${VERDICT_PHRASE[e.verdict ?? ""] ?? "Verdict on"} the agent's line` +
        `${line === null ? "" : ` “${clip(line, 80)}”`}${replaced}`
      )
    }
    case "rule_learnt":
      return `${rule} ${LEARNT_FROM[String(d["learnt_kind"])] ?? "learnt from feedback"}`
    case "rule_created":
      return `${rule} created${e.bucket === null ? "" : ` in ${e.bucket}`}`
    case "rule_archived":
      return `${rule} archived`
    case "rule_updated": {
      if (d["reason"] === "reward" && typeof d["priority"] === "number")
        return `${rule} raised to priority ${d["priority"]} by a reward`
      const to = d["status_to"]
      if (typeof to === "string") return `${rule} ${to === "active" ? "activated" : to}`
      const fields = Array.isArray(d["fields"]) ? (d["fields"] as unknown[]).map(String) : []
      return `${rule} changed${fields.length > 0 ? ` (${fields.join(", ")})` : ""}`
    }
    case "rules_imported": {
      const created = Number(d["created"] ?? 0)
      const archived = Number(d["archived"] ?? 0)
      return (
        `Imported ${created} knowledge-base ${created === 1 ? "rule" : "rules"}` +
        `${archived > 0 ? `, archiving ${archived}` : ""}`
      )
    }
    default:
      return `Knowledge base: ${words(e.action)}`
  }
}

/** A verdict or a rule change; what learning did on its own reads as outbound, a person's acts as inbound. */
export const kbEvent = (e: KbEventRow): Sortable =>
  event(e, {
    kind: "kb",
    direction: e.action === "rule_learnt" || e.detail["reason"] === "reward" ? "outbound" : "inbound",
    workflow_id: e.workflow_id,
    run_id: e.run_id,
    summary: kbSummary(e),
    payload: {
      ...e.detail,
      event_id: e.id,
      action: e.action,
      rule_id: e.rule_id,
      feedback_id: e.feedback_id,
      turn_id: e.turn_id,
      verdict: e.verdict,
      title: e.title,
      bucket: e.bucket,
    },
  })

// ---------------------------------------------------------------------------------------------
// An email address: message.* events

const MESSAGE_SUMMARY: Readonly<Record<string, string>> = {
  sent: "Email sent",
  delivered: "Email delivered",
  opened: "Email opened",
  clicked: "Link in the email clicked",
  bounced: "Email bounced; the address is suppressed",
  soft_bounced: "Email soft-bounced",
  complained: "Marked as spam; the address is suppressed",
  unsubscribed: "Unsubscribed",
  resubscribed: "Resubscribed",
  failed: "Email could not be sent",
  blocked: "Email not sent: the address is suppressed or unsubscribed",
  replied: "Replied to the email",
}

export const messageEvent = (r: MessageEventRow): Sortable =>
  event(r, {
    kind: "email",
    direction: r.kind === "sent" || r.kind === "failed" || r.kind === "blocked" ? "outbound" : "inbound",
    workflow_id: null,
    run_id: null,
    summary: clip(
      `${MESSAGE_SUMMARY[r.kind] ?? words(r.kind)}${r.channel ? ` (${words(r.channel)})` : ""}` +
        `${r.subject ? `: ${r.subject}` : ""}${r.detail ? ` (${r.detail})` : ""}`,
    ),
    payload: {
      event: `message.${r.kind}`,
      message_id: r.message_id,
      to: r.to_email,
      channel: r.channel,
      ...(r.detail !== null && { detail: r.detail }),
    },
  })
