// SQL for login throttling: one row per throttled key (an account or a client address) with its
// failures in the current window and the lock that ends it.
import type { Sql } from "../platform/Db.js"

/** The end of the longest lock among `keys` still running at `now`, or null. */
export const latestLock = async (sql: Sql, keys: string[], now: Date): Promise<Date | null> => {
  const [row] = await sql<[{ until: Date | null }]>`
    select max(locked_until) as until from login_failures where key = any(${keys}) and locked_until > ${now}`
  return row.until
}

/**
 * Counts a failure against `key` in one statement: a window started before `windowStart` starts
 * over; reaching `limit` in the window locks the key until `lockUntil`. Returns the failures.
 */
export const countFailure = async (
  sql: Sql,
  f: { key: string; limit: number; now: Date; windowStart: Date; lockUntil: Date },
): Promise<number> => {
  const { key, limit, now, windowStart, lockUntil } = f
  const [row] = await sql<[{ failures: number }]>`
    insert into login_failures as f (key, failures, window_started_at)
    values (${key}, 1, ${now})
    on conflict (key) do update set
      failures = case when f.window_started_at < ${windowStart} then 1 else f.failures + 1 end,
      window_started_at = case when f.window_started_at < ${windowStart} then ${now} else f.window_started_at end,
      locked_until = case
        when f.window_started_at >= ${windowStart} and f.failures + 1 >= ${limit} then ${lockUntil}
        else f.locked_until end
    returning failures`
  return row.failures
}

export const deleteFailures = async (sql: Sql, key: string): Promise<void> => {
  await sql`delete from login_failures where key = ${key}`
}
