// SQL the runtime role runs on runs and their targets: run leases (claim, renew, release), the
// run's setup, status and snapshot, and the dialer's due targets. A call attempt's SQL (and the
// decision log) is in src/calls/calls.repo.ts, turns in src/turns/turns.repo.ts, approvals in
// src/approvals/approvals.repo.ts. A run's writes are conditional on this process still owning the
// run, so a process that lost its lease changes nothing.
import type { Sql } from "../src/platform/Db.js"

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
 * processes claim side by side.
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
      for update skip locked
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
  readonly currency: "INR" | "USD"
  readonly tenant_name: string
  readonly workflow_name: string
}

export const loadRunSetup = async (sql: Sql, runId: number): Promise<RunSetup | undefined> => {
  const [row] = await sql<[RunSetup?]>`
    select rb.body as rule_book, w.schedule, w.schedule_kind, t.currency, t.name as tenant_name, w.name as workflow_name
    from runs r
    join workflows w on w.id = r.workflow_id
    join tenants t on t.id = r.tenant_id
    join rule_books rb on rb.id = coalesce(r.rule_book_id, w.rule_book_id)
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

export interface DueTarget {
  readonly id: number
  readonly target_id: number
  readonly phone_e164: string
  readonly attempts: number
  readonly name: string | null
  readonly on_dnc: boolean
  readonly ncpr_preference: string | null
  readonly last_contacted_at: Date | null
}

/** Targets whose turn has come, oldest due first, with what the compliance checks need. */
export const dueTargets = (sql: Sql, runId: number, limit: number) =>
  sql<DueTarget[]>`
    select t.id, t.target_id, t.phone_e164, t.attempts, a.name,
           exists (select 1 from dnc_entries d where d.tenant_id = t.tenant_id and d.phone_e164 = t.phone_e164)
             as on_dnc,
           (select n.preference from ncpr_registry n where n.phone_e164 = t.phone_e164) as ncpr_preference,
           (select c.last_contacted_at from recent_contacts c where c.tenant_id = t.tenant_id
             and c.phone_e164 = t.phone_e164) as last_contacted_at
    from run_targets t join audience_targets a on a.id = t.target_id
    where t.run_id = ${runId} and t.status in ('queued', 'waiting') and t.next_attempt_at <= now()
    order by t.next_attempt_at, t.id
    limit ${limit}`

/** How many targets still need the dialer, and when the earliest of them is due. */
export const pendingTargets = async (sql: Sql, runId: number): Promise<{ pending: number; next_at: Date | null }> => {
  const [row] = await sql<[{ pending: number; next_at: Date | null }]>`
    select count(*)::int as pending, min(next_attempt_at) as next_at
    from run_targets where run_id = ${runId} and status in ('queued', 'waiting')`
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
  await sql`
    update runs set status = ${status}, end_reason = ${reason}, ended_at = coalesce(ended_at, now()),
      owner_instance = null, lease_expires_at = null, updated_at = now()
    where id = ${runId} and owner_instance = ${me} and status in ('running', 'paused')`
}

/** The wallet ran dry: the run and its workflow pause, so POST run resumes them. */
export const pauseForFunds = async (sql: Sql, runId: number, me: string): Promise<void> => {
  await sql.begin(async (tx) => {
    const [run] = await tx<[{ workflow_id: number }?]>`
      update runs set status = 'paused', pause_reason = 'insufficient_funds', updated_at = now()
      where id = ${runId} and owner_instance = ${me} and status = 'running'
      returning workflow_id`
    if (run)
      await tx`update workflows set status = 'paused', updated_at = now() where id = ${run.workflow_id}
        and status = 'live'`
  })
}
