// SQL of experiments (migrations/0056): the experiment rows, and what each arm's calls came to.
import type { Sql, Tx } from "../platform/Db.js"

/** An arm as it is stored: `rule_book` holds only what it changes in the workflow's. */
export interface StoredArm {
  readonly name: string
  readonly weight: number
  readonly stopped_at: string | null
  /** A catalogue persona id (the rule book's `persona`): the agent's name and voice. */
  readonly persona: string | null
  /** One of the workspace's cloned voices (voice_avatars.id). */
  readonly voice: number | null
  readonly rule_book: Record<string, unknown> | null
}

export interface ExperimentRow {
  readonly id: number
  readonly tenant_id: number
  readonly workflow_id: number
  readonly name: string
  readonly seed: number
  readonly status: "running" | "ended"
  readonly arms: StoredArm[]
  readonly promoted_arm: string | null
  readonly promoted_rule_book_id: number | null
  readonly rehearses: number | null
  readonly created_at: Date
  readonly ended_at: Date | null
}

const COLUMNS = (sql: Sql | Tx) =>
  sql`id::int, tenant_id::int, workflow_id::int, name, seed::float8 as seed, status, arms, promoted_arm,
    promoted_rule_book_id::int, rehearses::int, created_at, ended_at`

export const insertExperiment = async (
  tx: Tx,
  e: {
    tenantId: number
    workflowId: number
    name: string
    seed: number
    arms: readonly StoredArm[]
    userId: number | null
    rehearses?: number | undefined
  },
): Promise<ExperimentRow> => {
  const [row] = await tx<[ExperimentRow]>`
    insert into experiments (tenant_id, workflow_id, name, seed, arms, rehearses, created_by_user_id)
    values (${e.tenantId}, ${e.workflowId}, ${e.name}, ${e.seed}, ${tx.json(e.arms as never)},
      ${e.rehearses ?? null}, ${e.userId})
    returning ${COLUMNS(tx)}`
  return row
}

/** The workflow's running experiment, if any (row-locked in a transaction that asks). */
export const runningExperiment = async (sql: Sql | Tx, workflowId: number): Promise<ExperimentRow | undefined> => {
  const [row] = await sql<[ExperimentRow?]>`
    select ${COLUMNS(sql)} from experiments where workflow_id = ${workflowId} and status = 'running'`
  return row
}

export const findExperiment = async (
  sql: Sql | Tx,
  tenantId: number,
  workflowId: number,
  id: number,
  opts: { lock?: boolean } = {},
): Promise<ExperimentRow | undefined> => {
  const [row] = await sql<[ExperimentRow?]>`
    select ${COLUMNS(sql)} from experiments
    where id = ${id} and workflow_id = ${workflowId} and tenant_id = ${tenantId}
    ${opts.lock === true ? sql`for update` : sql``}`
  return row
}

/** A workflow's experiments, newest first (a workflow has few: one running at a time). */
export const listExperiments = (sql: Sql | Tx, tenantId: number, workflowId: number, limit: number) =>
  sql<ExperimentRow[]>`
    select ${COLUMNS(sql)} from experiments where workflow_id = ${workflowId} and tenant_id = ${tenantId}
    order by id desc limit ${limit}`

export const updateArms = async (tx: Tx, id: number, arms: readonly StoredArm[]): Promise<void> => {
  await tx`update experiments set arms = ${tx.json(arms as never)} where id = ${id}`
}

export const endExperiment = async (
  tx: Tx,
  id: number,
  promoted?: { arm: string; ruleBookId: number },
): Promise<void> => {
  await tx`
    update experiments set status = 'ended', ended_at = coalesce(ended_at, now()),
      promoted_arm = ${promoted?.arm ?? null}, promoted_rule_book_id = ${promoted?.ruleBookId ?? null}
    where id = ${id}`
}

/** What one arm's targets came to: each target counted once, whatever its attempts. */
export interface ArmTotalsRow {
  readonly arm: string
  readonly targets: number
  readonly calls: number
  readonly connects: number
  readonly agreed: number
  /** connected targets whose analysis is in */
  readonly analysed: number
  readonly goal_met: number
  readonly opted_out: number
  readonly talk_seconds: number
  readonly approvals_asked: number
  readonly approvals_granted: number
  readonly cost_minor: number
}

/**
 * Per arm: targets, calls, targets reached (an answered call), agreed (an agreed outcome), analysed and
 * goal met, opted out (`do_not_call`), seconds talked, approvals asked and granted, and what the calls
 * and their analyses cost. `agreedOutcomes` is the analytics' list, so both read agreement alike.
 */
export const armTotals = (sql: Sql | Tx, experimentId: number, agreedOutcomes: readonly string[]) =>
  sql<ArmTotalsRow[]>`
    with per_target as (
      select c.arm, c.target_id, count(*)::int as calls,
        bool_or(c.answered_at is not null) as connected,
        bool_or(c.outcome in ${sql(agreedOutcomes)}) as agreed,
        bool_or(ca.status = 'done') as analysed,
        bool_or(coalesce(ca.goal_met, false)) as goal_met,
        bool_or(c.outcome = 'do_not_call') as opted_out,
        coalesce(sum(c.connected_seconds), 0)::int as talk_seconds,
        coalesce(sum(c.cost_minor), 0)::bigint + coalesce(sum(ca.charged_minor), 0)::bigint as cost_minor
      from calls c left join call_analyses ca on ca.call_id = c.id
      where c.experiment_id = ${experimentId}
      group by c.arm, c.target_id
    ), approvals_of as (
      select c.arm, count(*)::int as asked, count(*) filter (where a.status = 'approved')::int as granted
      from calls c join approvals a on a.call_id = c.id
      where c.experiment_id = ${experimentId}
      group by c.arm
    )
    select t.arm, count(*)::int as targets, sum(t.calls)::int as calls,
      count(*) filter (where t.connected)::int as connects,
      count(*) filter (where t.connected and t.agreed)::int as agreed,
      count(*) filter (where t.connected and t.analysed)::int as analysed,
      count(*) filter (where t.connected and t.goal_met)::int as goal_met,
      count(*) filter (where t.connected and t.opted_out)::int as opted_out,
      sum(t.talk_seconds)::int as talk_seconds,
      coalesce(max(ap.asked), 0)::int as approvals_asked, coalesce(max(ap.granted), 0)::int as approvals_granted,
      sum(t.cost_minor)::float8 as cost_minor
    from per_target t left join approvals_of ap on ap.arm = t.arm
    group by t.arm`
