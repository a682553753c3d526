// SQL for approvals: as the api sees them (listing with the polling filters, and the decision, made
// atomically in Postgres: only a pending, unexpired approval of the workspace changes), and as the
// runtime writes them (a proposal's row, its actor's snapshot, expiry, and the expiry sweep).
import type { Sql, Tx } from "../platform/Db.js"
import { approvalEvent } from "../webhooks/event-data.js"
import { emitEvents } from "../webhooks/outbox.repo.js"

export type ApprovalStatus = "pending" | "approved" | "denied" | "expired"

export interface ApprovalRow {
  readonly id: number
  readonly workflow_id: number
  readonly run_id: number | null
  readonly call_id: number | null
  readonly target_phone: string | null
  readonly proposed_action: "concession" | "callback" | "escalate"
  readonly proposed_value_minor: number | null
  readonly currency: "INR" | "USD"
  readonly rationale: string | null
  readonly context: Record<string, unknown>
  /** A pending approval past its expiry reads as expired, whether or not the sweep has run. */
  readonly status: ApprovalStatus
  readonly created_at: Date
  readonly expires_at: Date
  readonly decided_at: Date | null
  readonly decided_by: number | null
  readonly decided_by_api_key_id: number | null
  readonly note: string | null
}

/**
 * An approval's status as everyone reads it: a pending approval past its expiry is expired, whether
 * or not its actor's timer (or the sweep) has written that yet. `alias` names the approvals row;
 * `now` defaults to the statement's time.
 */
export const effectiveApprovalStatus = (sql: Sql | Tx, alias: string, now?: Date) => {
  const a = sql(alias)
  const at = now === undefined ? sql`now()` : sql`${now}`
  return sql`(case when ${a}.status = 'pending' and ${a}.expires_at <= ${at} then 'expired' else ${a}.status end)`
}

const columns = (sql: Sql | Tx) => sql`
  id, workflow_id, run_id, call_id, target_phone, proposed_action, proposed_value_minor, currency, rationale, context,
  ${effectiveApprovalStatus(sql, "approvals")} as status,
  created_at, expires_at, decided_at, decided_by, decided_by_api_key_id, note`

export interface ListFilter {
  readonly workflowId?: number | undefined
  readonly status?: ApprovalStatus | undefined
  readonly decidedAfter?: Date | undefined
  readonly createdAfter?: Date | undefined
  readonly beforeId?: number | undefined
  readonly limit: number
}

/**
 * The stored statuses an effective status can come from: the same filter, said so the planner can
 * use the status indexes (a poll for pending ones no longer walks every decided approval). Literals,
 * not parameters, so a cached generic plan can use them too.
 */
const storedStatusIn = (sql: Sql, effective: ApprovalStatus) => {
  switch (effective) {
    case "pending":
      return sql`and status = 'pending'`
    case "approved":
      return sql`and status = 'approved'`
    case "denied":
      return sql`and status = 'denied'`
    case "expired":
      return sql`and status in ('pending', 'expired')`
  }
}

export const listApprovals = (sql: Sql, tenantId: number, f: ListFilter) =>
  sql<ApprovalRow[]>`
    select ${columns(sql)} from approvals
    where tenant_id = ${tenantId}
      ${f.workflowId === undefined ? sql`` : sql`and workflow_id = ${f.workflowId}`}
      ${f.status === undefined ? sql`` : sql`and ${effectiveApprovalStatus(sql, "approvals")} = ${f.status}`}
      ${f.status === undefined ? sql`` : storedStatusIn(sql, f.status)}
      ${f.decidedAfter === undefined ? sql`` : sql`and decided_at > ${f.decidedAfter}`}
      ${f.createdAfter === undefined ? sql`` : sql`and created_at > ${f.createdAfter}`}
      ${f.beforeId === undefined ? sql`` : sql`and id < ${f.beforeId}`}
    order by ${f.decidedAfter === undefined ? sql`id desc` : sql`decided_at desc, id desc`}
    limit ${f.limit}`

export type DecideOutcome =
  | {
      readonly kind: "decided"
      readonly row: ApprovalRow
      readonly callEnded: boolean
      readonly runTargetId: number | null
    }
  | { readonly kind: "not_found" }
  | { readonly kind: "conflict"; readonly status: ApprovalStatus }

/** Decides a pending approval: exactly one of any number of concurrent decisions wins. */
export const decide = async (
  sql: Sql,
  d: {
    tenantId: number
    approvalId: number
    status: "approved" | "denied"
    userId: number | null
    apiKeyId: number | null
    note: string | null
  },
): Promise<DecideOutcome> =>
  (await sql.begin(async (tx) => {
    const [row] = await tx<[ApprovalRow?]>`
      update approvals
      set status = ${d.status}, decided_at = now(), decided_by = ${d.userId}, decided_by_api_key_id = ${d.apiKeyId},
        note = ${d.note}
      where id = ${d.approvalId} and tenant_id = ${d.tenantId} and status = 'pending' and expires_at > now()
      returning ${columns(tx)}`
    if (!row) {
      const [existing] = await tx<[{ status: ApprovalStatus }?]>`
        select ${effectiveApprovalStatus(tx, "approvals")} as status
        from approvals where id = ${d.approvalId} and tenant_id = ${d.tenantId}`
      return existing === undefined ? { kind: "not_found" } : { kind: "conflict", status: existing.status }
    }
    if (!(await isRehearsal(tx, row.workflow_id))) await emitEvents(tx, [approvalEvent(d.tenantId, row)])
    const [call] = await tx<
      [{ status: string; run_target_id: number }?]
    >`select status, run_target_id from calls where id = ${row.call_id}`
    return {
      kind: "decided",
      row,
      callEnded: call === undefined || call.status === "ended",
      runTargetId: call?.run_target_id ?? null,
    }
  })) as DecideOutcome

