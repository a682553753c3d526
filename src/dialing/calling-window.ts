// The calling window: whether now is inside the workflow's calling hours in every zone the callee
// may be in, and if not, why and when it next is. Pure: time comes in.
import { DEFAULT_CALLING_HOURS, type Schedule, type ScheduleKind } from "../workflows/workflow.schema.js"
import { calleeTimeZones, DAY, DEFAULT_FALLBACK_TZ, MINUTE, mod, zoneOffsetMs } from "./timezones.js"

const WEEKDAY_NAMES = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"] as const
type Weekday = (typeof WEEKDAY_NAMES)[number]

export type WindowClosedReason = "outside_calling_hours" | "not_a_calling_day" | "before_start_at"

export type WindowCheck =
  | { readonly ok: true; readonly zones: readonly string[] }
  | {
      readonly ok: false
      readonly reason: WindowClosedReason
      /** Epoch ms when every candidate zone is inside the window again. */
      readonly nextOpenAt: number
      readonly detail: string
      readonly zones: readonly string[]
    }
  | {
      readonly ok: false
      /** No instant within a year is inside the window in every zone at once. */
      readonly reason: "window_never_open"
      readonly nextOpenAt: null
      readonly detail: string
      readonly zones: readonly string[]
    }

export interface WindowCheckInput {
  readonly phoneE164: string
  readonly schedule: Schedule
  readonly scheduleKind: ScheduleKind
  /** Epoch ms. */
  readonly now: number
  /** Where a number with no zone of its own is placed; defaults to schedule.timezone, then UTC. */
  readonly fallbackTz?: string
  /** CALLING_HOURS=any: the window and days are lifted (a once schedule's start_at still holds). */
  readonly any: boolean
}

interface Window {
  readonly startMin: number
  readonly endMin: number
  readonly days: ReadonlySet<Weekday> | null
}

const parseClock = (hhmm: string): number | undefined => {
  const m = /^(\d{1,2}):(\d{2})$/.exec(hhmm)
  if (m === null) return undefined
  const min = Number(m[1]) * 60 + Number(m[2])
  return Number(m[2]) < 60 && min <= 24 * 60 ? min : undefined
}

const fmtMin = (min: number): string =>
  `${String(Math.floor(min / 60)).padStart(2, "0")}:${String(min % 60).padStart(2, "0")}`

interface LocalView {
  readonly minute: number
  readonly weekday: Weekday
}

function localView(tz: string, t: number): LocalView {
  const local = t + zoneOffsetMs(tz, t)
  const dayIndex = Math.floor(local / DAY)
  // 1970-01-01 was a Thursday.
  return { minute: Math.floor(mod(local, DAY) / MINUTE), weekday: WEEKDAY_NAMES[mod(dayIndex + 4, 7)] ?? "sun" }
}

const dayOk = (w: Window, v: LocalView): boolean => w.days === null || w.days.has(v.weekday)
const hoursOk = (w: Window, v: LocalView): boolean => v.minute >= w.startMin && v.minute < w.endMin

const openIn = (w: Window, zones: readonly string[], t: number): boolean =>
  zones.every((z) => {
    const v = localView(z, t)
    return dayOk(w, v) && hoursOk(w, v)
  })

/** Instants within [from - 1 day, until + 1 day] where the zone's offset changes (minute precision). */
function transitions(tz: string, from: number, until: number): number[] {
  const out: number[] = []
  // Minute-aligned samples, so the bisection lands on the transition itself.
  let prevT = from - mod(from, MINUTE) - DAY
  let prevOff = zoneOffsetMs(tz, prevT)
  for (let t = prevT + DAY; t <= until + DAY; t += DAY) {
    const off = zoneOffsetMs(tz, t)
    if (off !== prevOff) {
      let lo = prevT
      let hi = t
      while (hi - lo > MINUTE) {
        const mid = lo + Math.floor((hi - lo) / 2 / MINUTE) * MINUTE
        if (zoneOffsetMs(tz, mid) === prevOff) lo = mid
        else hi = mid
      }
      out.push(hi)
    }
    prevT = t
    prevOff = off
  }
  return out
}

/**
 * The earliest instant in [from, until) inside the window in every zone, or null. Such an instant
 * is `from` itself or one where some zone turns open, which happens only at a local start time or
 * at an offset change (a DST jump over the start, or a fall-back into the window); those are the
 * only candidates tried.
 */
function searchOpen(w: Window, zones: readonly string[], from: number, until: number): number | null {
  const candidates: number[] = [from]
  for (const tz of zones) {
    const ts = transitions(tz, from, until)
    candidates.push(...ts)
    const offsets = new Set<number>([zoneOffsetMs(tz, from), zoneOffsetMs(tz, until)])
    for (const t of ts) offsets.add(zoneOffsetMs(tz, t))
    const firstLocalMidnight = Math.floor((from + zoneOffsetMs(tz, from)) / DAY) * DAY - DAY
    for (let midnight = firstLocalMidnight; midnight <= until + 2 * DAY; midnight += DAY) {
      const wall = midnight + w.startMin * MINUTE
      for (const off of offsets) candidates.push(wall - off)
    }
  }
  candidates.sort((a, b) => a - b)
  let last = Number.NaN
  for (const t of candidates) {
    if (t < from || t >= until || t === last) continue
    last = t
    if (openIn(w, zones, t)) return t
  }
  return null
}

