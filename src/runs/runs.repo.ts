// SQL on runs (migrations/0004, 0005): the only file that writes them, and their rows as a
// workflow's run list shows them (listRuns: live counters, outcomes, spend). As the api decides
// them: starting, resuming and pausing runs, every status change a conditional update under the
// workflow's row lock. As the runtime drives them: run leases (claim, renew, release), the run's
// setup, status and snapshot, written only while this process still owns the run, so a process
// that lost its lease changes nothing. And an approved callback that reschedules its target and
// opens a finished run again. Its targets are in run-targets.repo.ts; its turn seqs in run_turn_seqs
// (migrations/0029), written with the turns by src/turns/turns.repo.ts.

import { effectiveApprovalStatus } from "../approvals/approvals.repo.js"
import type { ContactMatch } from "../erasure/contact-match.repo.js"
import type { Sql, Tx } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"
import type { ListPage } from "../platform/page.cursor.js"
import { type RunObjectRow, runEndedEvent, runStartedEvent } from "../webhooks/event-data.js"
import { emitEvent } from "../webhooks/outbox.repo.js"
import { pauseLiveWorkflow, type WorkflowKind } from "../workflows/workflows.repo.js"
import { insertHeldRunTargets, insertRunTargets, rescheduleDoneTarget } from "./run-targets.repo.js"

export interface RunGate {
  readonly id: number
  readonly status: "draft" | "live" | "paused" | "retired"
  readonly rule_book_id: number | null
  readonly attested: boolean
  readonly audience_count: number
  readonly running_run_id: number | null
  readonly paused_run_id: number | null
}

/**
 * The workflow, locked, with what decides whether it may run. A simulation campaign's hidden
 * workflow is not found here: only its campaign starts and stops its run (src/rehearsals/).
 */
export const lockRunGate = async (tx: Tx, tenantId: number, workflowId: number): Promise<RunGate | undefined> => {
  const [row] = await tx<[RunGate?]>`
    select w.id, w.status, w.rule_book_id,
           (w.compliance ? 'consent_attested_at') as attested,
           (select count(*) from audience_targets a where a.workflow_id = w.id)::int as audience_count,
           (select r.id from runs r where r.workflow_id = w.id and r.status = 'running' limit 1) as running_run_id,
           (select r.id from runs r where r.workflow_id = w.id and r.status = 'paused' order by r.id desc limit 1)
             as paused_run_id
    from workflows w
    where w.id = ${workflowId} and w.tenant_id = ${tenantId} and w.kind <> 'rehearsal'
    for no key update of w`
  return row
}

/**
 * One page of a workflow's runs, newest first (one row more to tell if there is a next), with
 * live counters read from the attempts themselves so they are right after a takeover, the targets'
 * final outcomes, and what the run has cost so far (settled calls and their analyses): each row the
 * run object its events carry (RunObjectRow, src/webhooks/event-data.ts).
 */
export const listRuns = (sql: Sql | Tx, workflowId: number, page: ListPage) =>
  sql<RunObjectRow[]>`
    select r.id, r.workflow_id, r.status, r.pause_reason, r.end_reason, r.started_at, r.ended_at, r.targets_total,
           w.name as workflow_name, tn.currency,
           (select count(*) from run_targets t where t.run_id = r.id and t.status in ('done', 'skipped'))::int
             as targets_done,
           (select count(*) from run_targets t where t.run_id = r.id and t.status = 'dialing')::int as targets_dialing,
           (select coalesce(jsonb_object_agg(o.outcome, o.n), '{}'::jsonb) from (
             select coalesce(t.outcome, t.status) as outcome, count(*)::int as n from run_targets t
             where t.run_id = r.id and t.status in ('done', 'skipped') group by 1) o) as outcomes,
           spend.calls_minor as spent_calls_minor, spend.analyses_minor as spent_analyses_minor,
           (select count(*) from run_targets t where t.run_id = r.id and t.status in ('queued', 'waiting'))::int
             as targets_queued,
           (select count(distinct c.run_target_id) from calls c where c.run_id = r.id
             and c.outcome is distinct from 'insufficient_funds')::int as targets_dialed,
           (select count(distinct c.run_target_id) from calls c where c.run_id = r.id
             and c.answered_at is not null)::int as targets_connected,
           (select count(*) from approvals a where a.run_id = r.id
             and ${effectiveApprovalStatus(sql, "a")} = 'pending')::int as approvals_pending,
           (select count(*) from approvals a where a.run_id = r.id and a.proposed_action = 'concession'
             and a.status in ('approved', 'denied'))::int as concessions_decided
    from runs r
    join workflows w on w.id = r.workflow_id
    join tenants tn on tn.id = r.tenant_id
    cross join lateral (
      select coalesce(sum(c.cost_minor), 0)::bigint as calls_minor,
        coalesce(sum(ca.charged_minor), 0)::bigint as analyses_minor
      from calls c left join call_analyses ca on ca.call_id = c.id
      where c.run_id = r.id
    ) spend
    where r.workflow_id = ${workflowId}
      ${page.before === undefined ? sql`` : sql`and r.id < ${page.before}`}
    order by r.id desc
    limit ${page.limit + 1}`

