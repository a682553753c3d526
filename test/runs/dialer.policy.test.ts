// The dialer's pure rules: callee time zones from the number, the calling window in every zone
// (DST change days, days filter, start_at, nextOpenAt against a brute-force scan, never-open
// windows), the retry table, and decision-log constructors.

import fc from "fast-check"
import { describe, expect, it } from "vitest"
import {
  calleeTimeZones,
  callingWindowCheck,
  Decision,
  retryDecision,
  type WindowCheck,
  type WindowCheckInput,
} from "../../src/dialing/dialer.policy.js"
import type { Schedule, ScheduleKind } from "../../src/workflows/workflow.schema.js"

const US_ALL = [
  "America/New_York",
  "America/Chicago",
  "America/Denver",
  "America/Phoenix",
  "America/Los_Angeles",
  "America/Anchorage",
  "Pacific/Honolulu",
]
const CA_ALL = [
  "America/St_Johns",
  "America/Halifax",
  "America/Toronto",
  "America/Winnipeg",
  "America/Regina",
  "America/Edmonton",
  "America/Vancouver",
]
const AU_ALL = ["Australia/Sydney", "Australia/Brisbane", "Australia/Adelaide", "Australia/Darwin", "Australia/Perth"]

const NY_PHONE = "+12125550100"
const US_TOLL_FREE = "+18005550100" // a US number with no area of its own: every US zone
const at = (iso: string) => Date.parse(iso)

const check = (over: Partial<WindowCheckInput> & { now: number }): WindowCheck =>
  callingWindowCheck({ phoneE164: NY_PHONE, schedule: {}, scheduleKind: "immediate", any: false, ...over })

const closed = (r: WindowCheck) => {
  if (r.ok) throw new Error("expected the window to be closed")
  return r
}

describe("calleeTimeZones", () => {
  it.each([
    ["+919876543210", ["Asia/Kolkata"]],
    ["+442071234567", ["Europe/London"]],
    ["+6591234567", ["Asia/Singapore"]],
    ["+971501234567", ["Asia/Dubai"]],
  ])("%s is in %j", (phone, zones) => {
    expect(calleeTimeZones(phone, "UTC")).toEqual(zones)
  })

  it.each([
    ["+12125550100", ["America/New_York"]],
    ["+13125550100", ["America/Chicago"]],
    ["+13035550100", ["America/Denver"]],
    ["+16025550100", ["America/Phoenix"]],
    ["+14155550100", ["America/Los_Angeles"]],
    ["+19075550100", ["America/Anchorage"]],
    ["+18085550100", ["Pacific/Honolulu"]],
    // area codes across a zone line keep every zone they touch
    ["+18505550100", ["America/Chicago", "America/New_York"]],
    ["+19285550100", ["America/Phoenix", "America/Denver"]],
  ])("US area code of %s → %j", (phone, zones) => {
    expect(calleeTimeZones(phone, "UTC")).toEqual(zones)
  })

  it("a US area code the table does not know → every US zone", () => {
    expect(calleeTimeZones(US_TOLL_FREE, "UTC")).toEqual(US_ALL)
  })

  it("Canadian numbers by area code, unknown codes → every Canadian zone", () => {
    expect(calleeTimeZones("+14165550100", "UTC")).toEqual(["America/Toronto"])
    expect(calleeTimeZones("+16045550100", "UTC")).toEqual(["America/Vancouver"])
    expect(calleeTimeZones("+14035550100", "UTC")).toEqual(["America/Edmonton"])
    expect(calleeTimeZones("+19025550100", "UTC")).toEqual(["America/Halifax"])
    expect(calleeTimeZones("+16005550100", "UTC")).toEqual(CA_ALL)
  })

  it("Australian landlines by prefix, mobiles anywhere", () => {
    expect(calleeTimeZones("+61212345678", "UTC")).toEqual(["Australia/Sydney"])
    expect(calleeTimeZones("+61712345678", "UTC")).toEqual(["Australia/Brisbane"])
    expect(calleeTimeZones("+61412345678", "UTC")).toEqual(AU_ALL)
  })

  it("other multi-zone countries come from ICU's region list", () => {
    const ru = calleeTimeZones("+74951234567", "UTC")
    expect(ru).toEqual(expect.arrayContaining(["Europe/Moscow", "Europe/Kaliningrad", "Asia/Vladivostok"]))
  })

  it("no country → the fallback zone; an invalid +1 number is still somewhere in the US or Canada", () => {
    expect(calleeTimeZones("+80012345678", "Europe/Berlin")).toEqual(["Europe/Berlin"])
    expect(calleeTimeZones("not a number", "Asia/Kolkata")).toEqual(["Asia/Kolkata"])
    expect(calleeTimeZones("+15555550100", "Asia/Kolkata")).toEqual([...US_ALL, ...CA_ALL])
  })
})

