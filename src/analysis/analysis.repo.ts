// SQL for post-call analysis, the only writer of call_analyses: enqueueing ended, answered calls,
// claiming due rows by lease (SKIP LOCKED), storing a result at most once (a conditional update from
// pending by the lease holder), scheduling a retry or recording the failure, and reading a call's row.
import type { Sql, Tx } from "../platform/Db.js"
import type { AnalysisAnswer } from "./analysis.schema.js"

export interface AnalysisRow {
  readonly call_id: number
  readonly tenant_id: number
  readonly run_id: number | null
  readonly rule_book_id: number | null
  readonly status: "pending" | "done" | "failed"
  readonly attempts: number
  readonly next_attempt_at: Date | null
  readonly summary: string | null
  readonly goal_met: boolean | null
  readonly sentiment: "positive" | "neutral" | "negative" | null
  readonly callback_at: Date | null
  readonly agreed_value_minor: number | null
  readonly fields: Record<string, unknown>
  readonly model: string | null
  readonly model_version: string | null
  readonly error: string | null
  readonly charged_minor: number | null
  readonly analyzed_at: Date | null
  readonly created_at: Date
}

/**
 * A pending row for each call that ended at or after `since` having been answered, lacking one, of a
 * workflow whose rule book (the run's version, else the workflow's current one) does not turn
 * analysis off. Reads the recent end of calls_answered_ended_idx only. Returns how many were added.
 */
export const enqueueEnded = async (sql: Sql, since: Date, limit: number): Promise<number> => {
  const rows = await sql`
    insert into call_analyses (call_id, tenant_id, run_id, rule_book_id, status, next_attempt_at)
    select c.id, c.tenant_id, c.run_id, rb.id, 'pending', now()
    from calls c
    join runs r on r.id = c.run_id
    join workflows w on w.id = c.workflow_id
    left join rule_books rb on rb.id = coalesce(r.rule_book_id, w.rule_book_id)
    where c.answered_at is not null and c.ended_at >= ${since} and c.status = 'ended'
      and not exists (select 1 from call_analyses a where a.call_id = c.id)
      -- an erased contact's call (src/dsr/erase.repo.ts deleted its analysis) is not analysed again
      and c.phone_e164 not like 'erased:%'
      and coalesce(rb.body -> 'analysis' ->> 'enabled', 'true') <> 'false'
    order by c.ended_at
    limit ${limit}
    on conflict (call_id) do nothing
    returning call_id`
  return rows.length
}

export interface Claimed {
  readonly call_id: number
  readonly tenant_id: number
  /** This attempt's number, counting from 1. */
  readonly attempts: number
}

/**
 * Takes up to `limit` due pending rows for `me` until `leaseMs` from now: each claim counts one
 * attempt. A row another process holds (an unexpired lease, or locked right now) is skipped.
 */
export const claimDue = (sql: Sql, me: string, leaseMs: number, limit: number): Promise<Claimed[]> =>
  sql<Claimed[]>`
    update call_analyses a set locked_by = ${me}, locked_until = now() + ${leaseMs} * interval '1 millisecond',
      attempts = a.attempts + 1
    where a.call_id in (
      select call_id from call_analyses
      where status = 'pending' and next_attempt_at <= now() and (locked_until is null or locked_until < now())
      order by next_attempt_at
      limit ${limit}
      for update skip locked)
    returning a.call_id, a.tenant_id, a.attempts`

export interface CallWork {
  readonly call_id: number
  readonly tenant_id: number
  readonly currency: "INR" | "USD"
  readonly run_id: number
  readonly phone_e164: string
  readonly outcome: string | null
  readonly connected_seconds: number | null
  readonly ended_at: Date
  readonly callee_name: string | null
  readonly rule_book: Record<string, unknown> | null
  /** A rehearsal (simulation campaign) or the public demo: its calls cost nobody anything. */
  readonly free: boolean
  /** What was said (system lines left out), oldest first, at most `turns` lines of 2,000 characters. */
  readonly transcript: ReadonlyArray<{ speaker: string; text: string }>
  /** The latest approved concession's value: what a human agreed, not what a model read. */
  readonly concession_minor: number | null
  /** When the latest approved callback was approved. */
  readonly callback_decided_at: Date | null
}

/**
 * What analysing each of `callIds` needs, in one statement (calls that no longer exist, or whose
 * contact was erased, are absent).
 */
