// Pacing pieces of the dialer: token-bucket rates and bursts, all-or-nothing acquisition across
// several buckets, and slot counters whose caps hold and whose counts never go negative.

import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Pacer, SlotCounter, TokenBucket } from "../../src/dialing/pacing.js"

/** Tokens a bucket hands out to a caller polling every millisecond over [0, ms]. */
function drain(bucket: TokenBucket, ms: number, start = 0): number {
  let n = 0
  for (let t = start; t <= start + ms; t++) while (bucket.take(t) === 0) n++
  return n
}

describe("TokenBucket", () => {
  it("starts full: a burst, then the rate", () => {
    const b = new TokenBucket(3, 3)
    expect([b.take(0), b.take(0), b.take(0)]).toEqual([0, 0, 0])
    expect(b.take(0)).toBe(334) // a third of a second, rounded up
    expect(b.take(333)).toBe(1)
    expect(b.take(334)).toBe(0)
  })

  it.each([
    [3, 3, 10_000, 33],
    [1, 1, 10_000, 11],
    [2, 5, 1_000, 7],
    [0.5, 1, 10_000, 6],
    [100, 10, 1_000, 110],
  ])("rate %d/s, burst %d: %d ms hand out %d tokens", (rate, burst, ms, expected) => {
    expect(drain(new TokenBucket(rate, burst), ms)).toBe(expected)
  })

  it("never holds more than its burst, however long it idles", () => {
    const b = new TokenBucket(3, 3)
    expect(drain(b, 0)).toBe(3)
    expect(drain(b, 0, 3_600_000)).toBe(3)
  })

  it("the wait it reports is enough, and no shorter than needed", () => {
    fc.assert(
      fc.property(fc.double({ min: 0.1, max: 50, noNaN: true }), fc.integer({ min: 1, max: 10 }), (rate, burst) => {
        const b = new TokenBucket(rate, burst)
        let t = 0
        for (let i = 0; i < burst; i++) if (b.take(t) !== 0) return false
        for (let i = 0; i < 5; i++) {
          const wait = b.take(t)
          if (wait <= 0) return false
          if (wait > 1 && b.take(t + wait - 1) === 0) return false
          t += wait
          if (b.take(t) !== 0) return false
        }
        return true
      }),
      { numRuns: 200, seed: 6 },
    )
  })

  it("a clock that steps back earns nothing", () => {
    const b = new TokenBucket(1, 1)
    expect(b.take(10_000)).toBe(0)
    expect(b.take(5_000)).toBeGreaterThan(0)
    expect(b.take(10_500)).toBe(500)
    expect(b.take(11_000)).toBe(0)
  })

  it("refuses rates that would never refill", () => {
    expect(() => new TokenBucket(0, 1)).toThrow(RangeError)
    expect(() => new TokenBucket(1, 0)).toThrow(RangeError)
    expect(() => new TokenBucket(Number.NaN, 1)).toThrow(RangeError)
  })
})

