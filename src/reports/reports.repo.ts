// SQL for the weekly report: the period's calls (totals, outcomes, calls per UTC day) and the
// approvals requested in it, for one workspace. A call belongs to the day it was started.

import { effectiveApprovalStatus } from "../approvals/approvals.repo.js"
import type { Sql } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"

export interface ReportTenant {
  readonly name: string
  readonly currency: Currency
}

export interface CallTotals {
  readonly placed: number
  readonly connected: number
  readonly connected_seconds: number
  readonly spend_minor: number
}

export interface OutcomeCount {
  readonly outcome: string
  readonly calls: number
}

export interface DayCount {
  /** YYYY-MM-DD, UTC. */
  readonly day: string
  readonly calls: number
}

export interface ApprovalCounts {
  readonly requested: number
  readonly approved: number
  readonly denied: number
  readonly expired: number
  readonly pending: number
}

/** [start, end): midnight UTC of the first day to midnight UTC after the last. */
export interface Range {
  readonly start: Date
  readonly end: Date
}

export const findTenant = async (sql: Sql, tenantId: number): Promise<ReportTenant | undefined> => {
  const [row] = await sql<ReportTenant[]>`select name, currency from tenants where id = ${tenantId}`
  return row
}

/**
 * The week's calls placed for real: not attempts refused for want of funds (they never reached a
 * carrier), not a simulation campaign's rehearsals.
 */
const placedIn = (sql: Sql, tenantId: number, r: Range) => sql`
  c.tenant_id = ${tenantId} and c.started_at >= ${r.start} and c.started_at < ${r.end}
  and c.outcome is distinct from 'insufficient_funds'
  and not exists (select 1 from workflows w where w.id = c.workflow_id and w.kind = 'rehearsal')`

export const callTotals = async (sql: Sql, tenantId: number, r: Range): Promise<CallTotals> => {
  const [row] = await sql<[CallTotals]>`
    select count(*)::int as placed,
           count(*) filter (where c.answered_at is not null)::int as connected,
           coalesce(sum(c.connected_seconds), 0)::bigint as connected_seconds,
           coalesce(sum(c.cost_minor), 0)::bigint as spend_minor
    from calls c where ${placedIn(sql, tenantId, r)}`
  return row
}

/** Calls by outcome; a call still in flight counts as in_progress. */
export const outcomeCounts = (sql: Sql, tenantId: number, r: Range) =>
  sql<OutcomeCount[]>`
    select coalesce(c.outcome, 'in_progress') as outcome, count(*)::int as calls
    from calls c where ${placedIn(sql, tenantId, r)}
    group by 1
    order by 2 desc, 1`

/** Days without calls are absent; the figures fill them in. */
export const callsPerDay = (sql: Sql, tenantId: number, r: Range) =>
  sql<DayCount[]>`
    select to_char(c.started_at at time zone 'UTC', 'YYYY-MM-DD') as day, count(*)::int as calls
    from calls c where ${placedIn(sql, tenantId, r)}
    group by 1
    order by 1`

/**
 * Approvals requested in the period, by where they stand now. A pending approval past its expiry
 * counts as expired, whether or not its timer has written that yet.
 */
export const approvalCounts = async (sql: Sql, tenantId: number, r: Range, now: Date): Promise<ApprovalCounts> => {
  const [row] = await sql<[ApprovalCounts]>`
    select count(*)::int as requested,
           count(*) filter (where a.status = 'approved')::int as approved,
           count(*) filter (where a.status = 'denied')::int as denied,
           count(*) filter (where ${effectiveApprovalStatus(sql, "a", now)} = 'expired')::int as expired,
           count(*) filter (where ${effectiveApprovalStatus(sql, "a", now)} = 'pending')::int as pending
    from approvals a
    where a.tenant_id = ${tenantId} and a.created_at >= ${r.start} and a.created_at < ${r.end}
      and not exists (select 1 from workflows w where w.id = a.workflow_id and w.kind = 'rehearsal')`
  return row
}
