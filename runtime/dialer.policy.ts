// The dialer's pure decisions: which time zones a callee may be in, whether now is inside the
// calling window in every one of them (and when it next is), whether a failed attempt is retried,
// and the shape of the decision-log entry each of those becomes. No I/O, no timers: time comes in.
import { parsePhoneNumberFromString } from "libphonenumber-js/max"
import { DEFAULT_CALLING_HOURS, type Schedule, type ScheduleKind } from "../src/workflows/workflow.schema.js"

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR

/** Used when neither the number nor the workflow names a zone. */
export const DEFAULT_FALLBACK_TZ = "UTC"

// ---------------------------------------------------------------------------------------------
// Time zones, DST-correct through Intl (no tz library)

const formatters = new Map<string, Intl.DateTimeFormat | null>()

function formatter(tz: string): Intl.DateTimeFormat | null {
  let f = formatters.get(tz)
  if (f === undefined) {
    try {
      f = new Intl.DateTimeFormat("en-US", {
        timeZone: tz,
        hourCycle: "h23",
        year: "numeric",
        month: "numeric",
        day: "numeric",
        hour: "numeric",
        minute: "numeric",
        second: "numeric",
      })
    } catch {
      f = null
    }
    formatters.set(tz, f)
  }
  return f
}

/** Whether this runtime's ICU knows the zone (tables may name zones an older ICU lacks). */
export const isKnownTimeZone = (tz: string): boolean => formatter(tz) !== null

const mod = (a: number, n: number): number => ((a % n) + n) % n

function computeOffset(tz: string, t: number): number {
  const f = formatter(tz)
  if (f === null) throw new RangeError(`unknown time zone ${tz}`)
  const whole = t - mod(t, 1000)
  let y = 1970
  let mo = 1
  let d = 1
  let h = 0
  let mi = 0
  let s = 0
  for (const p of f.formatToParts(whole)) {
    switch (p.type) {
      case "year":
        y = Number(p.value)
        break
      case "month":
        mo = Number(p.value)
        break
      case "day":
        d = Number(p.value)
        break
      case "hour":
        h = Number(p.value)
        break
      case "minute":
        mi = Number(p.value)
        break
      case "second":
        s = Number(p.value)
        break
      default:
        break
    }
  }
  return Date.UTC(y, mo - 1, d, h, mi, s) - whole
}

// Offsets per zone per UTC hour: formatToParts costs ~3 µs and a search asks for the same hours
// again and again. An hour is cached only when both its ends agree (no transition inside it).
const offsetCache = new Map<string, Map<number, number>>()
let offsetCacheSize = 0

/** The zone's offset from UTC at instant `t`, in ms (local wall clock = t + offset). */
export function zoneOffsetMs(tz: string, t: number): number {
  const hour = Math.floor(t / HOUR)
  let byHour = offsetCache.get(tz)
  const hit = byHour?.get(hour)
  if (hit !== undefined) return hit
  const a = computeOffset(tz, hour * HOUR)
  const b = computeOffset(tz, hour * HOUR + HOUR - 1)
  if (a !== b) return computeOffset(tz, t)
  if (offsetCacheSize > 200_000) {
    offsetCache.clear()
    offsetCacheSize = 0
  }
  if (byHour === undefined) {
    byHour = new Map()
    offsetCache.set(tz, byHour)
  }
  byHour.set(hour, a)
  offsetCacheSize++
  return a
}

// ---------------------------------------------------------------------------------------------
// Callee time zones

const NY = "America/New_York"
const CHI = "America/Chicago"
const DEN = "America/Denver"
const PHX = "America/Phoenix"
const LA = "America/Los_Angeles"
const ANC = "America/Anchorage"
const HNL = "Pacific/Honolulu"
const HAL = "America/Halifax"
const TOR = "America/Toronto"
const WPG = "America/Winnipeg"
const REG = "America/Regina"
const EDM = "America/Edmonton"
const VAN = "America/Vancouver"
const STJ = "America/St_Johns"

