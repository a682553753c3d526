// The geography default as a pure function: the dominant country of an audience (ties to the
// workspace's country) and the table's order, filtered by the rule book's language.
import { describe, expect, it } from "vitest"
import { dominantCountry, GEOGRAPHY_PERSONAS, geographyDefault } from "../../src/personas/geography.js"
import { VOICES } from "../../src/voices/voices.catalog.js"

describe("dominantCountry", () => {
  it("counts each group by its sample's country; NANP numbers go by area code", () => {
    const groups = [
      { sample: "+14165550123", n: 2 }, // Toronto
      { sample: "+12025550123", n: 3 }, // Washington
      { sample: "+919876543210", n: 4 },
    ]
    expect(dominantCountry(groups, "US")).toBe("IN")
    expect(dominantCountry(groups.slice(0, 2), "IN")).toBe("US")
    expect(dominantCountry([], "IN")).toBeUndefined()
  })

  it("breaks a tie toward the workspace's country, else alphabetically", () => {
    const tie = [
      { sample: "+919876543210", n: 2 },
      { sample: "+12025550123", n: 2 },
    ]
    expect(dominantCountry(tie, "US")).toBe("US")
    expect(dominantCountry(tie, "IN")).toBe("IN")
    expect(dominantCountry(tie, "GB")).toBe("IN")
  })
})

describe("geographyDefault", () => {
  const pick = (audienceCountry: string | undefined, workspaceCountry: string, language: string) =>
    geographyDefault({ audienceCountry, workspaceCountry, language, ruleBookPersona: "amelia" })

  it("follows the table, first voice of the book's language", () => {
    expect(pick("IN", "US", "en-US")).toBe("priya")
    expect(pick("IN", "US", "hi-IN")).toBe("meera")
    expect(pick("US", "IN", "en-IN")).toBe("anya")
    expect(pick("NZ", "IN", "en-IN")).toBe("leo")
    expect(pick(undefined, "GB", "en-GB")).toBe("amelia")
  })

  it("falls back to the workspace's country, then neutral English, then any voice of the language", () => {
    expect(pick("FR", "IN", "en-IN")).toBe("priya")
    expect(pick("FR", "AE", "en-US")).toBe("amelia")
    expect(pick("US", "US", "hi-IN")).toBe("meera")
    expect(
      geographyDefault({ audienceCountry: "US", workspaceCountry: "US", language: "fr-FR", ruleBookPersona: "kai" }),
    ).toBe("kai")
  })

  it("names only catalogue voices", () => {
    const ids = new Set(VOICES.map((v) => v.id))
    for (const voices of Object.values(GEOGRAPHY_PERSONAS)) for (const v of voices) expect(ids.has(v)).toBe(true)
  })
})
