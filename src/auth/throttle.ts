// Login throttling, shared by every process through the database: failures are counted per
// account and per client address in a 15-minute window; past a few they are answered slowly,
// past the limit refused with 429 until the window's lock ends.
import type { Sql } from "../platform/Db.js"
import * as repo from "./throttle.repo.js"

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
  const until = await repo.latestLock(sql, keys, now)
  return until ? Math.max(1, Math.ceil((until.getTime() - now.getTime()) / 1000)) : undefined
}

/** Counts a failure against `key`; returns the failures in the current window. */
export async function recordFailure(sql: Sql, key: string, limit: number, now: Date): Promise<number> {
  const windowStart = new Date(now.getTime() - WINDOW_MS)
  const lockUntil = new Date(now.getTime() + WINDOW_MS)
  return repo.countFailure(sql, { key, limit, now, windowStart, lockUntil })
}

export const clearFailures = (sql: Sql, key: string): Promise<void> => repo.deleteFailures(sql, key)

/** How long to hold a failed answer: nothing for the first few, then doubling to a cap. */
export function failureDelayMs(failures: number): number {
  if (failures <= FREE_FAILURES) return 0
  return Math.min(MAX_DELAY_MS, 250 * 2 ** (failures - FREE_FAILURES - 1))
}
