// The geography default: the built-in persona a workflow speaks as when none is assigned to it,
// from the country its audience is mostly in (else the workspace's) and its rule book's language.
import { VOICES } from "../voices/voices.catalog.js"
import { GEOGRAPHY_PERSONAS, INTERNATIONAL_PERSONAS } from "../voices/voices.geography.js"

export {
  type AudienceGroup,
  dominantCountry,
  GEOGRAPHY_PERSONAS,
  INTERNATIONAL_PERSONAS,
} from "../voices/voices.geography.js"

import { languageFamily } from "../workflows/rulebook.schema.js"

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
