// The readout's statistics against published values (Wilson, Newcombe 1998) and, by seeded simulation, the
// stopping rule's promises: an A/A experiment looked at every 50 calls is rarely called, and a real difference is.
import { describe, expect, it } from "vitest"
import {
  difference,
  MAX_CALLS_PER_ARM,
  moreCallsNeeded,
  type Proportion,
  rate,
  readout,
  sequential,
  wilson,
} from "../../src/experiments/readout.js"
import { wilson as forecastWilson } from "../../src/rehearsals/forecast.js"
import { seededRandom } from "../../src/rehearsals/mix.js"

/** Wilson's closed form, written out here independently of the module. */
const wilsonRef = (x: number, n: number, z = 1.959963984540054) => {
  const p = x / n
  const root = z * Math.sqrt(n * p * (1 - p) + (z * z) / 4)
  const denominator = n + z * z
  return [(n * p + (z * z) / 2 - root) / denominator, (n * p + (z * z) / 2 + root) / denominator] as const
}

/** A small seeded generator (mulberry32, the rehearsals' own), so the simulations are the same on every run. */
const prng = seededRandom

const draws = (random: () => number, p: number, count: number) => {
  let s = 0
  for (let i = 0; i < count; i++) if (random() < p) s++
  return s
}

/**
 * Runs `runs` two-arm experiments at true rates pa and pb, looking every `step` calls per arm up to `max`;
 * returns, per run, the calls per arm at the first look that decided (and for which arm), or null.
 */
function simulate(runs: number, pa: number, pb: number, step: number, max: number, seed: number) {
  const random = prng(seed)
  const firsts: Array<{ at: number; bHigher: boolean } | null> = []
  for (let r = 0; r < runs; r++) {
    let a = 0
    let b = 0
    let first: { at: number; bHigher: boolean } | null = null
    for (let n = step; n <= max; n += step) {
      a += draws(random, pa, step)
      b += draws(random, pb, step)
      const s = sequential({ successes: a, n }, { successes: b, n })!
      if (s.decided) {
        first = { at: n, bHigher: b > a }
        break
      }
    }
    firsts.push(first)
  }
  return firsts
}

describe("rate: 95% Wilson", () => {
  it("81 of 263: 0.2553 to 0.3662 (the published example), equal to the closed form", () => {
    const r = rate(81, 263)
    const [low, high] = wilsonRef(81, 263)
    expect(r.n).toBe(263)
    expect(r.rate).toBeCloseTo(81 / 263, 12)
    expect(r.ci_low).toBeCloseTo(low, 12)
    expect(r.ci_high).toBeCloseTo(high, 12)
    expect(r.ci_low).toBeCloseTo(0.2553, 4)
    expect(r.ci_high).toBeCloseTo(0.3662, 4)
  })

  it("matches the closed form across small samples and the edges", () => {
    for (const [x, n] of [
      [1, 1],
      [3, 7],
      [15, 148],
      [56, 70],
      [48, 80],
      [999, 1000],
    ] as const) {
      const [low, high] = wilsonRef(x, n)
      const r = rate(x, n)
      expect(r.ci_low).toBeCloseTo(Math.max(0, low), 12)
      expect(r.ci_high).toBeCloseTo(Math.min(1, high), 12)
    }
    expect(rate(0, 10)).toMatchObject({ rate: 0, ci_low: 0 })
    expect(rate(10, 10)).toMatchObject({ rate: 1, ci_high: 1 })
  })

  it("with no calls: rate null, the interval the whole of 0..1", () => {
    expect(rate(0, 0)).toEqual({ rate: null, ci_low: 0, ci_high: 1, n: 0 })
  })

  it("is the rehearsals' forecast's Wilson too: one implementation", () => {
    expect(forecastWilson).toBe(wilson)
  })
})

describe("difference: Newcombe's hybrid score interval (method 10)", () => {
  it("56/70 vs 48/80: 0.2000, 0.0524 to 0.3339 (Newcombe 1998, Table II)", () => {
    const d = difference({ successes: 48, n: 80 }, { successes: 56, n: 70 })!
    expect(d.diff).toBeCloseTo(0.2, 12)
    expect(d.ci_low).toBeCloseTo(0.0524, 4)
    expect(d.ci_high).toBeCloseTo(0.3339, 4)
  })

  it("equals the method's formula over the closed-form Wilson bounds, and flips with the arms", () => {
    const a: Proportion = { successes: 5, n: 56 }
    const b: Proportion = { successes: 0, n: 29 }
    const [la, ua] = wilsonRef(5, 56)
    const [lb, ub] = wilsonRef(0, 29)
    const pa = 5 / 56
    const d = difference(a, b)!
    expect(d.diff).toBeCloseTo(-pa, 12)
    expect(d.ci_low).toBeCloseTo(-pa - Math.sqrt((0 - Math.max(0, lb)) ** 2 + (ua - pa) ** 2), 12)
    expect(d.ci_high).toBeCloseTo(-pa + Math.sqrt((ub - 0) ** 2 + (pa - la) ** 2), 12)
    // Newcombe's Table II, example (e): 5/56 vs 0/29 → 0.0893, −0.0381 to 0.1926.
    const flipped = difference(b, a)!
    expect(flipped.diff).toBeCloseTo(0.0893, 4)
    expect(flipped.ci_low).toBeCloseTo(-0.0381, 4)
    expect(flipped.ci_high).toBeCloseTo(0.1926, 4)
  })

  it("is null while an arm has no calls", () => {
    expect(difference({ successes: 0, n: 0 }, { successes: 3, n: 10 })).toBeNull()
  })
})