export const loadCallWork = async (sql: Sql, callIds: readonly number[], turns: number): Promise<CallWork[]> => {
  const rows = await sql<(Omit<CallWork, "callback_decided_at"> & { callback_decided_at: Date | string | null })[]>`
    select c.id as call_id, c.tenant_id, tn.currency, c.run_id, c.phone_e164, c.outcome, c.connected_seconds,
      c.ended_at, t.name as callee_name, rb.body as rule_book,
      (w.simulation_of is not null or exists (select 1 from demo_workspace d where d.tenant_id = c.tenant_id)) as free,
      coalesce((
        select json_agg(json_build_object('speaker', x.speaker, 'text', x.text) order by x.turn_index)
        from (select speaker, left(text, 2000) as text, turn_index from turns
          where call_id = c.id and speaker <> 'system' order by turn_index limit ${turns}) x
      ), '[]'::json) as transcript,
      (select proposed_value_minor from approvals
        where call_id = c.id and status = 'approved' and proposed_action = 'concession'
        order by decided_at desc, id desc limit 1) as concession_minor,
      (select decided_at from approvals
        where call_id = c.id and status = 'approved' and proposed_action = 'callback'
        order by decided_at desc, id desc limit 1) as callback_decided_at
    from calls c
    join tenants tn on tn.id = c.tenant_id
    join runs r on r.id = c.run_id
    join workflows w on w.id = c.workflow_id
    left join rule_books rb on rb.id = coalesce(r.rule_book_id, w.rule_book_id)
    left join audience_targets t on t.id = c.target_id
    where c.id = any(${callIds as number[]}::bigint[])
      -- an erased contact's call is absent (its row then fails): a row enqueued while the erase ran is
      -- not analysed from what is left of it, nor charged
      and c.phone_e164 not like 'erased:%'`
  return rows.map((r) => ({
    ...r,
    callback_decided_at: r.callback_decided_at === null ? null : new Date(r.callback_decided_at),
  }))
}

export interface DoneAnalysis {
  readonly callId: number
  readonly answer: AnalysisAnswer
  readonly callbackAt: Date | null
  readonly agreedValueMinor: number | null
  readonly model: string
  readonly modelVersion: string
  readonly chargedMinor: number | null
}

/**
 * Stores results, each once: only pending rows `me` holds change (another process may have taken one
 * over after its lease ran out, or stored it already); returns the rows stored. One statement for the
 * group, inside the caller's transaction, so the charges and the events commit with them or not at all.
 */
export const markDone = async (tx: Tx, me: string, done: readonly DoneAnalysis[]): Promise<AnalysisRow[]> => {
  if (done.length === 0) return []
  const rows = done.map((d) => ({
    call_id: d.callId,
    summary: d.answer.summary,
    goal_met: d.answer.goal_met,
    sentiment: d.answer.sentiment,
    fields: d.answer.fields,
    callback_at: d.callbackAt?.toISOString() ?? null,
    agreed: d.agreedValueMinor,
    model: d.model,
    model_version: d.modelVersion,
    charged: d.chargedMinor,
  }))
  return tx<AnalysisRow[]>`
    update call_analyses a set status = 'done', summary = u.summary, goal_met = u.goal_met, sentiment = u.sentiment,
      fields = u.fields, callback_at = u.callback_at, agreed_value_minor = u.agreed, model = u.model,
      model_version = u.model_version, charged_minor = u.charged, error = null, analyzed_at = now(),
      locked_until = null, locked_by = null, next_attempt_at = null
    from jsonb_to_recordset(${tx.json(rows as never)}::jsonb) as u(call_id bigint, summary text, goal_met boolean,
      sentiment text, fields jsonb, callback_at timestamptz, agreed bigint, model text, model_version text,
      charged bigint)
    where a.call_id = u.call_id and a.status = 'pending' and a.locked_by = ${me}
    returning a.*`
}

/** This attempt failed: due again at `retryAt`, or failed for good when null. The error stays visible. */
export const markAttemptFailed = (sql: Sql, callId: number, me: string, error: string, retryAt: Date | null) =>
  sql`
    update call_analyses set error = ${error.slice(0, 1000)}, locked_until = null, locked_by = null,
      status = ${retryAt === null ? "failed" : "pending"}, next_attempt_at = ${retryAt}
    where call_id = ${callId} and status = 'pending' and locked_by = ${me}`

/** The workspace's analysis of a call; undefined for another workspace's call or one with no row. */
export const findAnalysis = async (sql: Sql, tenantId: number, callId: number): Promise<AnalysisRow | undefined> => {
  const [row] = await sql<[AnalysisRow?]>`
    select * from call_analyses where call_id = ${callId} and tenant_id = ${tenantId}`
  return row
}
