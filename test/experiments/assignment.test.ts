// A target's arm: the same on every attempt and in every process, shared out by weight, and stopping
// an arm moves only its own targets.
import { describe, expect, it } from "vitest"
import { armOf, unitHash } from "../../src/experiments/assignment.js"

const arms = (stopped: string[] = [], weights = [1, 1, 2]) =>
  ["a", "b", "c"].map((name, i) => ({ name, weight: weights[i]!, stopped: stopped.includes(name) }))

describe("armOf", () => {
  it("gives a target the same arm every time, and another seed another deal", () => {
    const deal = (seed: number) => Array.from({ length: 200 }, (_, t) => armOf(seed, t, arms())!.name)
    expect(deal(7)).toEqual(deal(7))
    expect(deal(7)).not.toEqual(deal(8))
    expect(unitHash(7, 1)).toBeGreaterThanOrEqual(0)
    expect(unitHash(7, 1)).toBeLessThan(1)
  })

  it("shares targets out by weight", () => {
    const counts = { a: 0, b: 0, c: 0 }
    for (let t = 0; t < 20_000; t++) counts[armOf(42, t, arms())!.name as "a"]++
    // 1 : 1 : 2 of 20,000, each within four standard deviations (~±260).
    expect(Math.abs(counts.a - 5_000)).toBeLessThan(260)
    expect(Math.abs(counts.b - 5_000)).toBeLessThan(260)
    expect(Math.abs(counts.c - 10_000)).toBeLessThan(300)
  })

  it("moves only a stopped arm's targets, among the open arms", () => {
    let moved = 0
    for (let t = 0; t < 5_000; t++) {
      const before = armOf(3, t, arms())!.name
      const after = armOf(3, t, arms(["c"]))!.name
      if (before !== "c") expect(after).toBe(before)
      else {
        expect(after).not.toBe("c")
        moved++
      }
    }
    expect(moved).toBeGreaterThan(2_000)
    expect(armOf(3, 1, arms(["a", "b", "c"]))).toBeUndefined()
  })
})
