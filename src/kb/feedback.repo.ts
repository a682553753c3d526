// SQL of supervisors' verdicts on the agent's turns: the turn a verdict is about (with what its call
// was filled with), the verdicts themselves and their links to the rules learnt from them.
// The only writer of kb_feedback and kb_rule_feedback (rules and events: kb.repo.ts).
import type { Sql, Tx } from "../platform/Db.js"
import type { Handler, Peer, Verdict } from "./learning.js"

type Q = Sql | Tx

export interface FeedbackRow {
  readonly id: number
  readonly turn_id: number
  readonly run_id: number
  readonly workflow_id: number
  /** 'user:<id>' or 'key:<id>'. */
  readonly reviewer: string
  readonly verdict: Verdict
  readonly note: string | null
  readonly line: string
  readonly line_key: string
  readonly created_at: Date
  readonly updated_at: Date
  /** Whether this is still its reviewer's latest verdict on the line: the one learning counts. */
  readonly current: boolean
}

const FEEDBACK_COLUMNS = (sql: Q) =>
  sql`id, turn_id, run_id, workflow_id, reviewer, verdict, note, line, line_key, created_at, updated_at`

/** One of the tenant's turns with what learning needs about its call. */
export interface TurnContext {
  readonly id: number
  readonly run_id: number
  readonly workflow_id: number
  readonly target_id: number
  readonly call_id: number | null
  readonly seq: number
  readonly speaker: "agent" | "callee" | "system"
  readonly text: string
  /** The callee's name as the call used it (the audience row). */
  readonly callee_name: string | null
  /** The workspace's name: the call's {company}. */
  readonly company: string
  /** The persona of the rule book the run used (its voice names the agent). */
  readonly persona: string | null
  readonly handlers: ReadonlyArray<Handler> | null
}

export async function turnContext(sql: Q, tenantId: number, turnId: number): Promise<TurnContext | undefined> {
  const [row] = await sql<TurnContext[]>`
    select t.id, t.run_id, r.workflow_id, t.target_id, t.call_id, t.seq, t.speaker, t.text,
           a.name as callee_name, tn.name as company, rb.body ->> 'persona' as persona,
           rb.body -> 'objection_handlers' as handlers
    from turns t
    join runs r on r.id = t.run_id
    join workflows w on w.id = r.workflow_id
    join tenants tn on tn.id = t.tenant_id
    left join audience_targets a on a.id = t.target_id and a.tenant_id = t.tenant_id
    left join rule_books rb on rb.id = coalesce(r.rule_book_id, w.rule_book_id)
    where t.id = ${turnId} and t.tenant_id = ${tenantId}`
  return row
}

/** What the callee said last before `turn`, in the same call (or the same target's turns without one). */
export async function calleeTurnBefore(sql: Q, turn: TurnContext): Promise<string | null> {
  const [row] = await sql<[{ text: string }?]>`
    select text from turns
    where run_id = ${turn.run_id} and target_id = ${turn.target_id} and call_id is not distinct from ${turn.call_id}
      and speaker = 'callee' and seq < ${turn.seq}
    order by seq desc limit 1`
  return row?.text ?? null
}

/** Serialises verdicts on one line of one workflow, so two never both make its rule. */
export async function lockLine(tx: Tx, tenantId: number, workflowId: number, key: string): Promise<void> {
  await tx`select pg_advisory_xact_lock(hashtextextended(${`kb:${tenantId}:${workflowId}:${key}`}, 0))`
}

/** The reviewer's latest verdict on one line of a workflow (the one that stands until their next). */
export async function findStanding(
  sql: Q,
  tenantId: number,
  workflowId: number,
  key: string,
  reviewer: string,
): Promise<Pick<FeedbackRow, "id" | "verdict"> | undefined> {
  const [row] = await sql<Array<Pick<FeedbackRow, "id" | "verdict">>>`
    select id, verdict from kb_feedback
    where tenant_id = ${tenantId} and workflow_id = ${workflowId} and line_key = ${key} and reviewer = ${reviewer}
    order by id desc limit 1`
  return row
}

export interface NewFeedback {
  readonly turn_id: number
  readonly run_id: number
  readonly workflow_id: number
  readonly reviewer: string
  readonly verdict: Verdict
  readonly note: string | null
  readonly line: string
  readonly line_key: string
}

