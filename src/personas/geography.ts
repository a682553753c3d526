// The geography default: the built-in persona a workflow speaks as when none is assigned to it,
// from the country its audience is mostly in (else the workspace's) and its rule book's language.
import { parsePhoneNumberFromString } from "libphonenumber-js/max"
import { VOICES } from "../voices/voices.catalog.js"
import { languageFamily } from "../workflows/rulebook.schema.js"

/**
 * Country (ISO 3166-1 alpha-2) → the catalogue voices that sound local there, best first. The
 * first whose language matches the rule book's (by language family, as the rule book's own check)
 * wins: an Indian audience hears Priya, or Meera when the rule book is in Hindi.
 */
export const GEOGRAPHY_PERSONAS: Readonly<Record<string, readonly string[]>> = {
  IN: ["priya", "rohan", "meera"],
  US: ["anya", "kai"],
  CA: ["anya", "kai"],
  GB: ["amelia"],
  IE: ["amelia"],
  SG: ["amelia"],
  AU: ["leo"],
  NZ: ["leo"],
}

/** Anywhere else (and when neither country is in the table): neutral English voices. */
export const INTERNATIONAL_PERSONAS: readonly string[] = ["amelia", "anya"]

/** One group of an audience's numbers: a sample number and how many share its country. */
export interface AudienceGroup {
  readonly sample: string
  readonly n: number
}

/**
 * The country most of the audience's numbers are in (libphonenumber on each group's sample),
 * undefined for an empty audience. Ties go to the workspace's country, then alphabetically.
 */
export function dominantCountry(groups: ReadonlyArray<AudienceGroup>, workspaceCountry: string): string | undefined {
  const counts = new Map<string, number>()
  for (const g of groups) {
    const country = parsePhoneNumberFromString(g.sample)?.country
    if (country !== undefined) counts.set(country, (counts.get(country) ?? 0) + g.n)
  }
  let best: { country: string; n: number } | undefined
  for (const [country, n] of [...counts].sort(([a], [b]) => a.localeCompare(b))) {
    if (best === undefined || n > best.n || (n === best.n && country === workspaceCountry)) best = { country, n }
  }
  return best?.country
}

export interface GeographyInput {
  /** The audience's dominant country (dominantCountry), if it has any numbers. */
  readonly audienceCountry: string | undefined
  readonly workspaceCountry: string
  /** The workflow's rule-book language (BCP 47). */
  readonly language: string
  /** The rule book's own persona: the last resort, as it always speaks the book's language. */
  readonly ruleBookPersona: string
}

/**
 * The catalogue voice id of the workflow's geography default: the audience country's candidates,
 * then the workspace country's, then the international ones, each filtered to the rule book's
 * language family; failing all (a Hindi book for a US audience), a built-in speaking the book's
 * exact language, then its family; last, the rule book's own persona.
 */
export function geographyDefault(input: GeographyInput): string {
  const family = languageFamily(input.language)
  const speaks = (id: string) => {
    const v = VOICES.find((x) => x.id === id)
    return v !== undefined && languageFamily(v.language) === family
  }
  const tiers = [
    input.audienceCountry === undefined ? [] : (GEOGRAPHY_PERSONAS[input.audienceCountry] ?? []),
    GEOGRAPHY_PERSONAS[input.workspaceCountry] ?? [],
    INTERNATIONAL_PERSONAS,
  ]
  for (const tier of tiers) {
    const hit = tier.find(speaks)
    if (hit !== undefined) return hit
  }
  const exact = VOICES.find((v) => v.language.toLowerCase() === input.language.toLowerCase())
  if (exact !== undefined) return exact.id
  return VOICES.find((v) => languageFamily(v.language) === family)?.id ?? input.ruleBookPersona
}
