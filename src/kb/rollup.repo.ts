// SQL of the feedback rollup (GET /kb/rollup): verdict counts, the most-flagged turns and the rules
// learnt from feedback, over a window and optionally one workflow. Read-only.
import type { Sql } from "../platform/Db.js"
import type { RuleRow } from "./kb.repo.js"

export interface RollupScope {
  readonly tenantId: number
  readonly workflowId: number | undefined
  readonly since: Date
}

const ofWorkflow = (sql: Sql, alias: string, workflowId: number | undefined) =>
  workflowId === undefined ? sql`` : sql`and ${sql(alias)}.workflow_id = ${workflowId}`

/** Whether the workflow is the tenant's (deleted or not: its feedback is still on record). */
export async function isTenantsWorkflow(sql: Sql, tenantId: number, workflowId: number): Promise<boolean> {
  const [row] = await sql<[{ found: boolean }]>`
    select exists (select 1 from workflows where tenant_id = ${tenantId} and id = ${workflowId}) as found`
  return row!.found
}

export interface Counts {
  readonly reward: number
  readonly punish: number
  readonly ban: number
  /** Verdicts linked to a rule (a rule links its reviewers' standing verdicts, not the ones they replaced). */
  readonly promoted: number
}

export async function verdictCounts(sql: Sql, s: RollupScope): Promise<Counts> {
  const [row] = await sql<[Counts]>`
    select count(*) filter (where f.verdict = 'reward')::int as reward,
           count(*) filter (where f.verdict = 'punish')::int as punish,
           count(*) filter (where f.verdict = 'ban')::int as ban,
           count(*) filter (where exists (select 1 from kb_rule_feedback l where l.feedback_id = f.id))::int as promoted
    from kb_feedback f
    where f.tenant_id = ${s.tenantId} and f.created_at >= ${s.since} ${ofWorkflow(sql, "f", s.workflowId)}`
  return row!
}

export interface TopTurnRow {
  readonly turn_id: number
  readonly text: string
  readonly reward: number
  readonly punish: number
  readonly ban: number
  readonly total: number
}

/** The turns with the most verdicts, then the most recently judged. */
export async function topTurns(sql: Sql, s: RollupScope, limit: number): Promise<TopTurnRow[]> {
  const rows = await sql<TopTurnRow[]>`
    select f.turn_id, t.text,
           count(*) filter (where f.verdict = 'reward')::int as reward,
           count(*) filter (where f.verdict = 'punish')::int as punish,
           count(*) filter (where f.verdict = 'ban')::int as ban,
           count(*)::int as total
    from kb_feedback f join turns t on t.id = f.turn_id
    where f.tenant_id = ${s.tenantId} and f.created_at >= ${s.since} ${ofWorkflow(sql, "f", s.workflowId)}
    group by f.turn_id, t.text
    order by total desc, max(f.created_at) desc, max(f.id) desc
    limit ${limit}`
  return [...rows]
}

export interface LearntRuleRow extends RuleRow {
  readonly feedback_count: number
}

/** Rules learnt from feedback in the window, newest first, with how many verdicts each links. */
export async function rulesFromFeedback(sql: Sql, s: RollupScope, limit: number): Promise<LearntRuleRow[]> {
  const rows = await sql<LearntRuleRow[]>`
    select r.id, r.tenant_id, r.workflow_id, r.bucket, r.title, r.body, r.trigger, r.priority, r.status,
           r.source_kind, r.learnt_line, r.learnt_kind, r.created_at, r.updated_at,
           (select count(*) from kb_rule_feedback l where l.rule_id = r.id)::int as feedback_count
    from kb_rules r
    where r.tenant_id = ${s.tenantId} and r.source_kind = 'feedback' and r.created_at >= ${s.since}
      ${ofWorkflow(sql, "r", s.workflowId)}
    order by r.created_at desc, r.id desc
    limit ${limit}`
  return [...rows]
}