describe("the stopping rule (mSPRT, normal mixture)", () => {
  it("its interval excludes zero exactly when it decides, and its p-value crosses α there", () => {
    const random = prng(7)
    for (let i = 0; i < 500; i++) {
      const n = 20 + Math.floor(random() * 2000)
      const a = { successes: draws(random, 0.3, n), n }
      const b = { successes: draws(random, 0.36, n), n }
      const s = sequential(a, b)!
      expect(s.decided).toBe(s.ci_low > 0 || s.ci_high < 0)
      if (Math.abs(s.p_value - 0.05) > 1e-9) expect(s.decided).toBe(s.p_value < 0.05)
    }
  })

  it("is wider than the fixed-sample interval: repeated looks cost evidence", () => {
    const a = { successes: 210, n: 1000 }
    const b = { successes: 250, n: 1000 }
    const s = sequential(a, b)!
    const d = difference(a, b)!
    expect(s.ci_low).toBeLessThan(d.ci_low)
    expect(s.ci_high).toBeGreaterThan(d.ci_high)
  })

  it("A/A: 2,000 experiments looked at every 50 calls up to 2,000 per arm are rarely ever called", () => {
    const firsts = simulate(2000, 0.3, 0.3, 50, 2000, 20261130)
    const everDecided = firsts.filter((f) => f !== null).length / firsts.length
    expect(everDecided).toBeLessThanOrEqual(0.06)
  })

  it("A/A at a low rate (5%), where the normal approximation is weakest, also holds", () => {
    const firsts = simulate(1000, 0.05, 0.05, 50, 2000, 42)
    const everDecided = firsts.filter((f) => f !== null).length / firsts.length
    expect(everDecided).toBeLessThanOrEqual(0.06)
  })

  it("A/A looked at after every single call up to 300 per arm: still rarely called", () => {
    const firsts = simulate(500, 0.3, 0.3, 1, 300, 11)
    expect(firsts.filter((f) => f !== null).length / firsts.length).toBeLessThanOrEqual(0.06)
  })

  it("30% vs 45%: most experiments are called, for the right arm, before 1,000 calls per arm", () => {
    const firsts = simulate(500, 0.3, 0.45, 50, 1000, 99)
    const decided = firsts.filter((f) => f !== null)
    expect(decided.length / firsts.length).toBeGreaterThanOrEqual(0.9)
    expect(decided.every((f) => f.bHigher)).toBe(true)
  })
})

describe("more calls needed", () => {
  it("0 once decided, null for no difference or one out of reach", () => {
    expect(moreCallsNeeded({ successes: 100, n: 500 }, { successes: 200, n: 500 })).toBe(0)
    expect(moreCallsNeeded({ successes: 30, n: 100 }, { successes: 30, n: 100 })).toBeNull()
    expect(moreCallsNeeded({ successes: 3000, n: 10000 }, { successes: 3001, n: 10000 })).toBeNull()
  })

  it("is a number that, at 30% vs 45%, decides about four in five experiments when reached", () => {
    const a = { successes: 15, n: 50 }
    const b = { successes: 22, n: 50 }
    expect(sequential(a, b)!.decided).toBe(false)
    const more = moreCallsNeeded(a, b)!
    expect(more).toBeGreaterThan(0)
    const total = 50 + more
    // At the observed rates, one look at `total` calls per arm decides with probability ≈ 0.8.
    const random = prng(5)
    let decided = 0
    for (let i = 0; i < 400; i++) {
      const s = sequential(
        { successes: draws(random, 0.3, total), n: total },
        { successes: draws(random, 0.44, total), n: total },
      )
      if (s!.decided) decided++
    }
    expect(decided / 400).toBeGreaterThan(0.7)
    expect(decided / 400).toBeLessThan(0.9)
    expect(MAX_CALLS_PER_ARM).toBe(1_000_000)
  })
})

