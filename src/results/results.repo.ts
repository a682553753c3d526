// SQL of what a run's calls came to, for reading: one call with its transcript and its analysis,
// and a run's results, one row per target, in keyset pages by target id. Nothing here writes.

import type { Sql } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"
import type { TurnLatency } from "../providers/telephony/telephony.interface.js"

export interface CallRow {
  readonly id: number
  readonly run_id: number
  readonly workflow_id: number
  readonly target_id: number
  readonly attempt: number
  readonly phone: string
  readonly name: string | null
  readonly provider: string
  readonly status: string
  readonly outcome: string | null
  readonly connected_seconds: number | null
  readonly reserved_minor: number | null
  readonly cost_minor: number | null
  readonly currency: Currency
  readonly started_at: Date
  readonly answered_at: Date | null
  readonly ended_at: Date | null
  /** Hosted speech vendors that failed the call (migration 0051): {at, stage, provider, message}. */
  readonly provider_failures: ReadonlyArray<{ at: string; stage: string; provider: string; message: string }>
  /** The experiment and arm the call was placed in (migration 0056); null outside an experiment. */
  readonly experiment_id: number | null
  readonly arm: string | null
}

/** The call, when it is the workspace's (another workspace's call is as absent as a missing one). */
export const callOfTenant = async (sql: Sql, tenantId: number, callId: number): Promise<CallRow | undefined> => {
  const [row] = await sql<[CallRow?]>`
    select c.id, c.run_id, c.workflow_id, c.target_id, c.attempt, c.phone_e164 as phone, au.name, c.provider,
      c.status, c.outcome, c.connected_seconds, c.reserved_minor, c.cost_minor, t.currency, c.started_at,
      c.answered_at, c.ended_at, c.provider_failures, c.experiment_id::int, c.arm
    from calls c
    join tenants t on t.id = c.tenant_id
    left join audience_targets au on au.id = c.target_id
    where c.id = ${callId} and c.tenant_id = ${tenantId}`
  return row
}

export interface TurnRow {
  readonly seq: number
  readonly turn_index: number
  readonly speaker: "agent" | "callee" | "system"
  readonly text: string
  readonly at: Date
  /** A call heard as audio: an agent turn the callee spoke over, and its latency by stage (migration 0048). */
  readonly interrupted: boolean
  readonly latency_ms: TurnLatency | null
}

/** The call's turns in seq order, at most `limit`. */
export const turnsOfCall = (sql: Sql, tenantId: number, callId: number, limit: number) =>
  sql<TurnRow[]>`
    select seq, turn_index, speaker, text, at, interrupted, latency_ms
    from turns
    where call_id = ${callId} and tenant_id = ${tenantId}
    order by seq
    limit ${limit}`

export interface AnalysisRow {
  readonly status: "pending" | "done" | "failed"
  readonly attempts: number
  readonly summary: string | null
  readonly goal_met: boolean | null
  readonly sentiment: "positive" | "neutral" | "negative" | null
  readonly callback_at: Date | null
  readonly agreed_value_minor: number | null
  readonly fields: Readonly<Record<string, unknown>>
  readonly model: string | null
  readonly model_version: string | null
  readonly error: string | null
  readonly charged_minor: number | null
  readonly analyzed_at: Date | null
}

export const analysisOfCall = async (sql: Sql, tenantId: number, callId: number): Promise<AnalysisRow | undefined> => {
  const [row] = await sql<[AnalysisRow?]>`
    select status, attempts, summary, goal_met, sentiment, callback_at, agreed_value_minor, fields, model,
      model_version, error, charged_minor, analyzed_at
    from call_analyses
    where call_id = ${callId} and tenant_id = ${tenantId}`
  return row
}

export interface RunRow {
  readonly id: number
  readonly workflow_id: number
  readonly status: string
  readonly currency: Currency
  /** The rule book's `analysis.fields` as stored (validated when the rule book was saved), or null. */
  readonly analysis_fields: unknown
}

/**
 * The run, when it is the workspace's, with the analysis fields of the rule book it ran (a run
 * started before rule books were pinned to runs reads its workflow's current one).
 */
export const runOfTenant = async (sql: Sql, tenantId: number, runId: number): Promise<RunRow | undefined> => {
  const [row] = await sql<[RunRow?]>`
    select r.id, r.workflow_id, r.status, t.currency, rb.body -> 'analysis' -> 'fields' as analysis_fields
    from runs r
    join tenants t on t.id = r.tenant_id
    join workflows w on w.id = r.workflow_id
    left join rule_books rb on rb.id = coalesce(r.rule_book_id, w.rule_book_id)
    where r.id = ${runId} and r.tenant_id = ${tenantId}`
  return row
}

