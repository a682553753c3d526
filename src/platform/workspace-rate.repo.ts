// The workspace request budget (RATE_LIMIT_RPS) shared by every api process: one row per workspace
// holding the current one-second window, by the database's clock, and how much of it is leased.
import type { Sql } from "./Db.js"

export interface RequestLease {
  /** Requests this lease grants (0: the window's budget is spent). */
  readonly granted: number
  /** Requests leased in the window so far, by every process, this one included. */
  readonly used: number
  /** Milliseconds until the window ends. */
  readonly msLeft: number
}

/**
 * Leases up to `want` requests of the workspace's `limit` for the current second. One statement:
 * a new second starts the count afresh, and a lease never takes the total past the limit, so the
 * processes together never admit more than `limit` in a second.
 */
export async function leaseRequests(sql: Sql, tenantId: number, want: number, limit: number): Promise<RequestLease> {
  const first = Math.min(want, limit)
  const [row] = await sql<[{ used: number; granted: number; ms_left: number }]>`
    insert into workspace_request_windows as w (tenant_id, window_start, used, granted)
    values (${tenantId}::bigint, date_trunc('second', clock_timestamp()), ${first}::int, ${first}::int)
    on conflict (tenant_id) do update set
      used = case when w.window_start < excluded.window_start then excluded.used
             else least(w.used + ${want}::int, greatest(w.used, ${limit}::int)) end,
      granted = case when w.window_start < excluded.window_start then excluded.used
                else least(w.used + ${want}::int, greatest(w.used, ${limit}::int)) - w.used end,
      window_start = greatest(w.window_start, excluded.window_start)
    returning used, granted,
      ceil(extract(epoch from (window_start + interval '1 second' - clock_timestamp())) * 1000)::int as ms_left`
  return { granted: row.granted, used: row.used, msLeft: Math.max(1, Math.min(1000, row.ms_left)) }
}
