// Dealing a campaign's simulated callees: deterministic in the seed, numbers unique in the campaign
// and ending in a digit that selects the persona on the sim carrier, proportions following the mix.
import { describe, expect, it } from "vitest"
import { SIM_PERSONAS } from "../../src/personas/sim-personas.js"
import { simCalleeFor } from "../../src/providers/telephony/sim.telephony.js"
import { DEFAULT_SIM_MIX, drawCallees, seededRandom, unknownPersonas } from "../../src/rehearsals/mix.js"

describe("drawCallees", () => {
  it("same seed, size and mix → the same callees; another seed → others", () => {
    const a = drawCallees(42, 50, DEFAULT_SIM_MIX)
    expect(drawCallees(42, 50, DEFAULT_SIM_MIX)).toEqual(a)
    expect(drawCallees(43, 50, DEFAULT_SIM_MIX)).not.toEqual(a)
    // The key order of the mix does not matter.
    const reversed = Object.fromEntries(Object.entries(DEFAULT_SIM_MIX).reverse())
    expect(drawCallees(42, 50, reversed)).toEqual(a)
  })

  it("numbers are +1202555 and 4 digits, unique, and the sim carrier answers each as its persona", () => {
    const callees = drawCallees(7, 500, { agrees: 1 })
    expect(new Set(callees.map((c) => c.phone)).size).toBe(500)
    for (const c of callees) {
      expect(c.phone).toMatch(/^\+1202555\d{4}$/)
      const persona = SIM_PERSONAS.find((p) => p.id === c.persona)!
      expect(simCalleeFor(c.phone)).toBe(persona.behaviour)
    }
    expect(callees[0]!.name).toBe("Interested Buyer 1")
    expect(callees.at(-1)!.name).toBe("Interested Buyer 500")
  })

  it("follows the mix's weights (500 callees, default mix, within a few points)", () => {
    const callees = drawCallees(1, 500, DEFAULT_SIM_MIX)
    const total = Object.values(DEFAULT_SIM_MIX).reduce((a, b) => a + b, 0)
    for (const [id, weight] of Object.entries(DEFAULT_SIM_MIX)) {
      const share = callees.filter((c) => c.persona === id).length / 500
      expect(Math.abs(share - weight / total)).toBeLessThan(0.06)
    }
    // A persona with weight 0 never appears.
    expect(drawCallees(1, 200, { busy: 0, declines: 1 }).every((c) => c.persona === "declines")).toBe(true)
  })

  it("the default mix covers every sim persona and names only sim personas", () => {
    expect(Object.keys(DEFAULT_SIM_MIX).sort()).toEqual(SIM_PERSONAS.map((p) => p.id).sort())
    expect(unknownPersonas(DEFAULT_SIM_MIX)).toEqual([])
    expect(unknownPersonas({ agrees: 1, nobody: 2 })).toEqual(["nobody"])
  })

  it("refuses a mix with no positive weight", () => {
    expect(() => drawCallees(1, 5, { agrees: 0 })).toThrow(RangeError)
  })

  it("seededRandom is a deterministic stream in [0, 1)", () => {
    const a = seededRandom(99)
    const b = seededRandom(99)
    const xs = Array.from({ length: 1000 }, () => a())
    expect(Array.from({ length: 1000 }, () => b())).toEqual(xs)
    expect(xs.every((x) => x >= 0 && x < 1)).toBe(true)
  })
})