describe("Pacer", () => {
  it("takes from every bucket or from none", () => {
    const p = new Pacer()
    p.configure("carrier:sim", 1, 1)
    p.configure("tenant:1", 10, 10)
    expect(p.tryAcquire(["carrier:sim"], 0)).toEqual({ ok: true })
    const r = p.tryAcquire(["carrier:sim", "tenant:1"], 0)
    expect(r).toEqual({ ok: false, waitMs: 1000, blockedBy: "carrier:sim" })
    // the refused acquire took nothing from the tenant's bucket
    for (let i = 0; i < 10; i++) expect(p.tryAcquire(["tenant:1"], 0)).toEqual({ ok: true })
    expect(p.tryAcquire(["tenant:1"], 0).ok).toBe(false)
  })

  it("reports the longest wait among the empty buckets", () => {
    const p = new Pacer()
    p.configure("a", 1, 1)
    p.configure("b", 0.5, 1)
    expect(p.tryAcquire(["a", "b"], 0).ok).toBe(true)
    expect(p.tryAcquire(["a", "b"], 0)).toEqual({ ok: false, waitMs: 2000, blockedBy: "b" })
    expect(p.tryAcquire(["a", "b"], 1999).ok).toBe(false)
    expect(p.tryAcquire(["a", "b"], 2000)).toEqual({ ok: true })
  })

  it("paces a carrier at its configured calls per second across tenants", () => {
    const p = new Pacer({ ratePerSecond: 100, burst: 100 })
    p.configure("carrier:sim", 3, 3)
    let dialed = 0
    for (let t = 0; t <= 10_000; t += 10) {
      for (const tenant of ["tenant:1", "tenant:2", "tenant:3"])
        if (p.tryAcquire(["carrier:sim", tenant], t).ok) dialed++
    }
    expect(dialed).toBe(33)
  })

  it("gives unknown keys the default rate, and counts a repeated key once", () => {
    const p = new Pacer({ ratePerSecond: 2, burst: 2 })
    expect(p.tryAcquire(["new", "new"], 0).ok).toBe(true)
    expect(p.tryAcquire(["new"], 0).ok).toBe(true)
    expect(p.tryAcquire(["new"], 0)).toEqual({ ok: false, waitMs: 500, blockedBy: "new" })
  })

  it("reconfiguring keeps tokens already earned, up to the new burst", () => {
    const p = new Pacer()
    p.configure("k", 1, 5)
    p.configure("k", 1, 2, 0)
    expect(p.tryAcquire(["k"], 0).ok).toBe(true)
    expect(p.tryAcquire(["k"], 0).ok).toBe(true)
    expect(p.tryAcquire(["k"], 0).ok).toBe(false)
  })
})

describe("SlotCounter", () => {
  it("holds each cap, and enters under all keys or none", () => {
    const s = new SlotCounter()
    const caps = { "workflow:1": 2, "tenant:1": 3 }
    expect(s.tryEnter(["workflow:1", "tenant:1"], caps)).toBe(true)
    expect(s.tryEnter(["workflow:1", "tenant:1"], caps)).toBe(true)
    expect(s.tryEnter(["workflow:1", "tenant:1"], caps)).toBe(false)
    expect(s.blockedBy(["workflow:1", "tenant:1"], caps)).toBe("workflow:1")
    expect(s.inUse("tenant:1")).toBe(2)
    expect(s.tryEnter(["workflow:2", "tenant:1"], caps)).toBe(true)
    expect(s.tryEnter(["workflow:3", "tenant:1"], caps)).toBe(false)
    expect(s.inUse("workflow:3")).toBe(0)
    s.leave(["workflow:1", "tenant:1"])
    expect(s.tryEnter(["workflow:3", "tenant:1"], caps)).toBe(true)
  })

  it("a key without a cap is not limited; a cap of 0 admits nobody", () => {
    const s = new SlotCounter()
    for (let i = 0; i < 100; i++) expect(s.tryEnter(["free"], {})).toBe(true)
    expect(s.inUse("free")).toBe(100)
    expect(s.tryEnter(["closed"], { closed: 0 })).toBe(false)
  })

  it("never goes negative, whatever order leaves come in", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.boolean(), fc.subarray(["w:1", "w:2", "t:1"], { minLength: 1 })), { maxLength: 60 }),
        (ops) => {
          const s = new SlotCounter()
          const caps = { "w:1": 2, "w:2": 1, "t:1": 3 }
          for (const [enter, keys] of ops) {
            if (enter) s.tryEnter(keys, caps)
            else s.leave(keys)
            for (const k of ["w:1", "w:2", "t:1"] as const) {
              const n = s.inUse(k)
              if (n < 0 || n > caps[k]) return false
            }
          }
          return true
        },
      ),
      { numRuns: 300, seed: 6 },
    )
  })
})