/** Zones of the countries that span several, listed by their main zones. */
const MULTI_ZONE: Readonly<Record<string, readonly string[]>> = {
  US: [NY, CHI, DEN, PHX, LA, ANC, HNL],
  CA: [STJ, HAL, TOR, WPG, REG, EDM, VAN],
  AU: ["Australia/Sydney", "Australia/Brisbane", "Australia/Adelaide", "Australia/Darwin", "Australia/Perth"],
  NZ: ["Pacific/Auckland", "Pacific/Chatham"],
  ES: ["Europe/Madrid", "Atlantic/Canary"],
  PT: ["Europe/Lisbon", "Atlantic/Azores"],
  EC: ["America/Guayaquil", "Pacific/Galapagos"],
  ID: ["Asia/Jakarta", "Asia/Makassar", "Asia/Jayapura"],
  // RU, BR, MX, KZ, CL, … come from ICU's own per-region lists (regionZones below).
}

/** Countries in one zone, for the regions callers most often dial (others: ICU's list). */
const SINGLE_ZONE: Readonly<Record<string, string>> = {
  IN: "Asia/Kolkata",
  GB: "Europe/London",
  IE: "Europe/Dublin",
  JE: "Europe/Jersey",
  GG: "Europe/Guernsey",
  IM: "Europe/Isle_of_Man",
  SG: "Asia/Singapore",
  AE: "Asia/Dubai",
  SA: "Asia/Riyadh",
  QA: "Asia/Qatar",
  KW: "Asia/Kuwait",
  BH: "Asia/Bahrain",
  OM: "Asia/Muscat",
  PK: "Asia/Karachi",
  BD: "Asia/Dhaka",
  LK: "Asia/Colombo",
  NP: "Asia/Kathmandu",
  CN: "Asia/Shanghai",
  HK: "Asia/Hong_Kong",
  TW: "Asia/Taipei",
  JP: "Asia/Tokyo",
  KR: "Asia/Seoul",
  PH: "Asia/Manila",
  MY: "Asia/Kuala_Lumpur",
  TH: "Asia/Bangkok",
  VN: "Asia/Ho_Chi_Minh",
  IL: "Asia/Jerusalem",
  TR: "Europe/Istanbul",
  FR: "Europe/Paris",
  DE: "Europe/Berlin",
  IT: "Europe/Rome",
  NL: "Europe/Amsterdam",
  BE: "Europe/Brussels",
  CH: "Europe/Zurich",
  AT: "Europe/Vienna",
  SE: "Europe/Stockholm",
  NO: "Europe/Oslo",
  DK: "Europe/Copenhagen",
  FI: "Europe/Helsinki",
  PL: "Europe/Warsaw",
  CZ: "Europe/Prague",
  GR: "Europe/Athens",
  RO: "Europe/Bucharest",
  HU: "Europe/Budapest",
  UA: "Europe/Kyiv",
  EG: "Africa/Cairo",
  ZA: "Africa/Johannesburg",
  NG: "Africa/Lagos",
  KE: "Africa/Nairobi",
  GH: "Africa/Accra",
  AR: "America/Argentina/Buenos_Aires",
  CO: "America/Bogota",
  PE: "America/Lima",
  // NANP members other than the US and Canada have their own region codes in libphonenumber.
  PR: "America/Puerto_Rico",
  DO: "America/Santo_Domingo",
  JM: "America/Jamaica",
  BS: "America/Nassau",
  TT: "America/Port_of_Spain",
  BB: "America/Barbados",
  BM: "Atlantic/Bermuda",
  KY: "America/Cayman",
  VI: "America/St_Thomas",
  GU: "Pacific/Guam",
  MP: "Pacific/Saipan",
  AS: "Pacific/Pago_Pago",
}

/**
 * NANP area codes → zones, for the codes we are sure of. A code whose territory straddles a zone
 * line lists every zone it touches (the window is then checked in all of them); a code missing
 * here means "anywhere in the country". Mobile numbers keep their area code when people move, so
 * this narrows by where the number was issued, which is the industry's (and TCPA safe harbour's)
 * usual reading.
 */
