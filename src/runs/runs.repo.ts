// SQL for starting, resuming and pausing runs (migrations/0004, 0005), as the api decides them:
// every status change is a conditional update under the workflow's row lock.
import type { Tx } from "../platform/Db.js"

export interface RunGate {
  readonly id: number
  readonly status: "draft" | "live" | "paused" | "retired"
  readonly rule_book_id: number | null
  readonly attested: boolean
  readonly audience_count: number
  readonly running_run_id: number | null
  readonly paused_run_id: number | null
}

/** The workflow, locked, with what decides whether it may run. */
export const lockRunGate = async (tx: Tx, tenantId: number, workflowId: number): Promise<RunGate | undefined> => {
  const [row] = await tx<[RunGate?]>`
    select w.id, w.status, w.rule_book_id,
           (w.compliance ? 'consent_attested_at') as attested,
           (select count(*) from audience_targets a where a.workflow_id = w.id)::int as audience_count,
           (select r.id from runs r where r.workflow_id = w.id and r.status = 'running' limit 1) as running_run_id,
           (select r.id from runs r where r.workflow_id = w.id and r.status = 'paused' order by r.id desc limit 1)
             as paused_run_id
    from workflows w
    where w.id = ${workflowId} and w.tenant_id = ${tenantId}
    for update of w`
  return row
}

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
  const inserted = await tx`
    insert into run_targets (tenant_id, run_id, target_id, phone_e164)
    select ${tenantId}, ${run.id}, a.id, a.phone_e164 from audience_targets a where a.workflow_id = ${workflowId}
    order by a.id`
  await tx`update runs set targets_total = ${inserted.count}, targets_queued = ${inserted.count} where id = ${run.id}`
  return { id: run.id, queued: inserted.count }
}

/** Resumes a paused run: it keeps its id, and the targets it has not finished are queued again. */
export const resumeRun = async (tx: Tx, runId: number): Promise<{ id: number; queued: number }> => {
  const [row] = await tx<[{ queued: number }]>`
    update runs set status = 'running', pause_reason = null, updated_at = now(),
      targets_queued = (select count(*) from run_targets t where t.run_id = ${runId} and t.status in ('queued',
        'waiting'))
    where id = ${runId} and status = 'paused'
    returning targets_queued as queued`
  return { id: runId, queued: row?.queued ?? 0 }
}

export const setWorkflowStatus = async (tx: Tx, workflowId: number, status: "live" | "paused"): Promise<void> => {
  await tx`update workflows set status = ${status}, updated_at = now() where id = ${workflowId}`
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
