// The weekly report's period (from/to dates, inclusive, UTC) and its figures: what the database
// counted, turned into rates, minutes, money and one entry per day. Pure data, no drawing.

import type { FieldError } from "../platform/errors.js"
import type { Currency } from "../platform/money.js"
import { formatAmount } from "../platform/money.js"
import type { ApprovalCounts, CallTotals, DayCount, OutcomeCount, Range } from "./reports.repo.js"

/** Longest period a report covers, in days (a leap year). */
export const MAX_REPORT_DAYS = 366

const DAY_MS = 86_400_000

export interface Period {
  /** YYYY-MM-DD, inclusive. */
  readonly from: string
  /** YYYY-MM-DD, inclusive. */
  readonly to: string
  readonly days: number
  readonly range: Range
}

/** A calendar date written YYYY-MM-DD → midnight UTC; undefined for anything else (2025-02-30 too). */
export function parseDate(text: string): Date | undefined {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(text)) return undefined
  const d = new Date(`${text}T00:00:00Z`)
  return Number.isNaN(d.getTime()) || d.toISOString().slice(0, 10) !== text ? undefined : d
}

/** The period of from..to, or the 422 field errors: malformed dates, to before from, over 366 days. */
export function parsePeriod(from: string, to: string): Period | { readonly errors: FieldError[] } {
  const start = parseDate(from)
  const last = parseDate(to)
  const errors: FieldError[] = []
  if (start === undefined) errors.push({ field: "from", message: "must be a date written YYYY-MM-DD" })
  if (last === undefined) errors.push({ field: "to", message: "must be a date written YYYY-MM-DD" })
  if (start === undefined || last === undefined) return { errors }
  const days = Math.round((last.getTime() - start.getTime()) / DAY_MS) + 1
  if (days < 1) return { errors: [{ field: "to", message: "must not be before from" }] }
  if (days > MAX_REPORT_DAYS)
    return {
      errors: [
        { field: "to", message: `the period may cover at most ${MAX_REPORT_DAYS} days (this one covers ${days})` },
      ],
    }
  return { from, to, days, range: { start, end: new Date(last.getTime() + DAY_MS) } }
}

/** What the repo counted for a period. */
export interface WeeklyData {
  readonly workspace: string
  readonly currency: Currency
  readonly period: Period
  readonly totals: CallTotals
  readonly outcomes: ReadonlyArray<OutcomeCount>
  readonly perDay: ReadonlyArray<DayCount>
  readonly approvals: ApprovalCounts
  readonly generatedAt: Date
}

export interface WeeklyFigures {
  readonly workspace: string
  readonly currency: Currency
  readonly period: { readonly from: string; readonly to: string; readonly days: number }
  readonly generated_at: string
  readonly calls: {
    readonly placed: number
    readonly connected: number
    /** Connected / placed in percent, one decimal; null when nothing was placed. */
    readonly connect_rate_pct: number | null
    readonly connected_seconds: number
    /** connected_seconds / 60, one decimal. */
    readonly minutes_talked: number
    readonly spend_minor: number
  }
  /** The same numbers as people read them. */
  readonly display: {
    readonly placed: string
    readonly connected: string
    readonly connect_rate: string
    readonly minutes_talked: string
    readonly spend: string
  }
  readonly approvals: ApprovalCounts
  /** Most frequent first; they add up to calls.placed. */
  readonly outcomes: ReadonlyArray<{ readonly outcome: string; readonly calls: number; readonly share_pct: number }>
  /** Every day of the period, in order, zero where nothing was placed. */
  readonly per_day: ReadonlyArray<DayCount>
}

const oneDecimal = (x: number) => Math.round(x * 10) / 10
const count = (n: number) => n.toLocaleString("en-US")

export function weeklyFigures(d: WeeklyData): WeeklyFigures {
  const { placed, connected, connected_seconds, spend_minor } = d.totals
  const rate = placed === 0 ? null : oneDecimal((connected / placed) * 100)
  const minutes = oneDecimal(connected_seconds / 60)
  const byDay = new Map(d.perDay.map((x) => [x.day, x.calls]))
  const perDay: DayCount[] = []
  for (let i = 0; i < d.period.days; i++) {
    const day = new Date(d.period.range.start.getTime() + i * DAY_MS).toISOString().slice(0, 10)
    perDay.push({ day, calls: byDay.get(day) ?? 0 })
  }
  const outcomes = [...d.outcomes]
    .sort((a, b) => b.calls - a.calls || a.outcome.localeCompare(b.outcome))
    .map((o) => ({
      outcome: o.outcome,
      calls: o.calls,
      share_pct: placed === 0 ? 0 : oneDecimal((o.calls / placed) * 100),
    }))
  return {
    workspace: d.workspace,
    currency: d.currency,
    period: { from: d.period.from, to: d.period.to, days: d.period.days },
    generated_at: d.generatedAt.toISOString(),
    calls: { placed, connected, connect_rate_pct: rate, connected_seconds, minutes_talked: minutes, spend_minor },
    display: {
      placed: count(placed),
      connected: count(connected),
      connect_rate: rate === null ? "n/a" : `${rate.toFixed(1)}%`,
      minutes_talked: minutes.toLocaleString("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 }),
      spend: formatAmount(spend_minor, d.currency),
    },
    approvals: d.approvals,
    outcomes,
    per_day: perDay,
  }
}