const NANP_AREA_ZONES: ReadonlyArray<readonly [readonly string[], string]> = [
  // US Eastern
  [[NY], "203 475 860 959 302 202 771 239 305 321 324 352 386 407 561 645 656 689 727 754 772 786 813 863 904 941 954"],
  [[NY], "229 404 470 478 678 706 762 770 912 943 260 317 463 765 502 606 859 207 240 301 410 443 667"],
  [[NY], "339 351 413 508 617 774 781 857 978 231 248 269 313 517 586 616 734 810 947 989 603"],
  [[NY], "201 551 609 640 732 848 856 862 908 973 212 315 332 347 363 516 518 585 607 631 646 680 716 718 838 845 914 917 929 934"],
  [[NY], "252 336 704 743 828 910 919 980 984 216 220 234 283 326 330 380 419 440 513 567 614 740 937"],
  [[NY], "215 223 267 272 412 445 484 570 582 610 717 724 814 835 878 401 803 839 843 854 864 865 802"],
  [[NY], "276 434 540 571 703 757 804 826 948 304 681"],
  // US Eastern/Central straddles: FL panhandle, IN, KY, MI upper peninsula, TN, AL (Phenix City)
  [[CHI, NY], "850 448 574 812 930 270 364 906 423 931 334"],
  // US Central
  [[CHI], "205 251 256 659 938 327 479 501 870 217 224 309 312 331 447 464 618 630 708 730 773 779 815 847 872 219"],
  [[CHI], "319 515 563 641 712 316 913 225 318 337 504 985 218 320 507 612 651 763 952 228 601 662 769"],
  [[CHI], "314 417 557 573 636 660 816 975 402 531 405 539 572 580 918 615 629 731 901 262 274 414 534 608 715 920"],
  [[CHI], "210 214 254 281 325 346 361 409 430 469 512 682 713 726 737 806 817 830 832 903 936 940 945 956 972 979"],
  // US Central/Mountain straddles: KS, NE, ND, SD, west Texas
  [[CHI, DEN], "620 785 308 701 605 432"],
  // US Mountain, Arizona (no DST, except the Navajo Nation in 928)
  [[DEN], "303 719 720 970 983 406 505 575 385 435 801 307 915"],
  [[DEN, LA], "208 986 458 541 775"],
  [[PHX], "480 520 602 623"],
  [[PHX, DEN], "928"],
  // US Pacific, Alaska, Hawaii
  [[LA], "209 213 279 310 323 341 350 408 415 424 442 510 530 559 562 619 626 628 650 657 661 669 707 714 747"],
  [[LA], "760 805 818 820 831 840 858 909 916 925 949 951 702 725 503 971 206 253 360 425 509 564"],
  [[ANC], "907"],
  [[HNL], "808"],
  // Canada
  [[TOR], "226 249 289 343 365 382 416 437 519 548 613 647 683 705 742 753 905 942 263 354 438 450 468 514 579 819 873"],
  [[TOR, HAL], "367 418 581"],
  [[TOR, WPG], "807"],
  [[WPG], "204 431 584"],
  [[REG, EDM], "306 474 639"],
  [[EDM], "368 403 587 780 825"],
  [[VAN], "604"],
  [[VAN, EDM], "236 250 257 672 778"],
  [[HAL], "506 428 782 902"],
  [[STJ, HAL], "709 879"],
  [["America/Whitehorse", EDM, WPG, TOR], "867"],
]

const AREA_ZONES: ReadonlyMap<string, readonly string[]> = (() => {
  const m = new Map<string, readonly string[]>()
  for (const [zones, codes] of NANP_AREA_ZONES) for (const code of codes.split(" ")) m.set(code, zones)
  return m
})()

/** Australian geographic numbers by their first national digit; mobiles (4) and 1300/1800 are anywhere. */
const AU_PREFIX_ZONES: Readonly<Record<string, readonly string[]>> = {
  "2": ["Australia/Sydney"],
  "3": ["Australia/Melbourne"],
  "7": ["Australia/Brisbane"],
  "8": ["Australia/Adelaide", "Australia/Darwin", "Australia/Perth"],
}

/** ICU's own list of a region's zones (CLDR), for countries the tables above leave out. */
function regionZones(country: string): readonly string[] {
  try {
    const locale = new Intl.Locale(`und-${country}`) as Intl.Locale & {
      timeZones?: readonly string[]
      getTimeZones?: () => readonly string[]
    }
    return locale.getTimeZones?.() ?? locale.timeZones ?? []
  } catch {
    return []
  }
}