describe("callingWindowCheck", () => {
  it("is open inside [start, end) in the callee's zone", () => {
    // 2025-06-10: New York is on EDT (UTC-4).
    expect(check({ now: at("2025-06-10T13:00:00Z") }).ok).toBe(true) // 09:00
    expect(check({ now: at("2025-06-11T00:59:59Z") }).ok).toBe(true) // 20:59:59
    const late = closed(check({ now: at("2025-06-11T01:00:00Z") })) // 21:00
    expect(late.reason).toBe("outside_calling_hours")
    expect(late.nextOpenAt).toBe(at("2025-06-11T13:00:00Z"))
    expect(late.detail).toContain("America/New_York")
  })

  it("uses the fallback zone for a number with none, and schedule.timezone when no fallback is given", () => {
    const schedule: Schedule = { timezone: "Asia/Kolkata" }
    // 03:30 UTC is 09:00 in India.
    expect(
      callingWindowCheck({
        phoneE164: "+80012345678",
        schedule,
        scheduleKind: "immediate",
        any: false,
        now: at("2025-06-10T03:30:00Z"),
      }).ok,
    ).toBe(true)
    const r = callingWindowCheck({
      phoneE164: "+80012345678",
      schedule,
      scheduleKind: "immediate",
      any: false,
      now: at("2025-06-10T03:29:00Z"),
    })
    expect(closed(r).nextOpenAt).toBe(at("2025-06-10T03:30:00Z"))
    expect(
      closed(check({ phoneE164: "+80012345678", fallbackTz: "UTC", schedule, now: at("2025-06-10T03:30:00Z") }))
        .nextOpenAt,
    ).toBe(at("2025-06-10T09:00:00Z"))
  })

  it("with several zones: 20:59 in the earliest is open, 21:00 is not, and it reopens at 09:00 in the latest", () => {
    // US-wide number on 2025-06-10 (Tue): 20:59 EDT = 00:59Z = 14:59 HST.
    expect(check({ phoneE164: US_TOLL_FREE, now: at("2025-06-11T00:59:00Z") }).ok).toBe(true)
    const r = closed(check({ phoneE164: US_TOLL_FREE, now: at("2025-06-11T01:00:00Z") }))
    expect(r.reason).toBe("outside_calling_hours")
    // 09:00 HST (UTC-10) on the 11th
    expect(r.nextOpenAt).toBe(at("2025-06-11T19:00:00Z"))
    expect(check({ phoneE164: US_TOLL_FREE, now: at("2025-06-11T19:00:00Z") }).ok).toBe(true)
    expect(check({ phoneE164: US_TOLL_FREE, now: at("2025-06-11T18:59:00Z") }).ok).toBe(false)
  })

  describe("America/New_York on its DST change days", () => {
    it("March 9, 2025 (02:00 EST → 03:00 EDT): the default window opens at 09:00 EDT", () => {
      const r = closed(check({ now: at("2025-03-09T12:59:00Z") })) // 08:59 EDT
      expect(r.nextOpenAt).toBe(at("2025-03-09T13:00:00Z"))
      expect(check({ now: at("2025-03-09T13:00:00Z") }).ok).toBe(true)
      // the evening before, still EST: 21:00 EST is 02:00Z
      const sat = closed(check({ now: at("2025-03-09T02:00:00Z") }))
      expect(sat.nextOpenAt).toBe(at("2025-03-09T13:00:00Z"))
      expect(check({ now: at("2025-03-09T01:59:00Z") }).ok).toBe(true)
      // 21:00 EDT on the change day is 01:00Z
      expect(check({ now: at("2025-03-10T00:59:00Z") }).ok).toBe(true)
      expect(closed(check({ now: at("2025-03-10T01:00:00Z") })).nextOpenAt).toBe(at("2025-03-10T13:00:00Z"))
    })

    it("March 9, 2025: a window across the skipped hour", () => {
      const schedule: Schedule = { calling_hours: { start: "01:00", end: "04:00" } }
      expect(closed(check({ schedule, now: at("2025-03-09T05:59:00Z") })).nextOpenAt).toBe(at("2025-03-09T06:00:00Z"))
      expect(check({ schedule, now: at("2025-03-09T06:59:00Z") }).ok).toBe(true) // 01:59 EST
      expect(check({ schedule, now: at("2025-03-09T07:00:00Z") }).ok).toBe(true) // 03:00 EDT
      // 04:00 EDT
      expect(closed(check({ schedule, now: at("2025-03-09T08:00:00Z") })).nextOpenAt).toBe(at("2025-03-10T05:00:00Z"))
    })

    it("March 9, 2025: a window inside the skipped hour does not exist that day", () => {
      const schedule: Schedule = { calling_hours: { start: "02:00", end: "03:00" } }
      const r = closed(check({ schedule, now: at("2025-03-09T06:59:00Z") })) // 01:59 EST
      expect(r.nextOpenAt).toBe(at("2025-03-10T06:00:00Z")) // 02:00 EDT on the 10th
    })

    it("November 2, 2025 (02:00 EDT → 01:00 EST): the default window opens at 09:00 EST", () => {
      expect(closed(check({ now: at("2025-11-02T13:59:00Z") })).nextOpenAt).toBe(at("2025-11-02T14:00:00Z"))
      expect(check({ now: at("2025-11-02T14:00:00Z") }).ok).toBe(true)
      // 21:00 EST is 02:00Z
      expect(check({ now: at("2025-11-03T01:59:00Z") }).ok).toBe(true)
      expect(closed(check({ now: at("2025-11-03T02:00:00Z") })).nextOpenAt).toBe(at("2025-11-03T14:00:00Z"))
      // the evening before, still EDT: 21:00 EDT is 01:00Z
      expect(closed(check({ now: at("2025-11-02T01:00:00Z") })).nextOpenAt).toBe(at("2025-11-02T14:00:00Z"))
    })

    it("November 2, 2025: the repeated hour is in the window twice", () => {
      const schedule: Schedule = { calling_hours: { start: "01:00", end: "02:00" } }
      // 01:00 EDT
      expect(closed(check({ schedule, now: at("2025-11-02T04:30:00Z") })).nextOpenAt).toBe(at("2025-11-02T05:00:00Z"))
      expect(check({ schedule, now: at("2025-11-02T05:59:00Z") }).ok).toBe(true) // 01:59 EDT
      expect(check({ schedule, now: at("2025-11-02T06:00:00Z") }).ok).toBe(true) // 01:00 EST
      expect(closed(check({ schedule, now: at("2025-11-02T07:00:00Z") })).nextOpenAt).toBe(at("2025-11-03T06:00:00Z"))
    })

    it("November 2, 2025: falling back reopens a window that had just closed", () => {
      const schedule: Schedule = { calling_hours: { start: "00:00", end: "01:30" } }
      const r = closed(check({ schedule, now: at("2025-11-02T05:30:00Z") })) // 01:30 EDT
      expect(r.nextOpenAt).toBe(at("2025-11-02T06:00:00Z")) // 01:00 EST
    })
  })

  it("days are each zone's local day", () => {
    const schedule: Schedule = { days: ["mon", "tue", "wed", "thu", "fri"] }
    // Saturday 2025-03-08 10:00 EST
    const r = closed(check({ schedule, scheduleKind: "window", now: at("2025-03-08T15:00:00Z") }))
    expect(r.reason).toBe("not_a_calling_day")
    expect(r.detail).toContain("sat")
    expect(r.nextOpenAt).toBe(at("2025-03-10T13:00:00Z")) // Monday 09:00 EDT
    // Friday 20:30 EST is already Saturday in UTC; the callee's day is what counts
    expect(check({ schedule, scheduleKind: "window", now: at("2025-03-08T01:30:00Z") }).ok).toBe(true)
  })

  it("days must hold in every zone at once", () => {
    // Mondays only, anywhere in the US: Monday 20:30 EDT (00:30Z Tuesday) is Monday in every zone.
    const schedule: Schedule = { days: ["mon"] }
    expect(
      check({ phoneE164: US_TOLL_FREE, schedule, scheduleKind: "window", now: at("2025-06-10T00:30:00Z") }).ok,
    ).toBe(true)
    // Monday 09:00 EDT is 03:00 Monday in Honolulu: hours, not day.
    const early = closed(
      check({ phoneE164: US_TOLL_FREE, schedule, scheduleKind: "window", now: at("2025-06-09T13:00:00Z") }),
    )
    expect(early.reason).toBe("outside_calling_hours")
    expect(early.nextOpenAt).toBe(at("2025-06-09T19:00:00Z"))
    // 01:00Z Tuesday is Monday 21:00 EDT: closed, and the next Monday inside the window everywhere is a week on
    const r = closed(
      check({ phoneE164: US_TOLL_FREE, schedule, scheduleKind: "window", now: at("2025-06-10T01:00:00Z") }),
    )
    expect(r.nextOpenAt).toBe(at("2025-06-16T19:00:00Z"))
  })

  it("once: not before start_at, then like immediate", () => {
    const schedule: Schedule = { start_at: "2025-06-12T15:00:00Z" }
    const before = closed(check({ schedule, scheduleKind: "once", now: at("2025-06-10T15:00:00Z") }))
    expect(before.reason).toBe("before_start_at")
    expect(before.nextOpenAt).toBe(at("2025-06-12T15:00:00Z"))
    expect(check({ schedule, scheduleKind: "once", now: at("2025-06-12T15:00:00Z") }).ok).toBe(true)
    // start_at at 22:00 New York time: opens at 09:00 the next morning
    const night: Schedule = { start_at: "2025-06-12T22:00:00-04:00" }
    expect(closed(check({ schedule: night, scheduleKind: "once", now: at("2025-06-10T15:00:00Z") })).nextOpenAt).toBe(
      at("2025-06-13T13:00:00Z"),
    )
    // start_at means nothing to other kinds
    expect(check({ schedule, scheduleKind: "immediate", now: at("2025-06-10T15:00:00Z") }).ok).toBe(true)
  })

  it("any=true lifts the window and days, but a once schedule still waits for start_at", () => {
    const schedule: Schedule = { days: ["sun"], calling_hours: { start: "09:00", end: "09:01" } }
    expect(check({ schedule, any: true, now: at("2025-06-10T07:00:00Z") }).ok).toBe(true)
    const once = closed(
      check({
        schedule: { start_at: "2025-06-12T03:00:00Z" },
        scheduleKind: "once",
        any: true,
        now: at("2025-06-10T07:00:00Z"),
      }),
    )
    expect(once.reason).toBe("before_start_at")
    expect(once.nextOpenAt).toBe(at("2025-06-12T03:00:00Z"))
  })

  it("window_never_open when the zones never share a minute of the window", () => {
    // One hour cannot cover a country spanning six.
    const r = closed(
      check({
        phoneE164: US_TOLL_FREE,
        schedule: { calling_hours: { start: "09:00", end: "10:00" } },
        now: at("2025-06-10T15:00:00Z"),
      }),
    )
    expect(r.reason).toBe("window_never_open")
    expect(r.nextOpenAt).toBeNull()
  })

  it("a window that only opens after a DST change is found beyond the first week", () => {
    // Saskatchewan numbers may be in Regina (UTC-6 all year) or Edmonton (UTC-7, UTC-6 in summer).
    const schedule: Schedule = { calling_hours: { start: "09:00", end: "09:30" } }
    const r = closed(check({ phoneE164: "+13065550100", schedule, now: at("2026-01-10T15:00:00Z") }))
    expect(r.reason).toBe("outside_calling_hours")
    expect(r.nextOpenAt).toBe(at("2026-03-08T15:00:00Z"))
  })

  it("nextOpenAt is the first open minute, by a brute-force scan", () => {
    const zoneSets = [
      [NY_PHONE],
      [US_TOLL_FREE],
      ["+61412345678"],
      ["+13065550100"],
      ["+442071234567"],
      ["+18505550100"],
    ]
    const DAY_NAMES = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"] as const
    fc.assert(
      fc.property(
        fc.constantFrom(...zoneSets.map((z) => z[0] ?? "")),
        fc.oneof(
          fc.integer({ min: Date.UTC(2025, 0, 1) / 60_000, max: Date.UTC(2026, 11, 31) / 60_000 }),
          // the days around US (Mar 9, Nov 2) and Australian (Apr 6, Oct 5) DST changes
          ...[Date.UTC(2025, 2, 8), Date.UTC(2025, 10, 1), Date.UTC(2025, 3, 5), Date.UTC(2025, 9, 4)].map((d) =>
            fc.integer({ min: d / 60_000, max: d / 60_000 + 2 * 24 * 60 }),
          ),
        ),
        fc.integer({ min: 0, max: 22 * 60 }),
        fc.integer({ min: 60, max: 14 * 60 }),
        fc.option(fc.subarray([...DAY_NAMES], { minLength: 1 }), { nil: undefined }),
        (phone, minute, start, len, days) => {
          const end = Math.min(24 * 60 - 1, start + len)
          const hhmm = (m: number) =>
            `${String(Math.floor(m / 60)).padStart(2, "0")}:${String(m % 60).padStart(2, "0")}`
          const schedule: Schedule = {
            calling_hours: { start: hhmm(start), end: hhmm(end) },
            ...(days ? { days } : {}),
          }
          const kind: ScheduleKind = "window"
          const now = minute * 60_000
          const r = check({ phoneE164: phone, schedule, scheduleKind: kind, now })
          const zones = calleeTimeZones(phone, "UTC")
          const open = (t: number) => zones.every((z) => bruteOpen(z, t, start, end, days))
          if (r.ok) return open(now)
          if (r.nextOpenAt === null) {
            for (let t = now; t < now + 8 * 86_400_000; t += 60_000) if (open(t)) return false
            return true
          }
          if (!open(r.nextOpenAt)) return false
          for (let t = now; t < r.nextOpenAt; t += 60_000) if (open(t)) return false
          return true
        },
      ),
      { numRuns: 25, seed: 6 },
    )
  })
})

