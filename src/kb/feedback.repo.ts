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

export async function findReviewersFeedback(
  sql: Q,
  tenantId: number,
  turnId: number,
  reviewer: string,
): Promise<FeedbackRow | undefined> {
  const [row] = await sql<FeedbackRow[]>`
    select ${FEEDBACK_COLUMNS(sql)} from kb_feedback
    where tenant_id = ${tenantId} and turn_id = ${turnId} and reviewer = ${reviewer}`
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

export async function insertFeedback(tx: Tx, tenantId: number, f: NewFeedback, now: Date): Promise<FeedbackRow> {
  const [row] = await tx<FeedbackRow[]>`
    insert into kb_feedback (tenant_id, turn_id, run_id, workflow_id, reviewer, verdict, note, line, line_key,
      created_at, updated_at)
    values (${tenantId}, ${f.turn_id}, ${f.run_id}, ${f.workflow_id}, ${f.reviewer}, ${f.verdict}, ${f.note},
      ${f.line}, ${f.line_key}, ${now}, ${now})
    returning ${FEEDBACK_COLUMNS(tx)}`
  return row!
}

/** A reviewer's new verdict on a turn they judged before: the same row, its verdict and note replaced. */
export async function replaceFeedback(
  tx: Tx,
  tenantId: number,
  id: number,
  f: Pick<NewFeedback, "verdict" | "note" | "line" | "line_key">,
  now: Date,
): Promise<FeedbackRow> {
  const [row] = await tx<FeedbackRow[]>`
    update kb_feedback set verdict = ${f.verdict}, note = ${f.note}, line = ${f.line}, line_key = ${f.line_key},
      updated_at = ${now}
    where tenant_id = ${tenantId} and id = ${id}
    returning ${FEEDBACK_COLUMNS(tx)}`
  return row!
}

/** Every verdict on one line of a workflow as it stands, newest first. */
export async function verdictsOnLine(sql: Q, tenantId: number, workflowId: number, key: string): Promise<Peer[]> {
  const rows = await sql<Peer[]>`
    select id, verdict, note from kb_feedback
    where tenant_id = ${tenantId} and workflow_id = ${workflowId} and line_key = ${key}
    order by updated_at desc, id desc`
  return [...rows]
}

export async function isLinked(sql: Q, ruleId: number, feedbackId: number): Promise<boolean> {
  const [row] = await sql<[{ linked: boolean }]>`
    select exists (select 1 from kb_rule_feedback where rule_id = ${ruleId} and feedback_id = ${feedbackId}) as linked`
  return row!.linked
}

export async function linkFeedback(tx: Tx, ruleId: number, feedbackIds: ReadonlyArray<number>): Promise<void> {
  if (feedbackIds.length === 0) return
  await tx`
    insert into kb_rule_feedback (rule_id, feedback_id)
    select ${ruleId}, f from unnest(${tx.array(feedbackIds as number[], 20)}::bigint[]) as x(f)
    on conflict do nothing`
}

/** Takes a verdict off the rules learnt from verdicts of another kind (the rules stay); their ids. */
export async function unlinkFromOtherKinds(tx: Tx, feedbackId: number, kind: Verdict): Promise<number[]> {
  const rows = await tx<Array<{ rule_id: number }>>`
    delete from kb_rule_feedback l using kb_rules r
    where l.feedback_id = ${feedbackId} and r.id = l.rule_id and r.learnt_kind is distinct from ${kind}
    returning l.rule_id`
  return rows.map((r) => r.rule_id)
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

/** The tenant's verdicts, newest first. */
export async function listFeedback(sql: Q, tenantId: number, f: FeedbackFilter): Promise<FeedbackRow[]> {
  const rows = await sql<FeedbackRow[]>`
    select ${FEEDBACK_COLUMNS(sql)} from kb_feedback
    where tenant_id = ${tenantId}
      ${f.turnId === undefined ? sql`` : sql`and turn_id = ${f.turnId}`}
      ${f.verdict === undefined ? sql`` : sql`and verdict = ${f.verdict}`}
    order by id desc
    limit ${f.limit}`
  return [...rows]
}
