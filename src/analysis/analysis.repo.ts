// SQL for post-call analysis, the only writer of call_analyses: queueing answered calls (in their hangup
// transaction, or by the repair sweep), claiming rows by lease (SKIP LOCKED), storing a result at most
// once, scheduling a retry or recording the failure, and reading a call's row.

import type { Sql, Tx } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"
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

/** Which calls get a pending row: answered, ended, not erased, of a rule book that does not turn analysis off. */
const enqueueable = (sql: Sql | Tx) => sql`
  c.answered_at is not null and c.status = 'ended'
    -- an erased contact's call (its erase deleted its analysis: deleteCallAnalyses) is not analysed again
    and c.phone_e164 not like 'erased:%'
    and coalesce(rb.body -> 'analysis' ->> 'enabled', 'true') <> 'false'`

/**
 * A pending row for each of `callIds` that was answered (the others never connected: no analysis),
 * inside the transaction that ends the calls (src/calls/calls.repo.ts finishAttempt(s)), so an ended
 * call and its place in the queue commit together and no sweep has to look for it. The rule book is
 * the run's version, else the workflow's current one.
 */
export const enqueueCalls = async (tx: Tx, callIds: readonly number[]): Promise<void> => {
  if (callIds.length === 0) return
  await tx`
    insert into call_analyses (call_id, tenant_id, run_id, rule_book_id, status, next_attempt_at)
    select c.id, c.tenant_id, c.run_id, rb.id, 'pending', now()
    from calls c
    join runs r on r.id = c.run_id
    join workflows w on w.id = c.workflow_id
    left join rule_books rb on rb.id = coalesce(r.rule_book_id, w.rule_book_id)
    where c.id = any(${callIds as number[]}::bigint[]) and ${enqueueable(tx)}
    on conflict (call_id) do nothing`
}

/**
 * Where the repair sweep stands: the last call it looked at, in (ended_at, id) order. ended_at is
 * Postgres's text, sent back as text (a timestamptz parameter goes through a JS Date, which would
 * drop the microseconds and send the sweep round the same calls again).
 */
export interface SweepMark {
  readonly endedAt: string
  readonly callId: number
}

/**
 * The repair sweep's step (runtime/workers/analysis-worker.ts): the next `limit` answered calls after `from`
 * by when they ended (one range of calls_answered_ended_idx), and a pending row for each lacking
 * one — a call ended by a process that did not enqueue it in its hangup transaction (an older
 * version during an upgrade). Returns how many were looked at and added, and where to go on from
 * (undefined: nothing after `from`).
 */
export const enqueueMissing = async (
  sql: Sql,
  from: SweepMark,
  limit: number,
): Promise<{ scanned: number; added: number; next: SweepMark | undefined }> => {
  const [row] = await sql<[{ scanned: number; added: number; ended_at: string | null; id: number | null }]>`
    with page as (
      select c.id, c.ended_at from calls c
      where c.answered_at is not null and c.ended_at >= ${from.endedAt}::text::timestamptz
        and (c.ended_at, c.id) > (${from.endedAt}::text::timestamptz, ${from.callId}::bigint)
      order by c.ended_at, c.id
      limit ${limit}
    ), added as (
      insert into call_analyses (call_id, tenant_id, run_id, rule_book_id, status, next_attempt_at)
      select c.id, c.tenant_id, c.run_id, rb.id, 'pending', now()
      from page p
      join calls c on c.id = p.id
      join runs r on r.id = c.run_id
      join workflows w on w.id = c.workflow_id
      left join rule_books rb on rb.id = coalesce(r.rule_book_id, w.rule_book_id)
      where ${enqueueable(sql)} and not exists (select 1 from call_analyses a where a.call_id = c.id)
      on conflict (call_id) do nothing
      returning call_id
    ), last as (select id, ended_at from page order by ended_at desc, id desc limit 1)
    select (select count(*) from page)::int as scanned, (select count(*) from added)::int as added,
      (select ended_at::text from last) as ended_at, (select id from last) as id`
  return {
    scanned: row.scanned,
    added: row.added,
    next: row.ended_at === null || row.id === null ? undefined : { endedAt: row.ended_at, callId: Number(row.id) },
  }
}

/** enqueueMissing from `since` to the present, `limit` calls at a time; returns how many rows were added. */
export const enqueueEnded = async (sql: Sql, since: Date, limit: number): Promise<number> => {
  let from: SweepMark | undefined = { endedAt: since.toISOString(), callId: 0 }
  let added = 0
  while (from !== undefined) {
    const step = await enqueueMissing(sql, from, limit)
    added += step.added
    from = step.scanned < limit ? undefined : step.next
  }
  return added
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
  readonly currency: Currency
  readonly run_id: number
  readonly phone_e164: string
  readonly outcome: string | null
  readonly connected_seconds: number | null
  readonly ended_at: Date
  readonly callee_name: string | null
  readonly rule_book: Record<string, unknown> | null
  /** A rehearsal (simulation campaign) or the public demo: its calls cost nobody anything. */
  readonly free: boolean
  /** A simulation campaign's call: a rehearsal, which sends no outbound event (as calls.repo.ts's call events). */
  readonly simulation: boolean
  /** What was said (system lines left out), oldest first, at most `turns` lines of 2,000 characters. */
  readonly transcript: ReadonlyArray<{ speaker: string; text: string }>
  /** The latest approved concession's value: what a human agreed, not what a model read. */
  readonly concession_minor: number | null
  /**
   * When the callee is called back, as the runtime scheduled it: the retry the call's end wrote to
   * the decision log (callback_scheduled), else — for a callback approved after the call ended —
   * the target's next attempt as the approval set it, while no later attempt has been made. Null
   * when no callback was scheduled (none approved, or the target was out of attempts).
   */
  readonly callback_at: Date | null
}