export interface ResultRow {
  readonly target_id: number
  readonly phone: string
  readonly name: string | null
  /** Where the dialer stands with the target: queued, waiting, dialing, done, skipped. */
  readonly status: string
  /** The final outcome once the target is done (or skipped); null while it is not. */
  readonly outcome: string | null
  readonly attempts: number
  readonly talk_seconds: number
  /** What the target cost the wallet: its calls' settled costs plus their analyses' charges. */
  readonly cost_minor: number
  readonly analysis_status: "pending" | "done" | "failed" | null
  readonly summary: string | null
  readonly goal_met: boolean | null
  readonly sentiment: string | null
  readonly callback_at: Date | null
  readonly agreed_value_minor: number | null
  readonly fields: Readonly<Record<string, unknown>> | null
  /** What a decision made after the target's call did to this result (src/approvals/late-decisions.ts). */
  readonly decision_effect: string | null
  /** The target's latest call (its last attempt), for GET /api/calls/{id}; null before the first dial. */
  readonly call_id: number | null
  /** The experiment arm the target's calls were placed in (its latest call's); null outside an experiment. */
  readonly arm: string | null
}

/**
 * One page of a run's results: targets after `afterTargetId`, in target id order, each with the
 * sums over its calls, the analysis of its latest analysed call (a later attempt that never
 * connected has none, and must not hide what the earlier conversation came to), and what the
 * latest decision made after one of its calls did to the result. Keyset pages on
 * the (run_id, target_id) unique index: every page is one index range, however deep. The page's
 * targets are chosen first (a subquery with its own limit), so their calls are read for those
 * targets only, whatever the planner thinks of the run's size (on stale statistics it joined every
 * remaining target's calls and then sorted: a 100,000-target export took five times as long). The
 * caller checked the run is the workspace's; the workspace is named here too, so a page can never
 * hold another's targets whatever a caller passes (their calls are found through the target).
 */
export const resultsPage = (sql: Sql, tenantId: number, runId: number, afterTargetId: number, limit: number) =>
  sql<ResultRow[]>`
    select rt.target_id, rt.phone_e164 as phone, au.name, rt.status, rt.outcome, rt.attempts,
      coalesce(s.talk_seconds, 0)::int as talk_seconds, coalesce(s.cost_minor, 0)::bigint as cost_minor,
      a.status as analysis_status, a.summary, a.goal_met, a.sentiment, a.callback_at,
      -- a concession agreed after the call shows at once, before (or whatever) its analysis says
      coalesce(a.agreed_value_minor, case when late.late_outcome = 'agreed_after_call' then late.value_minor end)
        as agreed_value_minor,
      a.fields, late.effect as decision_effect, s.last_call_id as call_id, s.arm
    from (
      select id, target_id, phone_e164, status, outcome, attempts from run_targets
      where run_id = ${runId} and tenant_id = ${tenantId} and target_id > ${afterTargetId}
      order by target_id
      limit ${limit}
    ) rt
    left join audience_targets au on au.id = rt.target_id
    left join lateral (
      select sum(c.connected_seconds) as talk_seconds,
        sum(coalesce(c.cost_minor, 0) + coalesce(ca.charged_minor, 0)) as cost_minor,
        (array_agg(c.id order by c.attempt desc, c.id desc))[1] as last_call_id,
        (array_agg(c.arm order by c.attempt desc, c.id desc))[1] as arm
      from calls c left join call_analyses ca on ca.call_id = c.id
      where c.run_target_id = rt.id
    ) s on true
    left join lateral (
      select ca.status, ca.summary, ca.goal_met, ca.sentiment, ca.callback_at, ca.agreed_value_minor, ca.fields
      from calls c join call_analyses ca on ca.call_id = c.id
      where c.run_target_id = rt.id
      order by c.attempt desc
      limit 1
    ) a on true
    left join lateral (
      select ap.late_outcome, ap.effect, coalesce(ap.approved_value_minor, ap.proposed_value_minor) as value_minor
      from calls c join approvals ap on ap.call_id = c.id
      where c.run_target_id = rt.id and ap.late_outcome is not null
      order by ap.decided_at desc, ap.id desc
      limit 1
    ) late on true
    order by rt.target_id`
