// The dialer's screening of a due target (src/dialing/screening.ts): each check's refusal as the
// decision to write, in their order (DNC, erasure, NCPR, cool-down, calling window), a closed window
// held until it opens, and the callee's zones when it may be dialed now.
import { describe, expect, it } from "vitest"
import { type ScreeningInput, screenTarget } from "../../src/dialing/screening.js"

const NY_PHONE = "+12125550123"
const IN_PHONE = "+919812345678"
const DAY = 86_400_000
// 15:00 in New York: inside the default calling hours.
const NOON_NY = Date.parse("2025-06-10T19:00:00Z")

const input = (target: Partial<ScreeningInput["target"]> = {}, over: Partial<ScreeningInput> = {}): ScreeningInput => ({
  target: {
    target_id: 7,
    phone_e164: NY_PHONE,
    on_dnc: false,
    ncpr_preference: null,
    attempts: 0,
    last_contacted_at: null,
    ...target,
  },
  now: NOON_NY,
  erased: new Set(),
  ncprCategory: 3,
  schedule: {},
  scheduleKind: "immediate",
  callingHoursAny: false,
  ...over,
})

const refusal = (i: ScreeningInput) => {
  const s = screenTarget(i)
  if (s.dial) throw new Error("expected a refusal")
  return { decision: s.decision.decision, reason: s.decision.reason, holdUntil: s.holdUntil }
}

describe("screenTarget", () => {
  it("dials a clean target inside its calling hours, in the callee's zone", () => {
    expect(screenTarget(input())).toEqual({ dial: true, zones: ["America/New_York"] })
  })

  it("skips a number on the DNC list before any other check", () => {
    const erasedToo = input({ on_dnc: true }, { erased: new Set([NY_PHONE]) })
    expect(refusal(erasedToo)).toEqual({ decision: "skip", reason: "dnc_listed", holdUntil: null })
  })

  it("skips an erased contact, by its placeholder or by the batch's erased numbers", () => {
    expect(refusal(input({ phone_e164: "erased:abc" })).reason).toBe("contact_erased")
    expect(refusal(input({}, { erased: new Set([NY_PHONE]) })).reason).toBe("contact_erased")
  })

  it("skips an Indian number whose NCPR registration blocks the campaign's category", () => {
    expect(refusal(input({ phone_e164: IN_PHONE, ncpr_preference: "0" })).reason).toBe("ncpr_registered")
    // A registration that accepts the category, or one on a number outside India, does not block.
    const accepted = screenTarget(input({ phone_e164: IN_PHONE, ncpr_preference: "1,3" }, { callingHoursAny: true }))
    expect(accepted.dial).toBe(true)
    expect(screenTarget(input({ ncpr_preference: "0" })).dial).toBe(true)
  })

  it("skips a first attempt at a number reached within the cool-down, never a retry", () => {
    const recently = new Date(NOON_NY - DAY)
    expect(refusal(input({ last_contacted_at: recently }))).toEqual({
      decision: "skip",
      reason: "cooldown",
      holdUntil: null,
    })
    expect(screenTarget(input({ last_contacted_at: recently, attempts: 1 })).dial).toBe(true)
    expect(screenTarget(input({ last_contacted_at: new Date(NOON_NY - 8 * DAY) })).dial).toBe(true)
  })

  it("holds a target outside its calling hours until the window opens", () => {
    // 03:00 in New York: the window opens at 09:00 there.
    const night = input({}, { now: Date.parse("2025-06-10T07:00:00Z") })
    expect(refusal(night)).toEqual({
      decision: "hold",
      reason: "outside_calling_hours",
      holdUntil: Date.parse("2025-06-10T13:00:00Z"),
    })
    expect(screenTarget({ ...night, callingHoursAny: true }).dial).toBe(true)
  })
})