function countryZones(country: string, nationalNumber: string): readonly string[] {
  if (country === "US" || country === "CA") {
    const byArea = AREA_ZONES.get(nationalNumber.slice(0, 3))
    if (byArea !== undefined) return byArea
  }
  if (country === "AU") {
    const byPrefix = AU_PREFIX_ZONES[nationalNumber.slice(0, 1)]
    if (byPrefix !== undefined) return byPrefix
  }
  const single = SINGLE_ZONE[country]
  if (single !== undefined) return [single]
  return MULTI_ZONE[country] ?? regionZones(country)
}

/**
 * The IANA zones the callee may be in, judged from the number's country (and, for NANP and
 * Australian numbers, its area code). A number with no country (unparsable, non-geographic
 * +800, an unassigned NANP code) is placed in `fallbackTz`, except that any +1 number is at least
 * somewhere in the US or Canada.
 */
export function calleeTimeZones(phoneE164: string, fallbackTz: string = DEFAULT_FALLBACK_TZ): string[] {
  const p = parsePhoneNumberFromString(phoneE164)
  let zones: readonly string[] = []
  if (p?.country !== undefined) zones = countryZones(p.country, p.nationalNumber)
  else if (p?.countryCallingCode === "1") zones = [...(MULTI_ZONE.US ?? []), ...(MULTI_ZONE.CA ?? [])]
  const known = [...new Set(zones)].filter(isKnownTimeZone)
  return known.length > 0 ? known : [fallbackTz]
}

// ---------------------------------------------------------------------------------------------
// Calling window

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

const fmtMin = (min: number): string => `${String(Math.floor(min / 60)).padStart(2, "0")}:${String(min % 60).padStart(2, "0")}`

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
  const startAtRaw = scheduleKind === "once" && schedule.start_at !== undefined ? Date.parse(schedule.start_at) : Number.NaN
  const startAt = Number.isFinite(startAtRaw) ? startAtRaw : null
  const beforeStart = startAt !== null && now < startAt
  if (input.any) {
    if (!beforeStart) return { ok: true, zones }
    return { ok: false, reason: "before_start_at", nextOpenAt: startAt, detail: `start_at ${new Date(startAt).toISOString()}`, zones }
  }

  const hours = schedule.calling_hours ?? DEFAULT_CALLING_HOURS
  const startMin = parseClock(hours.start)
  const endMin = parseClock(hours.end)
  if (startMin === undefined || endMin === undefined || startMin >= endMin) {
    return { ok: false, reason: "window_never_open", nextOpenAt: null, detail: `calling_hours ${hours.start}–${hours.end} is not a window`, zones }
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
      ? { ok: false, reason: "not_a_calling_day", nextOpenAt: at, detail: `${local} is not a calling day (${[...(w.days ?? [])].join(", ")})`, zones }
      : { ok: false, reason: "outside_calling_hours", nextOpenAt: at, detail: `${local} is outside ${span}`, zones }
  }

  const at = nextOpen(w, zones, startAt)
  if (at === null) return neverOpen(zones, span, w)
  return { ok: false, reason: "before_start_at", nextOpenAt: at, detail: `start_at ${new Date(startAt).toISOString()}`, zones }
}

const neverOpen = (zones: readonly string[], span: string, w: Window): WindowCheck => ({
  ok: false,
  reason: "window_never_open",
  nextOpenAt: null,
  detail: `${span}${w.days === null ? "" : ` on ${[...w.days].join(", ")}`} is never open in all of ${zones.join(", ")} at once`,
  zones,
})

// ---------------------------------------------------------------------------------------------
// Retries

/** Outcomes another attempt may change: the line was busy, nobody answered, the carrier failed. */
export const RETRYABLE_OUTCOMES = ["busy", "no_answer", "failed"] as const
export type RetryableOutcome = (typeof RETRYABLE_OUTCOMES)[number]
const isRetryable = (o: string): o is RetryableOutcome => (RETRYABLE_OUTCOMES as readonly string[]).includes(o)

export type RetryReason = `${RetryableOutcome}_retry_scheduled` | "max_attempts_reached" | "final_outcome"

export type RetryDecision =
  | { readonly retry: true; readonly at: number; readonly delayMs: number; readonly reason: RetryReason }
  | { readonly retry: false; readonly reason: RetryReason }

