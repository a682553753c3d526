// A simulation campaign as the API shows it: progress, outcomes in the buckets people read
// (from the runtime's outcome strings), the pending question and the forecast.
import type { SimCampaignState } from "../../machines/sim-campaign.machine.js"
import { iso } from "../platform/time.js"
import type { CampaignRow, QuestionRow, RunStats } from "./campaigns.repo.js"
import type { Forecast, SimSample } from "./forecast.js"

/** Every state the machine has, in its order: a record, so the compiler keeps it the machine's set. */
const STATES: Readonly<Record<SimCampaignState, null>> = {
  ready: null,
  running: null,
  awaiting_answer: null,
  completed: null,
  stopped: null,
  failed: null,
}

/** A campaign's states as the API names them (the machine itself runs only in runtime/). */
export const CAMPAIGN_STATES = Object.keys(STATES) as SimCampaignState[]

/** Which bucket each outcome a run target can end with (calls and agent outcomes) falls in. */
const BUCKET_OF: Readonly<Record<string, OutcomeBucket>> = {
  agreed: "agreed",
  agreed_with_concession: "agreed",
  declined: "declined",
  do_not_call: "declined",
  voicemail: "voicemail",
  voicemail_left: "voicemail",
  no_answer: "no_answer",
  busy: "busy",
  callback_scheduled: "callback",
  escalated: "escalated",
  no_decision: "no_decision",
  pending_approval: "no_decision",
  // a decision made after the call ended owing it (src/approvals/late-decisions.ts)
  agreed_after_call: "agreed",
  denied_after_call: "no_decision",
  escalated_after_call: "escalated",
  callee_hung_up: "no_decision",
  max_duration: "no_decision",
  failed: "failed",
  agent_error: "failed",
  aborted: "failed",
  interrupted: "failed",
  insufficient_funds: "failed",
}

export const OUTCOME_BUCKETS = [
  "agreed",
  "declined",
  "voicemail",
  "no_answer",
  "busy",
  "callback",
  "escalated",
  "no_decision",
  "failed",
  "other",
] as const
export type OutcomeBucket = (typeof OUTCOME_BUCKETS)[number]

/** Outcomes where nobody was reached. */
const NOT_CONNECTED: ReadonlySet<string> = new Set([
  "no_answer",
  "busy",
  "voicemail",
  "voicemail_left",
  "failed",
  "insufficient_funds",
])

export type OutcomeCount = { status: "done" | "skipped"; outcome: string | null; count: number }

/** Final outcomes counted by bucket, and each raw outcome string with its count. */
export function outcomeBuckets(rows: ReadonlyArray<OutcomeCount>) {
  const buckets = Object.fromEntries(OUTCOME_BUCKETS.map((b) => [b, 0])) as Record<OutcomeBucket, number>
  const byOutcome: Record<string, number> = {}
  for (const r of rows) {
    const name = r.outcome ?? (r.status === "skipped" ? "skipped" : "unknown")
    byOutcome[name] = (byOutcome[name] ?? 0) + r.count
    buckets[r.status === "skipped" ? "other" : (BUCKET_OF[name] ?? "other")] += r.count
  }
  return { buckets, byOutcome }
}

/** What the forecast rests on: the callees with a final outcome. */
export function sampleOf(rows: ReadonlyArray<OutcomeCount>, stats: RunStats): SimSample {
  let n = 0
  let connected = 0
  let agreed = 0
  let unanswered = 0
  for (const r of rows) {
    n += r.count
    if (r.status === "skipped" || r.outcome === null) continue
    if (!NOT_CONNECTED.has(r.outcome)) connected += r.count
    if (BUCKET_OF[r.outcome] === "agreed") agreed += r.count
    if (r.outcome === "no_answer") unanswered += r.count
  }
  return {
    n,
    connected,
    agreed,
    withApproval: Math.min(n, stats.final_with_approval),
    unanswered,
    talkSeconds: stats.final_talk_seconds,
  }
}

export interface CampaignFacts {
  readonly progress: { readonly released: number; readonly open: number; readonly final: number }
  readonly outcomes: ReadonlyArray<OutcomeCount>
  readonly stats: RunStats
  readonly questions: ReadonlyArray<QuestionRow>
  readonly forecast: Forecast | null
  /** The experiment rehearsed, as the experiments' endpoints show it (null: none). */
  readonly experiment: unknown
}

export const questionView = (q: QuestionRow) => ({
  question_id: q.id,
  action: q.proposed_action,
  value_minor: q.proposed_value_minor,
  currency: q.currency,
  rationale: q.rationale,
  target_phone: q.target_phone,
  asked_at: iso(q.created_at),
  expires_at: iso(q.expires_at),
})

export function campaignView(c: CampaignRow, state: SimCampaignState, f: CampaignFacts) {
  const { buckets, byOutcome } = outcomeBuckets(f.outcomes)
  const s = f.stats
  return {
    id: c.id,
    workflow_id: c.workflow_id,
    run_id: c.run_id,
    state,
    size: c.size,
    batch_size: c.batch_size,
    seed: c.seed,
    time_scale: c.time_scale,
    mix: c.mix,
    progress: { done: f.progress.final, released: f.progress.released, in_flight: f.progress.open, size: c.size },
    outcomes: {
      ...buckets,
      approvals_asked: s.approvals_asked,
      approvals_approved: s.approvals_approved,
      approvals_denied: s.approvals_denied,
      approvals_expired: s.approvals_expired,
      approvals_pending: s.approvals_pending,
      by_outcome: byOutcome,
    },
    avg_talk_seconds: s.talked_calls === 0 ? null : Math.round((s.talk_seconds / s.talked_calls) * 10) / 10,
    pending_question: f.questions.length === 0 ? null : questionView(f.questions[0]!),
    pending_questions: f.questions.length,
    forecast: f.forecast,
    experiment: f.experiment,
    turns_stream: `/api/runs/${c.run_id}/turns/stream`,
    charged_minor: 0,
    free: true,
    failure: c.failure,
    created_at: iso(c.created_at),
    updated_at: iso(c.updated_at),
    ended_at: iso(c.ended_at),
  }
}

export type CampaignView = ReturnType<typeof campaignView>
