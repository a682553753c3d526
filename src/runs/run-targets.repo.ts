// SQL on a run's targets (run_targets, migrations/0005): the only file that writes them. A run's
// targets are created with the run (src/runs/runs.repo.ts), read by the dialer (due, pending), and
// moved along by a call attempt (src/calls/calls.repo.ts: dialing, then done, retry or queued
// again), by the dialer's compliance checks (skipped, held), by an approval decided after its call
// and by a data-subject erase. Functions that must share their caller's transaction take its handle.
import type { Sql, Tx } from "../platform/Db.js"

/** One run_targets row per target of the workflow's audience; returns how many were written. */
export const insertRunTargets = async (tx: Tx, tenantId: number, runId: number, workflowId: number) => {
  const inserted = await tx`
    insert into run_targets (tenant_id, run_id, target_id, phone_e164)
    select ${tenantId}, ${runId}, a.id, a.phone_e164 from audience_targets a where a.workflow_id = ${workflowId}
    order by a.id`
  return inserted.count
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

/** Marks a due target dialing (one more attempt); undefined when it is no longer due. */
export const markTargetDialing = async (tx: Tx, runId: number, runTargetId: number) => {
  const [target] = await tx<[{ attempts: number; target_id: number; phone_e164: string }?]>`
    update run_targets set status = 'dialing', attempts = attempts + 1, updated_at = now()
    where id = ${runTargetId} and run_id = ${runId} and status in ('queued', 'waiting')
    returning attempts, target_id, phone_e164`
  return target
}

/** What happens to the target once an attempt has ended. */
export type TargetNext =
  | { readonly kind: "done"; readonly outcome: string }
  | { readonly kind: "retry"; readonly at: number; readonly outcome: string }
  /** Never reached the carrier (no funds): the target goes back to the queue. */
  | { readonly kind: "requeue"; readonly outcome: string }

/**
 * The targets' next steps once their attempts ended, in one statement: done; waiting until the
 * retry; or back in the queue with its last outcome kept (attempts keeps counting it: it numbers
 * the call rows, and (run_target_id, attempt) is unique). Inside the attempts' ending transaction.
 */
export const moveTargetsOn = async (
  tx: Tx,
  ends: ReadonlyArray<{ readonly runTargetId: number; readonly next: TargetNext }>,
): Promise<void> => {
  const nexts = ends.map((f) => ({
    id: f.runTargetId,
    kind: f.next.kind,
    outcome: f.next.outcome,
    at: f.next.kind === "retry" ? new Date(f.next.at).toISOString() : null,
  }))
  await tx`update run_targets t set
      status = case u.kind when 'done' then 'done' when 'retry' then 'waiting' else 'queued' end,
      outcome = case when u.kind = 'requeue' then t.outcome else u.outcome end,
      next_attempt_at = case when u.kind = 'retry' then u.at else t.next_attempt_at end,
      updated_at = now()
    from jsonb_to_recordset(${tx.json(nexts as never)}::jsonb) as u(id bigint, kind text, outcome text,
      at timestamptz)
    where t.id = u.id`
}

/** A target the dialer will not call (compliance). */
export const markTargetSkipped = async (tx: Tx, runTargetId: number, reason: string): Promise<void> => {
  await tx`update run_targets set status = 'skipped', outcome = ${reason}, updated_at = now()
    where id = ${runTargetId} and status in ('queued', 'waiting')`
}

/** A target held until its calling window opens. */
export const holdTargetUntil = async (tx: Tx, runTargetId: number, until: Date): Promise<void> => {
  await tx`update run_targets set status = 'waiting', next_attempt_at = ${until}, updated_at = now()
    where id = ${runTargetId} and status in ('queued', 'waiting')`
}

/** A done target becomes a new attempt at `at` (an approved callback); false when it is not done. */
export const rescheduleDoneTarget = async (tx: Tx, runId: number, runTargetId: number, at: Date): Promise<boolean> => {
  const [t] = await tx<[{ id: number }?]>`
    update run_targets set status = 'waiting', next_attempt_at = ${at}, outcome = 'callback_scheduled',
      updated_at = now()
    where id = ${runTargetId} and run_id = ${runId} and status = 'done'
    returning id`
  return t !== undefined
}

/**
 * A decision made after its call ended writes the target's result, if the call ended owing it
 * (src/approvals/late-decisions.ts, through the RunCallbacks port, in the deciding transaction).
 */
export const recordLateOutcome = async (tx: Tx, runTargetId: number, outcome: string): Promise<void> => {
  await tx`update run_targets set outcome = ${outcome}, updated_at = now()
    where id = ${runTargetId} and status = 'done' and outcome = 'pending_approval'`
}

/**
 * A data-subject erase (src/dsr/): the contact's targets keep their place in their runs with the
 * marker instead of the phone, and one not dialled yet is skipped for good. The rows changed.
 */
export const eraseContactTargets = async (
  tx: Tx,
  tenantId: number,
  marker: string,
  targetIds: readonly number[],
  phones: readonly string[],
): Promise<number> =>
  (
    await tx`
    update run_targets set phone_e164 = ${marker},
      status = case when status in ('queued', 'waiting') then 'skipped' else status end,
      outcome = case when status in ('queued', 'waiting') then 'erased' else outcome end, updated_at = now()
    where tenant_id = ${tenantId} and (target_id = any(${tx.array([...targetIds])}::bigint[])
      or phone_e164 = any(${tx.array([...phones])}::text[]))`
  ).count

// --- simulation campaigns (src/rehearsals/) --------------------------------------------------------
// A campaign's run gets all its targets at once, held back (next_attempt_at 'infinity', which the
// dialer never reaches) and released a batch at a time.

/** The run's targets, one per audience target of the hidden workflow, every one held back. */
export const insertHeldRunTargets = async (tx: Tx, tenantId: number, runId: number, workflowId: number) => {
  const inserted = await tx`
    insert into run_targets (tenant_id, run_id, target_id, phone_e164, next_attempt_at)
    select ${tenantId}, ${runId}, a.id, a.phone_e164, 'infinity' from audience_targets a
    where a.workflow_id = ${workflowId}
    order by a.id`
  return inserted.count
}

/** Releases the next `count` held targets to the dialer, in id order; returns how many were. */
export const releaseHeldTargets = async (tx: Tx, runId: number, count: number): Promise<number> => {
  const released = await tx`
    update run_targets set next_attempt_at = now(), updated_at = now()
    where id in (
      select id from run_targets
      where run_id = ${runId} and status = 'queued' and next_attempt_at = 'infinity'
      order by id limit ${count}
      for update)`
  return released.count
}

/** Holds back again the released targets the dialer has not reached yet (a stopped campaign). */
export const holdUndialedTargets = async (tx: Tx, runId: number): Promise<number> => {
  const held = await tx`
    update run_targets set next_attempt_at = 'infinity', updated_at = now()
    where run_id = ${runId} and status = 'queued' and attempts = 0 and next_attempt_at <> 'infinity'`
  return held.count
}

/**
 * Where a campaign's run stands. `released`: targets handed to the dialer (any not still held
 * back); `open`: released ones without a final outcome yet; `final`: done or skipped.
 */
export const simulationProgress = async (
  sql: Sql | Tx,
  runId: number,
): Promise<{ released: number; open: number; final: number }> => {
  const [row] = await sql<[{ released: number; open: number; final: number }]>`
    select
      count(*) filter (where not (status = 'queued' and next_attempt_at = 'infinity'))::int as released,
      count(*) filter (where status in ('queued', 'waiting', 'dialing')
        and not (status = 'queued' and next_attempt_at = 'infinity'))::int as open,
      count(*) filter (where status in ('done', 'skipped'))::int as final
    from run_targets where run_id = ${runId}`
  return row
}

/** How many of the run's targets ended with each outcome (final targets only). */
export const finalOutcomeCounts = (sql: Sql | Tx, runId: number) =>
  sql<{ status: "done" | "skipped"; outcome: string | null; count: number }[]>`
    select status, outcome, count(*)::int as count from run_targets
    where run_id = ${runId} and status in ('done', 'skipped')
    group by status, outcome`