describe("readout", () => {
  it("two arms told apart: the better arm, its numbers and a plain statement", () => {
    const r = readout(
      [
        { name: "Arm A", n: 600, successes: 126 },
        { name: "Arm B", n: 600, successes: 204 },
      ],
      "agreement",
    )
    expect(r.control).toBe("Arm A")
    expect(r.arms[1]).toMatchObject({ name: "Arm B", rate: 0.34, n: 600, successes: 204 })
    expect(r.decided).toBe(true)
    expect(r.better).toBe("Arm B")
    const c = r.comparisons[0]!
    expect(c.difference!.diff).toBeCloseTo(0.13, 12)
    expect(c.more_calls_needed).toBe(0)
    const lo = Math.round(c.sequential!.ci_low * 100)
    const hi = Math.round(c.sequential!.ci_high * 100)
    expect(r.statement).toBe(
      `Arm B agrees more often: 34% vs 21% (difference 13 points, 95% CI ${lo} to ${hi}). ` +
        "The data can tell them apart.",
    )
  })

  it("not yet: says which arm leads and about how many more calls per arm", () => {
    const r = readout(
      [
        { name: "A", n: 80, successes: 17 },
        { name: "B", n: 80, successes: 27 },
      ],
      "agreement",
    )
    expect(r.decided).toBe(false)
    expect(r.better).toBeNull()
    const c = r.comparisons[0]!
    expect(c.more_calls_needed).toBeGreaterThan(0)
    expect(c.statement).toMatch(
      /^B agrees more often so far: 34% vs 21% \(difference 13 points, 95% CI -?\d+ to \d+\)\./,
    )
    expect(c.statement).toContain(`Not yet: about ${c.more_calls_needed!.toLocaleString("en-US")} more calls per arm`)
  })

  it("lower is better for opt-outs", () => {
    const r = readout(
      [
        { name: "A", n: 1000, successes: 80 },
        { name: "B", n: 1000, successes: 20 },
      ],
      "opt_out",
    )
    expect(r.better).toBe("B")
    expect(r.statement).toMatch(/^B has fewer opt-outs: 2% vs 8% \(difference 6 points, 95% CI \d+ to \d+\)/)
  })

  it("an arm with no calls, and arms level so far", () => {
    const empty = readout(
      [
        { name: "A", n: 10, successes: 3 },
        { name: "B", n: 0, successes: 0 },
      ],
      "connect",
    )
    expect(empty.arms[1]).toMatchObject({ rate: null, ci_low: 0, ci_high: 1 })
    expect(empty.comparisons[0]).toMatchObject({ decided: false, difference: null, more_calls_needed: null })
    expect(empty.statement).toBe("Not yet: B has no calls yet.")
    const level = readout(
      [
        { name: "A", n: 100, successes: 30 },
        { name: "B", n: 100, successes: 30 },
      ],
      "connect",
    )
    expect(level.comparisons[0]!.more_calls_needed).toBeNull()
    expect(level.statement).toMatch(/level so far: 30% each/)
    const onePoint = readout(
      [
        { name: "A", n: 100, successes: 30 },
        { name: "B", n: 100, successes: 31 },
      ],
      "connect",
    )
    expect(onePoint.statement).toContain("(difference 1 point, ")
  })

  it("four arms: each against the control at α/3, and the best decided challenger is better", () => {
    const arms = [
      { name: "control", n: 900, successes: 270 },
      { name: "warm", n: 900, successes: 360 },
      { name: "warmer", n: 900, successes: 400 },
      { name: "flat", n: 900, successes: 280 },
    ]
    const r = readout(arms, "goal_met")
    expect(r.comparisons.map((c) => c.arm)).toEqual(["warm", "warmer", "flat"])
    expect(r.comparisons.map((c) => c.decided)).toEqual([true, true, false])
    expect(r.better).toBe("warmer")
    // Each comparison's test is the two-arm test at a third of α.
    const s = sequential(arms[0]!, arms[1]!, { alpha: 0.05 / 3 })
    expect(r.comparisons[0]!.sequential).toEqual(s)
    expect(s!.ci_low).toBeLessThan(sequential(arms[0]!, arms[1]!)!.ci_low)
  })

  it("four-arm A/A experiments looked at repeatedly: the family-wise error stays near α", () => {
    const random = prng(2024)
    const runs = 400
    let any = 0
    for (let r = 0; r < runs; r++) {
      const counts = [0, 0, 0, 0]
      for (let n = 100; n <= 1000; n += 100) {
        for (let i = 0; i < 4; i++) counts[i]! += draws(random, 0.25, 100)
        const arms = counts.map((successes, i) => ({ name: `arm ${i}`, n, successes }))
        if (readout(arms, "agreement").decided) {
          any++
          break
        }
      }
    }
    expect(any / runs).toBeLessThanOrEqual(0.06)
  })

  it("refuses fewer than two or more than four arms, and impossible counts", () => {
    expect(() => readout([{ name: "A", n: 1, successes: 1 }], "agreement")).toThrow(RangeError)
    const five = Array.from({ length: 5 }, (_, i) => ({ name: `${i}`, n: 1, successes: 0 }))
    expect(() => readout(five, "agreement")).toThrow(RangeError)
    expect(() =>
      readout(
        [
          { name: "A", n: 1, successes: 2 },
          { name: "B", n: 1, successes: 0 },
        ],
        "agreement",
      ),
    ).toThrow(RangeError)
  })
})
