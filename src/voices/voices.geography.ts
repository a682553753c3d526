// Where a voice sounds local: the catalogue personas by country, and the country an audience is
// mostly in. Pure data and arithmetic over phone numbers, shared by the rule-book writer (which
// picks the book's persona) and the personas' geography default (which picks the call's voice).
import { parsePhoneNumberFromString } from "libphonenumber-js/max"

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