/**
 * What analysing each of `callIds` needs, in one statement (calls that no longer exist, or whose
 * contact was erased, are absent).
 */
export const loadCallWork = async (sql: Sql, callIds: readonly number[], turns: number): Promise<CallWork[]> => {
  const rows = await sql<(Omit<CallWork, "callback_at"> & { callback_at: Date | string | null })[]>`
    select c.id as call_id, c.tenant_id, tn.currency, c.run_id, c.phone_e164, c.outcome, c.connected_seconds,
      c.ended_at, t.name as callee_name, rb.body as rule_book,
      w.kind in ('rehearsal', 'demo') as free, w.kind = 'rehearsal' as simulation,
      coalesce((
        select json_agg(json_build_object('speaker', x.speaker, 'text', x.text) order by x.turn_index)
        from (select speaker, left(text, 2000) as text, turn_index from turns
          where call_id = c.id and speaker <> 'system' order by turn_index limit ${turns}) x
      ), '[]'::json) as transcript,
      -- the amount approved; one decided after the call counts unless it left the result unchanged
      (select coalesce(approved_value_minor, proposed_value_minor) from approvals
        where call_id = c.id and status = 'approved' and proposed_action = 'concession'
          and late_outcome is distinct from 'unchanged'
        order by decided_at desc, id desc limit 1) as concession_minor,
      coalesce(
        (select timestamptz 'epoch' + (d.detail ->> 'retry_at')::bigint * interval '1 millisecond'
          from dial_decisions d
          where d.run_id = c.run_id and d.target_id = c.target_id and d.call_id = c.id
            and d.decision = 'retry' and d.reason = 'callback_scheduled'
          order by d.id desc limit 1),
        (select rt.next_attempt_at from run_targets rt
          where rt.id = c.run_target_id and rt.status = 'waiting' and rt.outcome = 'callback_scheduled'
            and exists (select 1 from approvals ap where ap.call_id = c.id and ap.status = 'approved'
              and ap.proposed_action = 'callback')
            and not exists (select 1 from calls later where later.run_id = c.run_id
              and later.run_target_id = c.run_target_id and later.attempt > c.attempt))
      ) as callback_at
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
  return rows.map((r) => ({ ...r, callback_at: r.callback_at === null ? null : new Date(r.callback_at) }))
}

export interface DoneAnalysis {
  readonly callId: number
  readonly answer: AnalysisAnswer
  readonly callbackAt: Date | null
  readonly agreedValueMinor: number | null
  readonly model: string
  readonly modelVersion: string | null
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

/**
 * A callback approved after its call's analysis was stored: the analysis learns when the callee will
 * be called back (before it is stored, loadCallWork reads it from the target's next attempt).
 */
export const fillCallbackAt = (sql: Sql | Tx, callId: number, at: Date) =>
  sql`
    update call_analyses set callback_at = ${at}
    where call_id = ${callId} and status = 'done' and callback_at is null`

/**
 * A concession approved after its call ended (the call had ended owing the decision): the stored
 * analysis records the agreed value (before it is stored, loadCallWork reads it from the approval).
 */
export const fillAgreedValue = (tx: Tx, callId: number, valueMinor: number) =>
  tx`
    update call_analyses set agreed_value_minor = ${valueMinor}
    where call_id = ${callId} and status = 'done'`

/** The workspace's analysis of a call; undefined for another workspace's call or one with no row. */
export const findAnalysis = async (sql: Sql, tenantId: number, callId: number): Promise<AnalysisRow | undefined> => {
  const [row] = await sql<[AnalysisRow?]>`
    select * from call_analyses where call_id = ${callId} and tenant_id = ${tenantId}`
  return row
}

/**
 * A data-subject erase (src/dsr/): the analyses of the contact's calls are what they said, summarised and
 * extracted, so they go with the transcript (the worker then claims nothing of theirs: an attempt in
 * flight stores nothing, as its conditional update finds no row, and the sweep does not enqueue a call
 * whose phone is erased). The rows deleted.
 */
export const deleteCallAnalyses = async (tx: Tx, tenantId: number, callIds: readonly number[]): Promise<number> =>
  (
    await tx`
    delete from call_analyses where tenant_id = ${tenantId} and call_id = any(${tx.array([...callIds])}::bigint[])`
  ).count