/** An independent reading of "open": the local wall clock straight from Intl, no offsets. */
const bruteFormats = new Map<string, Intl.DateTimeFormat>()
function bruteOpen(tz: string, t: number, start: number, end: number, days: readonly string[] | undefined): boolean {
  let f = bruteFormats.get(tz)
  if (f === undefined) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone: tz,
      hourCycle: "h23",
      weekday: "short",
      hour: "numeric",
      minute: "numeric",
    })
    bruteFormats.set(tz, f)
  }
  const parts = f.formatToParts(t)
  const get = (type: string) => parts.find((p) => p.type === type)?.value ?? ""
  const m = Number(get("hour")) * 60 + Number(get("minute"))
  const wd = get("weekday").toLowerCase()
  return (days === undefined || days.includes(wd)) && m >= start && m < end
}

describe("retryDecision", () => {
  const now = at("2025-06-10T12:00:00Z")
  const MIN = 60_000

  it.each([
    ["busy", 1, true, "busy_retry_scheduled", 30 * MIN],
    ["no_answer", 1, true, "no_answer_retry_scheduled", 30 * MIN],
    ["failed", 1, true, "failed_retry_scheduled", 30 * MIN],
    ["busy", 2, true, "busy_retry_scheduled", 60 * MIN],
    ["busy", 3, false, "max_attempts_reached", 0],
    ["no_answer", 4, false, "max_attempts_reached", 0],
    ["answered", 1, false, "final_outcome", 0],
    ["voicemail", 1, false, "final_outcome", 0],
    ["rejected", 1, false, "final_outcome", 0],
  ] as const)("%s on attempt %i → retry=%s (%s)", (outcome, attempt, retry, reason, backoff) => {
    const r = retryDecision({ outcome, attempt, now, seed: "target-1" })
    expect(r.retry).toBe(retry)
    expect(r.reason).toBe(reason)
    if (r.retry) {
      expect(r.at - now).toBe(r.delayMs)
      expect(r.delayMs).toBeGreaterThanOrEqual(backoff * 0.9)
      expect(r.delayMs).toBeLessThanOrEqual(backoff * 1.1)
    }
  })

  it("jitter is deterministic per seed and attempt, and differs between targets", () => {
    const a = retryDecision({ outcome: "busy", attempt: 1, now, seed: 17 })
    const b = retryDecision({ outcome: "busy", attempt: 1, now, seed: 17 })
    expect(a).toEqual(b)
    const delays = new Set(
      Array.from({ length: 20 }, (_, i) => retryDecision({ outcome: "busy", attempt: 1, now, seed: i })).map((r) =>
        r.retry ? r.delayMs : -1,
      ),
    )
    expect(delays.size).toBeGreaterThan(10)
    for (const d of delays) expect(Math.abs(d - 30 * MIN)).toBeLessThanOrEqual(3 * MIN)
  })

  it("maxAttempts, base backoff and SIM_TIME_SCALE", () => {
    expect(retryDecision({ outcome: "busy", attempt: 4, maxAttempts: 5, now, seed: 1 }).retry).toBe(true)
    expect(retryDecision({ outcome: "busy", attempt: 1, maxAttempts: 1, now, seed: 1 }).reason).toBe(
      "max_attempts_reached",
    )
    const full = retryDecision({ outcome: "no_answer", attempt: 2, baseBackoffMs: 1000, now, seed: "x" })
    const scaled = retryDecision({
      outcome: "no_answer",
      attempt: 2,
      baseBackoffMs: 1000,
      timeScale: 0.01,
      now,
      seed: "x",
    })
    if (!full.retry || !scaled.retry) throw new Error("expected retries")
    expect(full.delayMs).toBeGreaterThanOrEqual(1800)
    expect(full.delayMs).toBeLessThanOrEqual(2200)
    expect(scaled.delayMs).toBe(Math.round(full.delayMs * 0.01))
    expect(() => retryDecision({ outcome: "busy", attempt: 1, timeScale: Number.NaN, now })).toThrow(RangeError)
  })
})

