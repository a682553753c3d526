// The forecast's arithmetic against a case worked by hand: Wilson intervals, counts scaled to the
// audience (or per 1,000), dialing speed from the dialer's limits, minutes and cost at the bundled rate.
import { describe, expect, it } from "vitest"
import { forecast, RING_OUT_SECONDS, SETUP_SECONDS, wilson } from "../../src/rehearsals/forecast.js"

describe("wilson", () => {
  it("6 of 20: p = 0.3, interval [0.1455, 0.5190] (worked by hand below)", () => {
    // z = 1.96, z² = 3.8415; z²/n = 0.19207; centre = (0.3 + 0.096036) / 1.19207 = 0.33223;
    // half = 1.96 / 1.19207 · √(0.3·0.7/20 + 3.8415/1600) = 1.64418 · √0.0129009 = 0.18675.
    const { low, high } = wilson(6, 20)
    expect(low).toBeCloseTo(0.14548, 4)
    expect(high).toBeCloseTo(0.51897, 4)
  })

  it("stays inside [0, 1] at the edges, and is not a single point", () => {
    const none = wilson(0, 10)
    expect(none.low).toBe(0)
    expect(none.high).toBeCloseTo(0.27753, 4)
    const all = wilson(10, 10)
    expect(all.high).toBe(1)
    expect(all.low).toBeCloseTo(0.72247, 4)
  })

  it("needs a trial, and successes within 0..n", () => {
    expect(() => wilson(0, 0)).toThrow(RangeError)
    expect(() => wilson(3, 2)).toThrow(RangeError)
  })
})

describe("forecast", () => {
  // 20 simulated callees: 12 reached a person (6 agreed, 4 asked a human), 5 rang out, 1200 s of talk.
  const sample = { n: 20, connected: 12, agreed: 6, withApproval: 4, unanswered: 5, talkSeconds: 1200 }
  const capacity = { concurrency: 20, callsPerSecond: 3 }

  it("is null before any callee has an outcome", () => {
    expect(forecast({ sample: { ...sample, n: 0 }, audience: 100, currency: "USD", capacity })).toBeNull()
  })

  it("per 1,000 targets when the workflow has no audience: the hand-computed case", () => {
    const f = forecast({ sample, audience: 0, currency: "USD", capacity })!
    expect(f.basis).toBe("per_1000_targets")
    expect(f.targets).toBe(1000)
    expect(f.sample_size).toBe(20)
    expect(f.confidence).toBe(0.95)
    // Rates: 12/20, 6/20, 4/20 with their Wilson intervals.
    expect(f.rates.connect).toEqual({ successes: 12, value: 0.6, low: 0.3866, high: 0.7812 })
    expect(f.rates.agreement).toEqual({ successes: 6, value: 0.3, low: 0.1455, high: 0.519 })
    expect(f.rates.approval).toEqual({ successes: 4, value: 0.2, low: 0.0807, high: 0.416 })
    // Expected counts: 1,000 × rate (and × each bound).
    expect(f.expected.connects).toEqual({ value: 600, low: 386.6, high: 781.2 })
    expect(f.expected.agreements).toEqual({ value: 300, low: 145.5, high: 519 })
    expect(f.expected.approvals).toEqual({ value: 200, low: 80.7, high: 416 })
    // Line time per attempt: (1200 talk + 5 × 45 ring-out + 15 × 15 setup) / 20 = 82.5 s.
    expect(RING_OUT_SECONDS).toBe(45)
    expect(SETUP_SECONDS).toBe(15)
    expect(f.assumptions).toMatchObject({ line_seconds_per_attempt: 82.5, talk_seconds_per_connect: 100 })
    // 20 lines × 3600 / 82.5 = 872.7 attempts an hour (under 3 calls/s × 3600 = 10,800).
    expect(f.per_hour.attempts).toBe(872.7)
    expect(f.per_hour.connects.value).toBe(523.6)
    expect(f.per_hour.agreements.value).toBe(261.8)
    expect(f.per_hour.approvals.value).toBe(174.5)
    expect(f.dialing_hours).toBe(1.15)
    // Minutes: 1,000 × 1200 s / 20 / 60 = 1,000; bounds from the connect rate at 100 s a connect.
    expect(f.minutes).toEqual({ value: 1000, low: 644.3, high: 1302 })
    // Cost at $0.10 a minute (GET /pricing): $100.00, [$64.43, $130.20].
    expect(f.cost).toEqual({
      currency: "USD",
      rate_per_minute_minor: 10,
      minor: { value: 10_000, low: 6_443, high: 13_020 },
      display: "$100.00",
    })
  })

  it("for the workflow's audience, in its currency; the calls-per-second cap binds when calls are short", () => {
    const f = forecast({
      sample: { ...sample, talkSeconds: 0, connected: 0, agreed: 0, withApproval: 0, unanswered: 0 },
      audience: 250,
      currency: "INR",
      capacity: { concurrency: 100, callsPerSecond: 1 },
    })!
    expect(f.basis).toBe("audience")
    expect(f.targets).toBe(250)
    // 15 s a line: 100 × 3600 / 15 = 24,000 an hour, capped at 1 call/s = 3,600.
    expect(f.per_hour.attempts).toBe(3600)
    expect(f.cost).toMatchObject({ currency: "INR", rate_per_minute_minor: 700, display: "₹0.00" })
    expect(f.expected.connects.value).toBe(0)
    expect(f.expected.connects.high).toBeGreaterThan(0)
  })
})