// One nextOpenAt answers for every later `from` up to itself, and targets share zone sets, so a
// held audience of thousands costs one search per zone set.
const nextOpenCache = new Map<string, { readonly from: number; readonly at: number | null }>()

function nextOpen(w: Window, zones: readonly string[], from: number): number | null {
  const days = w.days === null ? "*" : [...w.days].sort().join(",")
  const key = `${w.startMin}-${w.endMin}|${days}|${zones.join(",")}`
  const hit = nextOpenCache.get(key)
  if (hit !== undefined && hit.at !== null && from >= hit.from && from <= hit.at) return hit.at
  if (hit !== undefined && hit.at === null && from >= hit.from && from - hit.from < DAY) return null
  // A week of days (plus one) covers every weekday; if the zones never meet in that time, look
  // on through a year of DST changes before calling the window never open.
  const at = searchOpen(w, zones, from, from + 8 * DAY) ?? searchOpen(w, zones, from + 8 * DAY, from + 370 * DAY)
  if (nextOpenCache.size > 10_000) nextOpenCache.clear()
  nextOpenCache.set(key, { from, at })
  return at
}

const describeLocal = (tz: string, v: LocalView): string => `${tz} ${v.weekday} ${fmtMin(v.minute)}`

/**
 * Whether `now` is inside the workflow's calling window in every zone the callee may be in
 * (TCPA-style: never call someone who might be outside hours), and if not, why and when it next
 * is. Windows are [start, end) on local wall clocks; `days`, when set, are each zone's local day
 * and hold for every schedule kind; a `once` schedule waits for `start_at`.
 */
export function callingWindowCheck(input: WindowCheckInput): WindowCheck {
  const { schedule, scheduleKind, now } = input
  const zones = calleeTimeZones(input.phoneE164, input.fallbackTz ?? schedule.timezone ?? DEFAULT_FALLBACK_TZ)
  const startAtRaw =
    scheduleKind === "once" && schedule.start_at !== undefined ? Date.parse(schedule.start_at) : Number.NaN
  const startAt = Number.isFinite(startAtRaw) ? startAtRaw : null
  const beforeStart = startAt !== null && now < startAt
  if (input.any) {
    if (!beforeStart) return { ok: true, zones }
    return {
      ok: false,
      reason: "before_start_at",
      nextOpenAt: startAt,
      detail: `start_at ${new Date(startAt).toISOString()}`,
      zones,
    }
  }

  const hours = schedule.calling_hours ?? DEFAULT_CALLING_HOURS
  const startMin = parseClock(hours.start)
  const endMin = parseClock(hours.end)
  if (startMin === undefined || endMin === undefined || startMin >= endMin) {
    return {
      ok: false,
      reason: "window_never_open",
      nextOpenAt: null,
      detail: `calling_hours ${hours.start}–${hours.end} is not a window`,
      zones,
    }
  }
  const w: Window = { startMin, endMin, days: schedule.days === undefined ? null : new Set(schedule.days) }
  const span = `${hours.start}–${hours.end}`

  if (!beforeStart) {
    const views = zones.map((zone) => ({ zone, view: localView(zone, now) }))
    const offDay = views.find(({ view }) => !dayOk(w, view))
    const offHours = views.find(({ view }) => !hoursOk(w, view))
    const closed = offDay ?? offHours
    if (closed === undefined) return { ok: true, zones }
    const at = nextOpen(w, zones, now)
    if (at === null) return neverOpen(zones, span, w)
    const local = describeLocal(closed.zone, closed.view)
    return offDay !== undefined
      ? {
          ok: false,
          reason: "not_a_calling_day",
          nextOpenAt: at,
          detail: `${local} is not a calling day (${[...(w.days ?? [])].join(", ")})`,
          zones,
        }
      : { ok: false, reason: "outside_calling_hours", nextOpenAt: at, detail: `${local} is outside ${span}`, zones }
  }

  const at = nextOpen(w, zones, startAt)
  if (at === null) return neverOpen(zones, span, w)
  return {
    ok: false,
    reason: "before_start_at",
    nextOpenAt: at,
    detail: `start_at ${new Date(startAt).toISOString()}`,
    zones,
  }
}

const neverOpen = (zones: readonly string[], span: string, w: Window): WindowCheck => ({
  ok: false,
  reason: "window_never_open",
  nextOpenAt: null,
  detail:
    `${span}${w.days === null ? "" : ` on ${[...w.days].join(", ")}`}` +
    ` is never open in all of ${zones.join(", ")} at once`,
  zones,
})