export interface RetryInput {
  /** The finished attempt's outcome (busy, no_answer, failed, answered, voicemail, …). */
  readonly outcome: string
  /** 1-based number of the attempt that just finished. */
  readonly attempt: number
  readonly maxAttempts?: number
  readonly baseBackoffMs?: number
  /** Cap on one backoff before scaling. */
  readonly maxBackoffMs?: number
  /** SIM_TIME_SCALE: multiplies the backoff. */
  readonly timeScale?: number
  readonly now: number
  /** Makes the jitter differ between targets yet repeat for the same one (the target id). */
  readonly seed?: string | number
}

/** FNV-1a, 32 bits: a stable fraction in [0, 1) from a string. */
function unitHash(s: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return (h >>> 0) / 2 ** 32
}

/**
 * Whether a finished attempt is tried again and when: busy/no_answer/failed retry up to
 * `maxAttempts` attempts in all, after base·2^(attempt−1) ±10% (deterministic in seed and
 * attempt), times `timeScale`; anything else is final.
 */
export function retryDecision(input: RetryInput): RetryDecision {
  const { outcome, now } = input
  const maxAttempts = input.maxAttempts ?? 3
  const base = input.baseBackoffMs ?? 30 * MINUTE
  const cap = input.maxBackoffMs ?? DAY
  const scale = input.timeScale ?? 1
  if (!(scale >= 0) || !Number.isFinite(scale)) throw new RangeError(`timeScale must be a non-negative number, got ${scale}`)
  if (!isRetryable(outcome)) return { retry: false, reason: "final_outcome" }
  const attempt = Math.max(1, Math.floor(input.attempt))
  if (attempt >= maxAttempts) return { retry: false, reason: "max_attempts_reached" }
  const jitter = (unitHash(`${input.seed ?? ""}:${attempt}`) * 2 - 1) * 0.1
  const delayMs = Math.round(Math.min(cap, base * 2 ** (attempt - 1)) * (1 + jitter) * scale)
  return { retry: true, at: now + delayMs, delayMs, reason: `${outcome}_retry_scheduled` }
}

// ---------------------------------------------------------------------------------------------
// Decision log

export type TargetId = number | string
export type DialDecisionKind = "dial" | "skip" | "hold" | "retry" | "stop"

/** One line of the decision log: what the dialer did with a target, why, and at what cost. */
export interface DialDecision {
  readonly targetId: TargetId
  /** Epoch ms. */
  readonly at: number
  readonly decision: DialDecisionKind
  /** A short snake_case token (outside_calling_hours, busy_retry_scheduled, dnc_listed, …). */
  readonly reason: string
  readonly detail: Record<string, unknown>
  /** Money reserved or spent on this decision, in minor units; null when none. */
  readonly costMinor: number | null
}

const decisionOf =
  (decision: DialDecisionKind) =>
  (targetId: TargetId, at: number, reason: string, detail: Record<string, unknown> = {}, costMinor: number | null = null): DialDecision => ({
    targetId,
    at,
    decision,
    reason,
    detail,
    costMinor,
  })

/** Constructors, so every decision is built the same way. */
export const Decision = {
  dial: decisionOf("dial"),
  skip: decisionOf("skip"),
  hold: decisionOf("hold"),
  retry: decisionOf("retry"),
  stop: decisionOf("stop"),

  /** A closed window: held until it opens, or stopped when it never does. */
  fromWindow(targetId: TargetId, at: number, check: Exclude<WindowCheck, { ok: true }>): DialDecision {
    const detail = { zones: check.zones, next_open_at: check.nextOpenAt, detail: check.detail }
    return check.nextOpenAt === null ? Decision.stop(targetId, at, check.reason, detail) : Decision.hold(targetId, at, check.reason, detail)
  },

  /** A finished attempt: retried at its time, or stopped. */
  fromRetry(targetId: TargetId, at: number, r: RetryDecision, detail: Record<string, unknown> = {}, costMinor: number | null = null): DialDecision {
    return r.retry
      ? Decision.retry(targetId, at, r.reason, { ...detail, retry_at: r.at, delay_ms: r.delayMs }, costMinor)
      : Decision.stop(targetId, at, r.reason, detail, costMinor)
  },
} as const