export interface NewApproval {
  readonly tenantId: number
  readonly workflowId: number
  readonly runId: number
  readonly callId: number
  readonly phone: string
  readonly action: "concession" | "callback" | "escalate"
  readonly valueMinor: number | null
  readonly currency: "INR" | "USD"
  readonly rationale: string
  readonly context: Record<string, unknown>
  readonly ttlMs: number
}

/** The proposal's row and its approval.requested event, together. */
export const insertApproval = async (
  sql: Sql,
  a: NewApproval,
): Promise<{ id: number; expires_at: Date; created_at: Date }> =>
  (await sql.begin(async (tx) => {
    const [row] = await tx<[ApprovalRow]>`
      insert into approvals (tenant_id, workflow_id, run_id, call_id, target_phone, proposed_action,
        proposed_value_minor, currency, rationale, context, expires_at)
      values (${a.tenantId}, ${a.workflowId}, ${a.runId}, ${a.callId}, ${a.phone}, ${a.action}, ${a.valueMinor},
        ${a.currency}, ${a.rationale},
              ${tx.json(a.context as never)}, now() + ${a.ttlMs} * interval '1 millisecond')
      returning ${columns(tx)}`
    if (!(await isRehearsal(tx, a.workflowId))) await emitEvents(tx, [approvalEvent(a.tenantId, row)])
    return { id: row.id, expires_at: row.expires_at, created_at: row.created_at }
  })) as { id: number; expires_at: Date; created_at: Date }

/**
 * A simulation campaign's workflow (src/sim/): its approvals are a rehearsal's, hidden like its
 * runs and calls, and send no webhook event.
 */
const isRehearsal = async (tx: Tx, workflowId: number): Promise<boolean> =>
  (await tx`select 1 from workflows where id = ${workflowId} and simulation_of is not null`).length > 0

/**
 * approval.resolved for approvals another domain settled in its own transaction (a data-subject
 * erase denies the contact's pending ones): read back as they now stand, rehearsals left out.
 */
export async function emitResolvedApprovals(tx: Tx, tenantId: number, ids: readonly number[]): Promise<void> {
  if (ids.length === 0) return
  const rows = await tx<ApprovalRow[]>`
    select ${columns(tx)} from approvals
    where tenant_id = ${tenantId} and id = any(${tx.array([...ids])}::bigint[]) and status <> 'pending'
      and not exists (select 1 from workflows w where w.id = approvals.workflow_id and w.simulation_of is not null)
    order by id`
  await emitEvents(
    tx,
    rows.map((r) => approvalEvent(tenantId, r)),
  )
}

export const saveApprovalSnapshot = (sql: Sql, approvalId: number, snapshot: unknown, version: number) =>
  sql`update approvals set snapshot = ${sql.json(snapshot as never)}, machine_version = ${version}
    where id = ${approvalId}`

/** An approval the expiry wrote, as its announcement needs it. */
export interface ExpiredApproval {
  readonly id: number
  readonly tenant_id: number
  readonly expires_at: Date
}

/**
 * Expires approvals in Postgres: only a still-pending one past its expiry expires, so whichever of
 * its actor's timer and the sweep comes first writes it, and its approval.resolved, once. `which`:
 * one approval (its actor's timer) or every due one (the sweep, for approvals whose actor is gone).
 */
export const expireApprovals = (sql: Sql, which: number | "due"): Promise<ExpiredApproval[]> =>
  sql.begin(async (tx) => {
    const rows = await tx<(ApprovalRow & { tenant_id: number; rehearsal: boolean })[]>`
      update approvals set status = 'expired' where status = 'pending' and expires_at <= now()
        and ${which === "due" ? tx`true` : tx`id = ${which}`}
      returning tenant_id, ${columns(tx)},
        exists (select 1 from workflows w where w.id = approvals.workflow_id and w.simulation_of is not null)
          as rehearsal`
    await emitEvents(
      tx,
      rows.filter((r) => !r.rehearsal).map((r) => approvalEvent(Number(r.tenant_id), r)),
    )
    return rows.map((r) => ({ id: Number(r.id), tenant_id: Number(r.tenant_id), expires_at: r.expires_at }))
  }) as Promise<ExpiredApproval[]>

export const expireApproval = async (sql: Sql, approvalId: number): Promise<number> =>
  (await expireApprovals(sql, approvalId)).length

/** Every runtime process sweeps approvals whose actor is gone (their run ended or moved). */
export const expireDueApprovals = async (sql: Sql): Promise<number> => (await expireApprovals(sql, "due")).length

export interface PendingApprovalRow {
  readonly id: number
  readonly tenant_id: number
  readonly run_id: number | null
  readonly call_id: number | null
  readonly proposed_action: "concession" | "callback" | "escalate"
  readonly proposed_value_minor: number | null
  readonly expires_at: Date
  readonly snapshot: unknown
  readonly machine_version: number | null
}

export const pendingApprovalsOfRun = (sql: Sql, runId: number) =>
  sql<PendingApprovalRow[]>`
    select id, tenant_id, run_id, call_id, proposed_action, proposed_value_minor, expires_at, snapshot, machine_version
    from approvals where run_id = ${runId} and status = 'pending'`