/** A new run over the workflow's whole audience: one run_targets row per target. */
export const insertRun = async (
  tx: Tx,
  tenantId: number,
  workflowId: number,
  ruleBookId: number,
): Promise<{ id: number; queued: number }> => {
  const [run] = await tx<[{ id: number }]>`
    insert into runs (tenant_id, workflow_id, rule_book_id, status) values (${tenantId}, ${workflowId}, ${ruleBookId},
      'running')
    returning id`
  const inserted = await insertRunTargets(tx, tenantId, run.id, workflowId)
  const [at] = await tx<[{ updated_at: Date }]>`update runs set targets_total = ${inserted},
    targets_queued = ${inserted} where id = ${run.id} returning updated_at`
  await emitRunEvent(tx, { tenant_id: tenantId, workflow_id: workflowId, id: run.id, ...at }, { resumed: false })
  return { id: run.id, queued: inserted }
}

/** A run's change as its statement returns it, for its event. */
interface RunChange {
  readonly id: number
  readonly tenant_id: number
  readonly workflow_id: number
  readonly updated_at: Date
}

/**
 * workflow.run.started (`started` given) or workflow.run.ended, in the transaction that made it
 * true, with the run as GET /api/workflows/{id}/runs shows it (its first row from this run down).
 * A simulation campaign's run is a rehearsal hidden from those endpoints: callers skip it.
 */
const emitRunEvent = async (tx: Tx, c: RunChange, started?: { resumed: boolean }): Promise<void> => {
  const [run] = await listRuns(tx, Number(c.workflow_id), { limit: 1, before: Number(c.id) + 1 })
  if (run === undefined || Number(run.id) !== Number(c.id)) return
  await emitEvent(
    tx,
    started === undefined
      ? runEndedEvent(Number(c.tenant_id), run, c.updated_at)
      : runStartedEvent(Number(c.tenant_id), run, started.resumed, c.updated_at),
  )
}

/** RETURNING of a run's change: what emitRunEvent needs, and whether it is a simulation campaign's run. */
const changeColumns = (tx: Tx) => tx`runs.id, runs.tenant_id, runs.workflow_id, runs.updated_at,
  exists (select 1 from workflows w where w.id = runs.workflow_id and w.kind = 'rehearsal') as simulation`

/** Resumes a paused run: it keeps its id, and the targets it has not finished are queued again. */
export const resumeRun = async (tx: Tx, runId: number): Promise<{ id: number; queued: number }> => {
  const [row] = await tx<[(RunChange & { queued: number; simulation: boolean })?]>`
    update runs set status = 'running', pause_reason = null, updated_at = now(),
      targets_queued = (select count(*) from run_targets t where t.run_id = ${runId} and t.status in ('queued',
        'waiting'))
    where id = ${runId} and status = 'paused'
    returning targets_queued as queued, ${changeColumns(tx)}`
  if (row !== undefined && !row.simulation) await emitRunEvent(tx, row, { resumed: true })
  return { id: runId, queued: row?.queued ?? 0 }
}

/** Pauses the workflow's running run (queued targets stop; calls in flight finish). */
export const pauseRunningRun = async (
  tx: Tx,
  workflowId: number,
  reason: "user" | "insufficient_funds",
): Promise<number | undefined> => {
  const [row] = await tx<[{ id: number }?]>`
    update runs set status = 'paused', pause_reason = ${reason}, updated_at = now()
    where workflow_id = ${workflowId} and status = 'running'
    returning id`
  return row?.id
}

export interface ClaimedRun {
  readonly id: number
  readonly tenant_id: number
  readonly workflow_id: number
  readonly status: "running" | "paused"
  readonly pause_reason: string | null
  /** The process that owned the run before this claim (null: nobody had it). */
  readonly previous_owner: string | null
  readonly snapshot: unknown
  readonly machine_version: number | null
}

/**
 * Claims one run that needs an owner: running with no owner or a lapsed lease, or paused with a
 * lapsed lease (its last owner died while calls were in flight). SKIP LOCKED lets several runtime
 * processes claim side by side; NO KEY UPDATE, because the key-share lock a foreign-key check takes
 * on the run row (a call or turn being inserted) must not make a woken run look taken.
 */
