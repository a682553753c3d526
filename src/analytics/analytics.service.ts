// A workflow's campaign analytics over a range of days (GET /api/workflows/{id}/analytics): the
// funnel, outcomes per UTC day, dials and connects by the callee's local weekday and hour, reply latency, spend.
import { Effect } from "effect"
import { calleeTimeZones, DAY, zoneOffsetMs } from "../dialing/timezones.js"
import { Clock } from "../platform/Clock.js"
import { Db } from "../platform/Db.js"
import { NotFound, ValidationFailed } from "../platform/errors.js"
import * as repo from "./analytics.repo.js"

export const DEFAULT_DAYS = 30
export const MAX_DAYS = 400
const DATE = /^\d{4}-\d{2}-\d{2}$/

const invalid = (field: string, message: string) =>
  new ValidationFailed({ message: `${field} ${message}`, errors: [{ field, message }] })

/**
 * An ISO timestamp, or a date: `from` a date is its first instant (UTC), `to` a date the end of it
 * (the next day's first instant), so ?from=2026-01-01&to=2026-01-31 is all of January.
 */
function instant(field: "from" | "to", v: string): Date | ValidationFailed {
  const t = DATE.test(v) ? Date.parse(`${v}T00:00:00Z`) + (field === "to" ? DAY : 0) : Date.parse(v)
  return Number.isFinite(t) && /^\d{4}-/.test(v) ? new Date(t) : invalid(field, "must be an ISO date or timestamp")
}

/** The range asked for: `to` defaults to now and `from` to 30 days before `to`; at most 400 days. */
export const rangeOf = (q: { from?: string | undefined; to?: string | undefined }, now: Date) =>
  Effect.gen(function* () {
    const to = q.to === undefined ? now : instant("to", q.to)
    if (to instanceof ValidationFailed) return yield* Effect.fail(to)
    const from = q.from === undefined ? new Date(to.getTime() - DEFAULT_DAYS * DAY) : instant("from", q.from)
    if (from instanceof ValidationFailed) return yield* Effect.fail(from)
    if (to.getTime() < from.getTime()) return yield* Effect.fail(invalid("to", "must not be before from"))
    if (to.getTime() - from.getTime() > MAX_DAYS * DAY)
      return yield* Effect.fail(invalid("to", `must be at most ${MAX_DAYS} days after from`))
    return { from, to }
  })

const isoDay = (t: number) => new Date(t).toISOString().slice(0, 10)

/** Every UTC day the range touches, oldest first, each with its calls by outcome (`in_progress`: not ended). */
function perDay(range: repo.Range, rows: ReadonlyArray<repo.DayOutcomeRow>) {
  const byDay = new Map<string, Record<string, number>>()
  for (const r of rows) {
    const counts = byDay.get(r.day) ?? {}
    counts[r.outcome ?? "in_progress"] = (counts[r.outcome ?? "in_progress"] ?? 0) + r.calls
    byDay.set(r.day, counts)
  }
  const days: { day: string; total: number; outcomes: Record<string, number> }[] = []
  const first = Date.parse(`${isoDay(range.from.getTime())}T00:00:00Z`)
  for (let t = first; t < range.to.getTime(); t += DAY) {
    const outcomes = byDay.get(isoDay(t)) ?? {}
    days.push({ day: isoDay(t), total: Object.values(outcomes).reduce((a, b) => a + b, 0), outcomes })
  }
  return days
}

/**
 * A 7×24 grid (Monday first, hours 0–23) of dials and connects in the callee's local time: each
 * slot's number prefix names the zone (the first of libphonenumber's zones for it, as the calling
 * window reads it; UTC when the number names none), whose offset at the slot shifts it.
 */
function hourOfDay(rows: ReadonlyArray<repo.HourPrefixRow>) {
  const grid = () => Array.from({ length: 7 }, () => new Array<number>(24).fill(0))
  const dials = grid()
  const connects = grid()
  const zoneOf = new Map<string, string>()
  for (const r of rows) {
    const prefix = r.phone.slice(0, repo.ZONE_PREFIX_CHARS)
    let tz = zoneOf.get(prefix)
    if (tz === undefined) {
      tz = calleeTimeZones(r.phone)[0] ?? "UTC"
      zoneOf.set(prefix, tz)
    }
    const at = r.slot * 1000
    const local = new Date(at + zoneOffsetMs(tz, at))
    const weekday = (local.getUTCDay() + 6) % 7
    const hour = local.getUTCHours()
    dials[weekday]![hour]! += r.dials
    connects[weekday]![hour]! += r.connects
  }
  return { weekdays: ["mon", "tue", "wed", "thu", "fri", "sat", "sun"], dials, connects }
}

export const workflowAnalytics = (
  tenantId: number,
  workflowId: number,
  q: { from?: string | undefined; to?: string | undefined },
) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const range = yield* rangeOf(q, (yield* Clock).now())
    const w = yield* Effect.promise(() => repo.workflowOfTenant(sql, tenantId, workflowId))
    if (w === undefined) return yield* Effect.fail(new NotFound({ message: `workflow ${workflowId} not found` }))
    // Four independent reads, each on a connection of its own where the pool has them.
    const plan = repo.slotPlan(range)
    const [f, days, slots, latency] = yield* Effect.promise(() =>
      Promise.all([
        repo.funnel(sql, workflowId, range),
        repo.daysOfSlots(sql, workflowId, plan),
        repo.prefixesOfSlots(sql, workflowId, plan),
        repo.replyLatency(sql, workflowId, range),
      ]),
    )
    const spend = days.reduce((sum, d) => sum + Number(d.cost_minor) + Number(d.analysis_minor), 0)
    return {
      workflow_id: workflowId,
      from: range.from.toISOString(),
      to: range.to.toISOString(),
      funnel: {
        targets: f.targets,
        dialed: f.dialed,
        answered: f.answered,
        human: f.human,
        voicemail: f.answered - f.human,
        talked_30s: f.talked,
        agreed: f.agreed,
      },
      outcomes_over_time: perDay(range, days),
      hour_of_day: hourOfDay(slots),
      latency: { n: latency.n, p50: latency.p50, p90: latency.p90, p99: latency.p99 },
      spend_minor: spend,
      currency: w.currency,
    }
  })
