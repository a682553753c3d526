// Login throttling, shared by every process through the database: failures are counted per
// account and per client address in a 15-minute window; past a few they are answered slowly,
// past the limit refused with 429 until the window's lock ends.
import type { Sql } from "../platform/Db.js"

export const WINDOW_MS = 15 * 60 * 1000
const FREE_FAILURES = 3
const MAX_DELAY_MS = 3_000

export interface ThrottleLimits {
  /** Failures for one account before it is locked for the window. */
  readonly account: number
  /** Failures from one address (across accounts) before it is locked. */
  readonly address: number
}

export const DEFAULT_LIMITS: ThrottleLimits = { account: 10, address: 100 }

export const accountKey = (email: string) => `acct:${email}`
export const addressKey = (ip: string) => `ip:${ip}`

/** Seconds until the longest lock among `keys` ends, or undefined when none is locked. */
export async function lockedFor(sql: Sql, keys: string[], now: Date): Promise<number | undefined> {
  const [row] = await sql<[{ until: Date | null }]>`
    select max(locked_until) as until from login_failures where key = any(${keys}) and locked_until > ${now}`
  return row.until ? Math.max(1, Math.ceil((row.until.getTime() - now.getTime()) / 1000)) : undefined
}

/** Counts a failure against `key`; returns the failures in the current window. */
export async function recordFailure(sql: Sql, key: string, limit: number, now: Date): Promise<number> {
  const windowStart = new Date(now.getTime() - WINDOW_MS)
  const lockUntil = new Date(now.getTime() + WINDOW_MS)
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

export async function clearFailures(sql: Sql, key: string): Promise<void> {
  await sql`delete from login_failures where key = ${key}`
}

/** How long to hold a failed answer: nothing for the first few, then doubling to a cap. */
export function failureDelayMs(failures: number): number {
  if (failures <= FREE_FAILURES) return 0
  return Math.min(MAX_DELAY_MS, 250 * 2 ** (failures - FREE_FAILURES - 1))
}