export const claimRun = async (
  sql: Sql,
  me: string,
  leaseMs: number,
  onlyRunId?: number,
): Promise<ClaimedRun | undefined> => {
  const [row] = await sql<[ClaimedRun?]>`
    with candidate as (
      select id, owner_instance from runs
      where ${onlyRunId === undefined ? sql`true` : sql`id = ${onlyRunId}`}
        and ((status = 'running' and (owner_instance is null or lease_expires_at < now()))
          or (status = 'paused' and owner_instance is not null and lease_expires_at < now()))
      order by id
      limit 1
      for no key update skip locked
    )
    update runs r
    set owner_instance = ${me}, lease_expires_at = now() + ${leaseMs} * interval '1 millisecond', updated_at = now()
    from candidate c
    where r.id = c.id
    returning r.id, r.tenant_id, r.workflow_id, r.status, r.pause_reason, c.owner_instance as previous_owner,
      r.snapshot, r.machine_version`
  return row
}

/** Extends this process's run leases; returns the runs it still owns (the others were lost). */
export const renewLeases = async (sql: Sql, me: string, runIds: number[], leaseMs: number): Promise<Set<number>> => {
  if (runIds.length === 0) return new Set()
  const rows = await sql<{ id: number }[]>`
    update runs set lease_expires_at = now() + ${leaseMs} * interval '1 millisecond'
    where owner_instance = ${me} and id = any(${runIds}::bigint[])
    returning id`
  return new Set(rows.map((r) => r.id))
}

export const releaseRun = async (sql: Sql, me: string, runId: number): Promise<void> => {
  await sql`update runs set owner_instance = null, lease_expires_at = null where id = ${runId}
    and owner_instance = ${me}`
}

export interface RunSetup {
  readonly rule_book: unknown
  readonly schedule: Record<string, unknown>
  readonly schedule_kind: "immediate" | "window" | "once"
  readonly currency: Currency
  readonly tenant_name: string
  readonly workflow_name: string
  /** The assigned persona's agent name (its own, else its catalogue voice's); null: none assigned. */
  readonly persona_agent_name: string | null
  /** The assigned persona's greeting: the call's opening line unless a knowledge-base rule gives one. */
  readonly persona_greeting: string | null
  /** What the run's workflow is for: a rehearsal runs on the sim carrier, a demo call is billed to nobody. */
  readonly kind: WorkflowKind
  /** A rehearsal's run (src/rehearsals/): the workflow it rehearses, whose knowledge-base rules apply. */
  readonly simulation_of: number | null
  /** The simulation campaign's time scale (sim_campaigns.time_scale); null: SIM_TIME_SCALE, or a real run. */
  readonly sim_time_scale: number | null
}

export const loadRunSetup = async (sql: Sql, runId: number): Promise<RunSetup | undefined> => {
  const [row] = await sql<[RunSetup?]>`
    select rb.body as rule_book, w.schedule, w.schedule_kind, t.currency, t.name as tenant_name,
      w.name as workflow_name,
      coalesce(p.agent_name, (select b.name from personas b where b.builtin_voice = p.voice)) as persona_agent_name,
      p.greeting as persona_greeting, w.kind, w.simulation_of::int as simulation_of,
      (select c.time_scale from sim_campaigns c where c.sim_workflow_id = w.id order by c.id desc limit 1)
        as sim_time_scale
    from runs r
    join workflows w on w.id = r.workflow_id
    join tenants t on t.id = r.tenant_id
    join rule_books rb on rb.id = coalesce(r.rule_book_id, w.rule_book_id)
    left join personas p on p.id = w.persona_id and p.deleted_at is null
    where r.id = ${runId}`
  return row
}

export const runStatusOf = async (
  sql: Sql,
  runId: number,
  me: string,
): Promise<{ status: string; owned: boolean } | undefined> => {
  const [row] = await sql<
    [{ status: string; owned: boolean }?]
  >`select status, owner_instance = ${me} as owned from runs where id = ${runId}`
  return row
}

export const saveRunSnapshot = (sql: Sql, runId: number, me: string, snapshot: unknown, version: number) =>
  sql`update runs set snapshot = ${sql.json(snapshot as never)}, machine_version = ${version}, updated_at = now()
    where id = ${runId} and owner_instance = ${me}`

