// Budgets that hold across processes: a fixed-window counter per key in Postgres (one upsert per
// hit), for per-IP and per-address limits such as signups, OTP guesses and anonymous previews.
import type { Sql } from "./Db.js"

export interface Budget {
  /** Hits allowed in one window. */
  readonly limit: number
  readonly windowMs: number
}

export type HitResult =
  | { readonly allowed: true; readonly hits: number }
  | { readonly allowed: false; readonly hits: number; readonly retryAfterSeconds: number }

/**
 * Counts one hit against `key` and says whether it is within the budget. A hit past the budget is
 * still counted (a client hammering a closed door does not reopen it sooner), and the answer says
 * how long until the window ends.
 */
export async function hit(sql: Sql, key: string, budget: Budget, now: Date): Promise<HitResult> {
  const windowStart = new Date(now.getTime() - budget.windowMs)
  const [row] = await sql<[{ hits: number; window_started_at: Date }]>`
    insert into rate_counters as c (key, hits, window_started_at) values (${key}, 1, ${now})
    on conflict (key) do update set
      hits = case when c.window_started_at <= ${windowStart} then 1 else c.hits + 1 end,
      window_started_at = case when c.window_started_at <= ${windowStart} then ${now} else c.window_started_at end
    returning hits, window_started_at`
  if (row.hits <= budget.limit) return { allowed: true, hits: row.hits }
  const endsAt = row.window_started_at.getTime() + budget.windowMs
  return { allowed: false, hits: row.hits, retryAfterSeconds: Math.max(1, Math.ceil((endsAt - now.getTime()) / 1000)) }
}

/** Whether `key` is already past its budget, without counting a hit. */
export async function exhausted(sql: Sql, key: string, budget: Budget, now: Date): Promise<HitResult> {
  const windowStart = new Date(now.getTime() - budget.windowMs)
  const [row] = await sql<[{ hits: number; window_started_at: Date }?]>`
    select hits, window_started_at from rate_counters where key = ${key} and window_started_at > ${windowStart}`
  if (row === undefined || row.hits < budget.limit) return { allowed: true, hits: row?.hits ?? 0 }
  const endsAt = row.window_started_at.getTime() + budget.windowMs
  return { allowed: false, hits: row.hits, retryAfterSeconds: Math.max(1, Math.ceil((endsAt - now.getTime()) / 1000)) }
}

/** Forgets `key` (a successful sign-in clears its failures). */
export async function reset(sql: Sql, key: string): Promise<void> {
  await sql`delete from rate_counters where key = ${key}`
}

/** Takes back one counted hit (a guess that turned out right is not a failure). */
export async function refund(sql: Sql, key: string): Promise<void> {
  await sql`update rate_counters set hits = greatest(hits - 1, 0) where key = ${key}`
}

/** Deletes windows that ended before `before` (called by a periodic sweep). */
export async function sweep(sql: Sql, before: Date): Promise<number> {
  const r = await sql`delete from rate_counters where window_started_at < ${before}`
  return r.count
}

export const HOUR_MS = 3_600_000