describe("Decision", () => {
  it("builds every kind the same way", () => {
    expect(Decision.dial(7, 1000, "within_window", { zones: ["Asia/Kolkata"] }, 250)).toEqual({
      targetId: 7,
      at: 1000,
      decision: "dial",
      reason: "within_window",
      detail: { zones: ["Asia/Kolkata"] },
      costMinor: 250,
    })
    expect(Decision.skip(7, 1000, "dnc_listed")).toEqual({
      targetId: 7,
      at: 1000,
      decision: "skip",
      reason: "dnc_listed",
      detail: {},
      costMinor: null,
    })
  })

  it("a closed window holds until it opens, a never-open one stops", () => {
    const held = closed(check({ now: at("2025-06-11T01:00:00Z") }))
    const d = Decision.fromWindow(7, 1000, held)
    expect(d).toMatchObject({
      decision: "hold",
      reason: "outside_calling_hours",
      detail: { next_open_at: at("2025-06-11T13:00:00Z") },
    })
    const never = closed(
      check({
        phoneE164: US_TOLL_FREE,
        schedule: { calling_hours: { start: "09:00", end: "09:30" } },
        now: at("2025-06-10T12:00:00Z"),
      }),
    )
    expect(Decision.fromWindow(7, 1000, never)).toMatchObject({ decision: "stop", reason: "window_never_open" })
  })

  it("a retry decision becomes retry or stop", () => {
    const r = retryDecision({ outcome: "busy", attempt: 1, now: 0, seed: 7 })
    expect(Decision.fromRetry(7, 0, r, { outcome: "busy" }, 120)).toMatchObject({
      decision: "retry",
      reason: "busy_retry_scheduled",
      costMinor: 120,
    })
    expect(Decision.fromRetry(7, 0, retryDecision({ outcome: "answered", attempt: 1, now: 0 }))).toMatchObject({
      decision: "stop",
      reason: "final_outcome",
    })
  })
})