/** Records the run's end (or pause) as the run actor reaches it; only the owner may. */
export const setRunStatus = async (
  sql: Sql,
  runId: number,
  me: string,
  status: "completed" | "cancelled" | "failed" | "paused",
  reason: string | null,
): Promise<void> => {
  if (status === "paused") {
    await sql`update runs set status = 'paused', pause_reason = coalesce(pause_reason, ${reason}), updated_at = now()
      where id = ${runId} and owner_instance = ${me} and status in ('running', 'paused')`
    return
  }
  await sql.begin(async (tx) => {
    const [run] = await tx<[(RunChange & { simulation: boolean })?]>`
      update runs set status = ${status}, end_reason = ${reason}, ended_at = coalesce(ended_at, now()),
        owner_instance = null, lease_expires_at = null, updated_at = now()
      where id = ${runId} and owner_instance = ${me} and status in ('running', 'paused')
      returning ${changeColumns(tx)}`
    if (run !== undefined && !run.simulation) await emitRunEvent(tx, run)
  })
}

/** The wallet ran dry: the run and its workflow pause, so POST run resumes them. */
export const pauseForFunds = async (sql: Sql, runId: number, me: string): Promise<void> => {
  await sql.begin(async (tx) => {
    // The workflow's row first, as POST run and pause take it (lockRunGate): one lock order. No key
    // update, like every lock on a workflow: the rows that reference it (calls, approvals) still insert.
    await tx`select w.id from workflows w join runs r on r.workflow_id = w.id where r.id = ${runId}
      for no key update of w`
    const [run] = await tx<[{ workflow_id: number }?]>`
      update runs set status = 'paused', pause_reason = 'insufficient_funds', updated_at = now()
      where id = ${runId} and owner_instance = ${me} and status = 'running'
      returning workflow_id`
    if (run) await pauseLiveWorkflow(tx, run.workflow_id)
  })
}

/**
 * A callback approved after its call ended becomes a new attempt at `at`; a finished run opens
 * again to dial it, while its workflow is live and no other run of it is running. Only a target
 * that is done (not already queued again) is rescheduled. In the caller's transaction (a late
 * decision's, through run-callbacks.ts).
 */
export const scheduleCallback = async (tx: Tx, runId: number, runTargetId: number, at: Date): Promise<boolean> => {
  if (!(await rescheduleDoneTarget(tx, runId, runTargetId, at))) return false
  const [opened] = await tx<[(RunChange & { simulation: boolean })?]>`
    update runs set status = 'running', ended_at = null, end_reason = null, updated_at = now()
    where runs.id = ${runId} and runs.status = 'completed'
      and exists (select 1 from workflows w where w.id = runs.workflow_id and w.status = 'live')
      and not exists (select 1 from runs o where o.workflow_id = runs.workflow_id and o.status = 'running')
    returning ${changeColumns(tx)}`
  // A finished run opened again to dial an approved callback has started once more.
  if (opened !== undefined && !opened.simulation) await emitRunEvent(tx, opened, { resumed: true })
  return true
}

// --- simulation campaigns (src/rehearsals/) --------------------------------------------------------

/**
 * A simulation campaign's one run over its hidden workflow's simulated audience, running from the
 * start with every target held back (run-targets.repo.ts: released a batch at a time).
 */
export const insertHeldRun = async (
  tx: Tx,
  tenantId: number,
  workflowId: number,
  ruleBookId: number,
): Promise<{ id: number; held: number }> => {
  const [run] = await tx<[{ id: number }]>`
    insert into runs (tenant_id, workflow_id, rule_book_id, status)
    values (${tenantId}, ${workflowId}, ${ruleBookId}, 'running')
    returning id`
  const held = await insertHeldRunTargets(tx, tenantId, run.id, workflowId)
  await tx`update runs set targets_total = ${held}, targets_queued = ${held} where id = ${run.id}`
  return { id: run.id, held }
}

/** A stopped campaign's run pauses (calls in flight finish); false when it was not running. */
export const pauseSimulationRun = async (tx: Tx, runId: number): Promise<boolean> => {
  const paused = await tx`update runs set status = 'paused', pause_reason = 'user', updated_at = now()
    where id = ${runId} and status = 'running'`
  return paused.count > 0
}

/** The run's status and why it ended, as a campaign reads it. */
export const runEndOf = async (
  sql: Sql | Tx,
  runId: number,
): Promise<{ status: "running" | "paused" | "completed" | "cancelled" | "failed"; end_reason: string | null }> => {
  const [row] = await sql<
    [{ status: "running" | "paused" | "completed" | "cancelled" | "failed"; end_reason: string | null }]
  >`select status, end_reason from runs where id = ${runId}`
  return row
}

/** A data-subject erase (src/dsr/): the contact scrubbed out of the workspace's run snapshots. */
export const scrubRunSnapshots = async (tx: Tx, m: ContactMatch): Promise<number> =>
  (
    await tx`
    update runs set snapshot = ${m.scrub("snapshot")}::jsonb
    where tenant_id = ${m.tenantId} and ${m.mentions("snapshot")}`
  ).count
