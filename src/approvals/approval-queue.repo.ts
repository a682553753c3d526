// SQL of the approvals queue as the api reads it: the list with the polling filters and a
// supervisor's order, and the pending count the streams show. Reads only (approvals.repo.ts writes).
import type { Sql } from "../platform/Db.js"
import {
  type ApprovalPhase,
  type ApprovalRow,
  type ApprovalStatus,
  approvalColumns,
  approvalPhase,
  effectiveApprovalStatus,
} from "./approvals.repo.js"

export interface ListFilter {
  readonly workflowId?: number | undefined
  readonly status?: ApprovalStatus | undefined
  readonly decidedAfter?: Date | undefined
  readonly createdAfter?: Date | undefined
  readonly beforeId?: number | undefined
  /** Pending approvals in this phase only. */
  readonly phase?: ApprovalPhase | undefined
  /**
   * newest (default): by id, newest first (by decision time with decidedAfter). time_left: pending
   * ones on hold first, soonest hold_until first; then pending ones after their call, soonest
   * expires_at first; then the rest, newest first.
   */
  readonly order?: "newest" | "time_left" | undefined
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
    select ${approvalColumns(sql)} from approvals
    where tenant_id = ${tenantId}
      ${f.workflowId === undefined ? sql`` : sql`and workflow_id = ${f.workflowId}`}
      ${f.status === undefined ? sql`` : sql`and ${effectiveApprovalStatus(sql, "approvals")} = ${f.status}`}
      ${f.status === undefined ? sql`` : storedStatusIn(sql, f.status)}
      ${f.decidedAfter === undefined ? sql`` : sql`and decided_at > ${f.decidedAfter}`}
      ${f.createdAfter === undefined ? sql`` : sql`and created_at > ${f.createdAfter}`}
      ${f.beforeId === undefined ? sql`` : sql`and id < ${f.beforeId}`}
      ${f.phase === undefined ? sql`` : sql`and status = 'pending' and ${approvalPhase(sql, "approvals")} = ${f.phase}`}
    order by ${
      f.order === "time_left"
        ? timeLeftOrder(sql)
        : f.decidedAfter === undefined
          ? sql`id desc`
          : sql`decided_at desc, id desc`
    }
    limit ${f.limit}`

/** A supervisor's order: who is held first (soonest hold end first), then who else can still be decided. */
const timeLeftOrder = (sql: Sql) => {
  const status = effectiveApprovalStatus(sql, "approvals")
  const phase = approvalPhase(sql, "approvals")
  return sql`(case when ${status} <> 'pending' then 2 when ${phase} = 'on_hold' then 0 else 1 end),
    (case when ${status} = 'pending' and ${phase} = 'on_hold' then (context ->> 'hold_until')::timestamptz end)
      asc nulls last,
    (case when ${status} = 'pending' then expires_at end) asc,
    id desc`
}

/** The workspace's approvals a decision is still waiting on (as GET /api/approvals?status=pending lists them). */
export const countPending = async (sql: Sql, tenantId: number): Promise<number> => {
  const [row] = await sql<[{ n: number }]>`
    select count(*)::int as n from approvals
    where tenant_id = ${tenantId} and status = 'pending' and expires_at > now()`
  return Number(row.n)
}

/** How many approvals wait for a decision, in every workspace (the partial index on pending ones keeps it cheap). */
export async function countPendingApprovals(sql: Sql): Promise<number> {
  const [row] = await sql<[{ n: number }]>`select count(*)::int as n from approvals where status = 'pending'`
  return row.n
}
