// The persona body: free-form JSON whose known fields are checked here (zod) and whose other
// fields are kept as `attributes`. Create needs `name`; an edit may send any subset.
import { z } from "zod"
import { VOICES } from "../voices/voices.catalog.js"
import { RULE_BOOK_PLACEHOLDERS, unknownPlaceholders } from "../workflows/rulebook.schema.js"

export const NAME_MAX = 100
export const GREETING_MAX = 500
export const AGENT_NAME_MAX = 60
export const STYLE_WORDS_MAX = 10
export const STYLE_WORD_MAX = 40
export const RATE_MIN = 0.5
export const RATE_MAX = 2
export const ATTRIBUTES_MAX_KEYS = 50
export const ATTRIBUTES_MAX_BYTES = 8 * 1024

/** Fields Parley reads from the body; every other field becomes an attribute. */
export const KNOWN_FIELDS = [
  "name",
  "language",
  "voice",
  "style",
  "greeting",
  "agent_name",
  "speaking_rate",
  "attributes",
] as const
/** Fields of a persona as it is shown: sent back in a body, they are ignored rather than kept. */
export const READ_ONLY_FIELDS = ["id", "builtin", "workflow_ids", "created_at", "updated_at", "tenant_id"] as const

const VOICE_IDS = VOICES.map((v) => v.id)

const Name = z
  .string({ error: "must be a string" })
  .trim()
  .min(1, "must not be empty")
  .max(NAME_MAX, `must be at most ${NAME_MAX} characters`)

/** A BCP 47 tag, in its canonical form ("en-us" → "en-US"). */
export const Language = z
  .string({ error: "must be a BCP 47 language tag such as en-IN" })
  .trim()
  .min(2, "must be a BCP 47 language tag such as en-IN")
  .max(64, "must be at most 64 characters")
  .transform((tag, ctx) => {
    try {
      const [canonical] = Intl.getCanonicalLocales(tag)
      if (canonical !== undefined) return canonical
    } catch {
      // RangeError: not a well-formed tag.
    }
    ctx.addIssue({ code: "custom", message: `must be a BCP 47 language tag such as en-IN, not "${tag}"` })
    return z.NEVER
  })

/** A catalogue voice id, or the integer id of one of the workspace's cloned voices. */
export const VoiceRef = z.union(
  [z.enum(VOICE_IDS as [string, ...string[]]), z.number().int().positive().max(Number.MAX_SAFE_INTEGER)],
  { error: `must be a catalogue voice (${VOICE_IDS.join(", ")}) or the integer id of a cloned voice` },
)

const StyleWord = z
  .string()
  .trim()
  .min(1, "must not be empty")
  .max(STYLE_WORD_MAX, `each tone word must be at most ${STYLE_WORD_MAX} characters`)

/** Tone words: an array of short strings, or one string of them separated by commas. */
export const Style = z
  .union([z.string().max(1000), z.array(z.string()).max(STYLE_WORDS_MAX * 2)], {
    error: "must be tone words: an array of short strings, or a string of them separated by commas",
  })
  .transform((s) => (typeof s === "string" ? s.split(",").filter((w) => w.trim() !== "") : s))
  .pipe(z.array(StyleWord).max(STYLE_WORDS_MAX, `must be at most ${STYLE_WORDS_MAX} tone words`))

export const Greeting = z
  .string({ error: "must be a string" })
  .trim()
  .min(1, "must not be empty (send null to clear it)")
  .max(GREETING_MAX, `must be at most ${GREETING_MAX} characters`)
  .superRefine((text, ctx) => {
    const unknown = unknownPlaceholders(text)
    if (unknown.length > 0)
      ctx.addIssue({
        code: "custom",
        message:
          `unknown placeholder${unknown.length > 1 ? "s" : ""} ${unknown.map((p) => `{${p}}`).join(", ")}; ` +
          `only ${RULE_BOOK_PLACEHOLDERS.map((p) => `{${p}}`).join(", ")} are filled in`,
      })
  })

const AgentName = z
  .string({ error: "must be a string" })
  .trim()
  .min(1, "must not be empty (send null to clear it)")
  .max(AGENT_NAME_MAX, `must be at most ${AGENT_NAME_MAX} characters`)

const SpeakingRate = z
  .number({ error: `must be a number from ${RATE_MIN} to ${RATE_MAX}` })
  .min(RATE_MIN, `must be at least ${RATE_MIN}`)
  .max(RATE_MAX, `must be at most ${RATE_MAX}`)

const Attributes = z.record(z.string().max(100, "attribute names must be at most 100 characters"), z.unknown(), {
  error: "must be an object",
})

const fields = {
  voice: VoiceRef.nullable().optional(),
  style: Style.optional(),
  greeting: Greeting.nullable().optional(),
  agent_name: AgentName.nullable().optional(),
  speaking_rate: SpeakingRate.nullable().optional(),
  attributes: Attributes.optional(),
}

/** POST /api/personas: `name` required; null on an optional field is the same as leaving it out. */
export const CreatePersona = z.looseObject({ name: Name, language: Language.optional(), ...fields })
export type CreatePersona = z.output<typeof CreatePersona>

/** PUT /api/personas/{id}: the fields sent replace the persona's; null clears an optional one. */
export const UpdatePersona = z.looseObject({ name: Name.optional(), language: Language.optional(), ...fields })
export type UpdatePersona = z.output<typeof UpdatePersona>

/**
 * The body's attributes: its `attributes` object and its other fields (read-only ones dropped),
 * laid over `current`; a null value removes the attribute.
 */
export function mergedAttributes(
  current: Readonly<Record<string, unknown>>,
  body: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const known: ReadonlySet<string> = new Set<string>([...KNOWN_FIELDS, ...READ_ONLY_FIELDS])
  const loose = Object.entries(body).filter(([k]) => !known.has(k))
  const given = { ...((body["attributes"] as Record<string, unknown> | undefined) ?? {}), ...Object.fromEntries(loose) }
  // A Map, not assignment: a field named "__proto__" stays a field.
  const out = new Map(Object.entries(current))
  for (const [k, v] of Object.entries(given)) {
    if (v === null) out.delete(k)
    else out.set(k, v)
  }
  return Object.fromEntries(out)
}

/** Why a persona's attributes are too big, or undefined when they fit. */
export function attributesProblem(attributes: Readonly<Record<string, unknown>>): string | undefined {
  const keys = Object.keys(attributes).length
  if (keys > ATTRIBUTES_MAX_KEYS) return `must have at most ${ATTRIBUTES_MAX_KEYS} fields (it would have ${keys})`
  const bytes = Buffer.byteLength(JSON.stringify(attributes), "utf8")
  if (bytes > ATTRIBUTES_MAX_BYTES)
    return `must be at most ${ATTRIBUTES_MAX_BYTES} bytes as JSON (it would be ${bytes}); keep extra fields small`
  return undefined
}