/** A new verdict: every verdict is a row of its own, never changed afterwards. */
export async function insertFeedback(tx: Tx, tenantId: number, f: NewFeedback, now: Date): Promise<FeedbackRow> {
  const [row] = await tx<FeedbackRow[]>`
    insert into kb_feedback (tenant_id, turn_id, run_id, workflow_id, reviewer, verdict, note, line, line_key,
      created_at, updated_at)
    values (${tenantId}, ${f.turn_id}, ${f.run_id}, ${f.workflow_id}, ${f.reviewer}, ${f.verdict}, ${f.note},
      ${f.line}, ${f.line_key}, ${now}, ${now})
    returning ${FEEDBACK_COLUMNS(tx)}, true as current`
  return row!
}

/**
 * Each reviewer's latest verdict on one line of a workflow (ids grow in the order verdicts on a line
 * are given: they are written under the line's lock), newest first.
 */
export async function standingOnLine(sql: Q, tenantId: number, workflowId: number, key: string): Promise<Peer[]> {
  const rows = await sql<Peer[]>`
    select id, verdict, note from (
      select distinct on (reviewer) id, verdict, note from kb_feedback
      where tenant_id = ${tenantId} and workflow_id = ${workflowId} and line_key = ${key}
      order by reviewer, id desc
    ) s
    order by id desc`
  return [...rows]
}

export async function linkFeedback(tx: Tx, ruleId: number, feedbackIds: ReadonlyArray<number>): Promise<void> {
  if (feedbackIds.length === 0) return
  await tx`
    insert into kb_rule_feedback (rule_id, feedback_id)
    select ${ruleId}, f from unnest(${tx.array(feedbackIds as number[], 20)}::bigint[]) as x(f)
    on conflict do nothing`
}

/**
 * Takes the reviewer's verdicts on the line before `latestId` off every rule (the rules stay): a
 * rule links the verdicts that stand, and the latest now stands in for them.
 */
export async function unlinkSuperseded(
  tx: Tx,
  tenantId: number,
  workflowId: number,
  key: string,
  reviewer: string,
  latestId: number,
): Promise<void> {
  await tx`
    delete from kb_rule_feedback l using kb_feedback f
    where l.feedback_id = f.id and f.tenant_id = ${tenantId} and f.workflow_id = ${workflowId}
      and f.line_key = ${key} and f.reviewer = ${reviewer} and f.id < ${latestId}`
}

/** The rules each of these verdicts is linked to, by feedback id. */
export async function ruleIdsOf(sql: Q, feedbackIds: ReadonlyArray<number>): Promise<Map<number, number[]>> {
  const out = new Map<number, number[]>()
  if (feedbackIds.length === 0) return out
  const rows = await sql<Array<{ rule_id: number; feedback_id: number }>>`
    select rule_id, feedback_id from kb_rule_feedback
    where feedback_id = any(${sql.array(feedbackIds as number[], 20)}::bigint[])
    order by feedback_id, rule_id`
  for (const r of rows) {
    const ids = out.get(r.feedback_id)
    if (ids === undefined) out.set(r.feedback_id, [r.rule_id])
    else ids.push(r.rule_id)
  }
  return out
}

export interface FeedbackFilter {
  readonly turnId?: number | undefined
  readonly verdict?: Verdict | undefined
  readonly limit: number
}

/** The tenant's verdicts, every one given, newest first. */
export async function listFeedback(sql: Q, tenantId: number, f: FeedbackFilter): Promise<FeedbackRow[]> {
  const rows = await sql<FeedbackRow[]>`
    select ${FEEDBACK_COLUMNS(sql)},
      not exists (
        select 1 from kb_feedback n
        where n.tenant_id = f.tenant_id and n.workflow_id = f.workflow_id and n.line_key = f.line_key
          and n.reviewer = f.reviewer and n.id > f.id
      ) as current
    from kb_feedback f
    where tenant_id = ${tenantId}
      ${f.turnId === undefined ? sql`` : sql`and turn_id = ${f.turnId}`}
      ${f.verdict === undefined ? sql`` : sql`and verdict = ${f.verdict}`}
    order by id desc
    limit ${f.limit}`
  return [...rows]
}

/** A data-subject erase (src/dsr/): the verdicts on the contact's turns go, with their links to rules. */
export async function deleteFeedbackOnTurns(
  tx: Tx,
  tenantId: number,
  turnIds: readonly number[],
): Promise<{ kb_rule_feedback: number; kb_feedback: number }> {
  const links = await tx`
    delete from kb_rule_feedback where feedback_id in
      (select id from kb_feedback where tenant_id = ${tenantId} and turn_id = any(${tx.array([...turnIds])}::bigint[]))`
  const verdicts = await tx`
    delete from kb_feedback where tenant_id = ${tenantId} and turn_id = any(${tx.array([...turnIds])}::bigint[])`
  return { kb_rule_feedback: links.count, kb_feedback: verdicts.count }
}
