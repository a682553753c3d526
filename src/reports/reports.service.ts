// The weekly report (GET /api/reports/weekly): checks the period, reads the workspace's figures for
// it, and hands them to the PDF writer. The figures are read before the first byte is sent, so a
// failure is still an HTTP error and not a truncated document.
import { Effect } from "effect"
import { Clock } from "../platform/Clock.js"
import { Db } from "../platform/Db.js"
import { ValidationFailed } from "../platform/errors.js"
import * as repo from "./reports.repo.js"
import { type Period, parsePeriod, type WeeklyFigures, weeklyFigures } from "./weekly.figures.js"

/** from/to as sent → the period, or 422 naming the faulty field. */
export function periodOf(from: string, to: string): Effect.Effect<Period, ValidationFailed> {
  const p = parsePeriod(from, to)
  if (!("errors" in p)) return Effect.succeed(p)
  const first = p.errors[0]!
  return Effect.fail(
    new ValidationFailed({ message: `invalid query: ${first.field}: ${first.message}`, errors: p.errors }),
  )
}

export const weeklyReport = (tenantId: number, period: Period): Effect.Effect<WeeklyFigures, never, Db | Clock> =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const now = (yield* Clock).now()
    const r = period.range
    const [tenant, totals, outcomes, perDay, approvals] = yield* Effect.promise(() =>
      Promise.all([
        repo.findTenant(sql, tenantId),
        repo.callTotals(sql, tenantId, r),
        repo.outcomeCounts(sql, tenantId, r),
        repo.callsPerDay(sql, tenantId, r),
        repo.approvalCounts(sql, tenantId, r, now),
      ]),
    )
    if (tenant === undefined)
      return yield* Effect.dieMessage(`tenant ${tenantId} of an authenticated caller is missing`)
    return weeklyFigures({
      workspace: tenant.name,
      currency: tenant.currency,
      period,
      totals,
      outcomes,
      perDay,
      approvals,
      generatedAt: now,
    })
  })

export const reportFilename = (p: { from: string; to: string }) => `parley-report-${p.from}-to-${p.to}.pdf`

const DAY_MS = 86_400_000

/**
 * Calls placed per UTC day over the last `days` days, today included, every day present (zero when
 * none): the console's chart. The same count as the weekly report's bars (reports.repo.ts).
 */
export const recentCallsPerDay = (tenantId: number, days: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const today = (yield* Clock).now().toISOString().slice(0, 10)
    const end = new Date(`${today}T00:00:00Z`).getTime() + DAY_MS
    const range = { start: new Date(end - days * DAY_MS), end: new Date(end) }
    const rows = yield* Effect.promise(() => repo.callsPerDay(sql, tenantId, range))
    const byDay = new Map(rows.map((r) => [r.day, r.calls]))
    const perDay: repo.DayCount[] = []
    for (let t = range.start.getTime(); t < end; t += DAY_MS) {
      const day = new Date(t).toISOString().slice(0, 10)
      perDay.push({ day, calls: byDay.get(day) ?? 0 })
    }
    return { from: perDay[0]!.day, to: today, days: perDay }
  })
