// The pure rules of webhook delivery: every answer's verdict, the retry schedule (its order, scale
// and jitter), and when a failing endpoint has failed long enough to be disabled.
import { describe, expect, it } from "vitest"
import {
  type AttemptResult,
  DISABLE_AFTER_MS,
  describeAttempt,
  failedTooLong,
  JITTER,
  judge,
  MAX_ATTEMPTS,
  RETRY_SCHEDULE_MS,
  retryDelayMs,
} from "../../src/webhooks/delivery.js"

const answered = (status: number): AttemptResult => ({ kind: "answered", status })

describe("judging an attempt", () => {
  it("2xx delivers", () => {
    for (const s of [200, 201, 202, 204, 299]) expect(judge(answered(s), 1)).toEqual({ outcome: "delivered" })
  })

  it("4xx other than 408 and 429 fails for good, at the first attempt", () => {
    for (const s of [400, 401, 403, 404, 410, 413, 422])
      expect(judge(answered(s), 1)).toEqual({ outcome: "failed", reason: "status_4xx" })
  })

  it("5xx, 408, 429, redirects, timeouts, connection errors and refused addresses are retried", () => {
    const cases: Array<[AttemptResult, string]> = [
      [answered(500), "status_5xx"],
      [answered(503), "status_5xx"],
      [answered(408), "status_408"],
      [answered(429), "status_429"],
      [answered(304), "status_3xx"],
      [{ kind: "redirect", status: 301 }, "status_3xx"],
      [{ kind: "timeout" }, "timeout"],
      [{ kind: "network", message: "ECONNREFUSED" }, "network"],
      [{ kind: "refused_private", message: "refused" }, "private_address"],
      [{ kind: "unsignable", message: "no key" }, "unsignable"],
    ]
    for (const [r, reason] of cases) {
      expect(judge(r, 1)).toEqual({ outcome: "retry", reason })
      expect(judge(r, MAX_ATTEMPTS - 1)).toEqual({ outcome: "retry", reason })
      // After the schedule's last step the delivery fails.
      expect(judge(r, MAX_ATTEMPTS)).toEqual({ outcome: "failed", reason })
    }
  })

  it("describes failures for the deliveries list, not successes", () => {
    expect(describeAttempt(answered(200), 10_000)).toBeNull()
    expect(describeAttempt(answered(503), 10_000, "busy")).toBe("HTTP 503: busy")
    expect(describeAttempt({ kind: "timeout" }, 10_000)).toBe("no answer within 10000 ms")
    expect(describeAttempt({ kind: "redirect", status: 301 }, 10_000)).toMatch(/redirects are not followed/)
  })
})

describe("the retry schedule", () => {
  it("is 1 min, 5 min, 30 min, 2 h, 12 h, 24 h: seven attempts in all", () => {
    expect(RETRY_SCHEDULE_MS).toEqual([60_000, 300_000, 1_800_000, 7_200_000, 43_200_000, 86_400_000])
    expect(MAX_ATTEMPTS).toBe(7)
  })

  it("scales by WEBHOOK_RETRY_SCALE and jitters within ±10%", () => {
    RETRY_SCHEDULE_MS.forEach((step, i) => {
      expect(retryDelayMs(i + 1, 1, 0.5)).toBe(step)
      expect(retryDelayMs(i + 1, 0.001, 0.5)).toBe(Math.round(step * 0.001))
      expect(retryDelayMs(i + 1, 1, 0)).toBe(Math.round(step * (1 - JITTER)))
      expect(retryDelayMs(i + 1, 1, 0.999_999)).toBeLessThanOrEqual(step * (1 + JITTER))
      for (let k = 0; k < 50; k++) {
        const d = retryDelayMs(i + 1, 1)
        expect(d).toBeGreaterThanOrEqual(step * 0.9 - 1)
        expect(d).toBeLessThanOrEqual(step * 1.1 + 1)
      }
    })
  })

  it("keeps its order whatever the jitter: each step's longest is shorter than the next one's shortest", () => {
    for (let i = 1; i < RETRY_SCHEDULE_MS.length; i++)
      expect(retryDelayMs(i, 1, 0.999_999)).toBeLessThan(retryDelayMs(i + 1, 1, 0))
  })
})

describe("disabling a failing endpoint", () => {
  it("happens once failures span 5 days (× scale)", () => {
    const since = new Date("2026-01-01T00:00:00Z")
    expect(DISABLE_AFTER_MS).toBe(5 * 86_400_000)
    expect(failedTooLong(since, new Date(since.getTime() + DISABLE_AFTER_MS - 1), 1)).toBe(false)
    expect(failedTooLong(since, new Date(since.getTime() + DISABLE_AFTER_MS), 1)).toBe(true)
    expect(failedTooLong(since, new Date(since.getTime() + 216_000), 0.0005)).toBe(true)
    expect(failedTooLong(since, new Date(since.getTime() + 215_000), 0.0005)).toBe(false)
  })
})
