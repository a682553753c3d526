// The rule book a workflow's calls follow: its zod schema (shape), the semantic checks a tenant's
// book must also pass (validateRuleBook), its JSON Schema for structured output, PUT merging, and
// what a book is written from (RuleBookRequest: rulebook.prompt.ts, rulebook.sim-writer.ts).
import { z } from "zod"
import { AnalysisSection, analysisSectionErrors } from "../analysis/analysis.schema.js"
import { maxConcessionMinor } from "../billing/pricing.js"
import type { Currency } from "../platform/money.js"
import { findVoice, VOICES } from "../voices/voices.catalog.js"

export const RULE_BOOK_LANGUAGES = ["en-IN", "en-US", "en-GB", "en-AU", "hi-IN"] as const

/** The only placeholders a spoken line may carry; the call fills them in per callee. */
export const RULE_BOOK_PLACEHOLDERS = ["name", "agent_name", "company"] as const

const PERSONA_IDS = VOICES.map((v) => v.id) as [string, ...string[]]

const text = (max: number) => z.string().min(1).max(max)

const ObjectionHandler = z.object({
  /** The objection-library row this handler came from; null for one written by hand. */
  objection_id: z.number().int().positive().nullable(),
  category: text(60),
  trigger: text(300),
  response: text(1000),
})

export const RuleBook = z.object({
  schema_version: z.literal(1),
  name: text(200),
  goal: text(1000),
  language: z.enum(RULE_BOOK_LANGUAGES),
  persona: z.enum(PERSONA_IDS),
  system_prompt: text(8000),
  opening_line: text(500),
  disclosure_lines: z.array(text(300)).max(10),
  objection_handlers: z.array(ObjectionHandler).max(50),
  concession_policy: z.object({
    allowed: z.boolean(),
    cap_minor: z.number().int().min(0),
    currency: z.enum(["INR", "USD"]),
    requires_approval: z.boolean(),
  }),
  callback_policy: z.object({
    allowed: z.boolean(),
    max_days_ahead: z.number().int().min(1).max(30),
    requires_approval: z.boolean(),
  }),
  escalation_policy: z.object({
    allowed: z.boolean(),
    triggers: z.array(text(200)).max(20),
    requires_approval: z.boolean(),
  }),
  voicemail: z.enum(["hang_up", "leave_opening_line"]),
  max_call_seconds: z.number().int().min(30).max(1800),
  /** TRAI commercial-communication category (1–8); null: any NCPR registration blocks the number. */
  ncpr_category: z.number().int().min(1).max(8).nullable(),
  /**
   * Post-call analysis (src/analysis/): the fields to extract from each connected call beside the
   * built-ins, or `enabled: false` for none. Absent: every connected call gets the built-ins.
   */
  analysis: AnalysisSection.optional(),
  /**
   * Calls heard as audio: the silence that ends the callee's turn, how long a silent callee is
   * waited for before being asked again, and the silence after which the agent says goodbye.
   * Absent: 500 ms, 7 s and 21 s (two reprompts).
   */
  listening: z
    .object({
      end_of_speech_ms: z.number().int().min(200).max(2000),
      reprompt_after_seconds: z.number().int().min(2).max(30),
      goodbye_after_seconds: z.number().int().min(2).max(120),
    })
    .optional(),
  /**
   * Calls heard as audio are recorded when a disclosure line tells the callee so (one that mentions
   * recording); `false` turns recording off. Absent: recorded, when disclosed.
   */
  recording: z.boolean().optional(),
})

export type RuleBook = z.infer<typeof RuleBook>

/** A disclosure line that tells the callee the call is recorded (English, or Hindi written in Latin letters). */
const DISCLOSES_RECORDING = /\brecord(ed|ing|s)?\b|\brecord ki\b/i

/** Whether a call under this rule book is recorded: not turned off, and disclosed to the callee. */
export const recordsCalls = (book: Pick<RuleBook, "recording" | "disclosure_lines">): boolean =>
  book.recording !== false && book.disclosure_lines.some((l) => DISCLOSES_RECORDING.test(l))

/** The listening settings a rule book without its own uses. */
export const DEFAULT_LISTENING = { end_of_speech_ms: 500, reprompt_after_seconds: 7, goodbye_after_seconds: 21 }

/** How many times a silent callee is asked again before the goodbye (the silence adds up to goodbye_after_seconds). */
export const repromptsOf = (l: RuleBook["listening"] = DEFAULT_LISTENING): number =>
  Math.max(0, Math.floor(l.goodbye_after_seconds / l.reprompt_after_seconds) - 1)

export interface RuleBookError {
  readonly field: string
  readonly message: string
}

export type RuleBookValidation = { ok: true; value: RuleBook } | { ok: false; errors: RuleBookError[] }

export interface RuleBookContext {
  readonly currency: Currency
  readonly planTier: string
}

/**
 * Shape first (zod; unknown keys are dropped), then every semantic rule at once, so an author
 * fixing a book sees all of its problems in one 422 rather than one per attempt.
 */
export function validateRuleBook(input: unknown, ctx: RuleBookContext): RuleBookValidation {
  const parsed = RuleBook.safeParse(input)
  if (!parsed.success) {
    return {
      ok: false,
      errors: parsed.error.issues.map((i) => ({
        field: i.path.length === 0 ? "rule_book" : i.path.map(String).join("."),
        message: i.message,
      })),
    }
  }
  const errors = semanticErrors(parsed.data, ctx)
  return errors.length === 0 ? { ok: true, value: parsed.data } : { ok: false, errors }
}

function semanticErrors(book: RuleBook, ctx: RuleBookContext): RuleBookError[] {
  const errors: RuleBookError[] = []
  const fail = (field: string, message: string): void => void errors.push({ field, message })

  if (book.disclosure_lines.length === 0) fail("disclosure_lines", "at least one disclosure line is required")

  if (book.objection_handlers.length === 0) fail("objection_handlers", "at least one objection handler is required")
  const seenTriggers = new Map<string, number>()
  book.objection_handlers.forEach((h, i) => {
    const key = h.trigger.trim().toLowerCase()
    const first = seenTriggers.get(key)
    if (first === undefined) seenTriggers.set(key, i)
    else fail(`objection_handlers.${i}.trigger`, `duplicates the trigger of objection_handlers.${first}`)
  })

  const concession = book.concession_policy
  if (concession.currency !== ctx.currency) {
    fail("concession_policy.currency", `must be the workspace currency ${ctx.currency}`)
  }
  if (concession.allowed) {
    const ceiling = maxConcessionMinor(ctx.currency, ctx.planTier)
    if (concession.cap_minor <= 0)
      fail("concession_policy.cap_minor", "must be greater than 0 when concessions are allowed")
    // A cap in another currency's units says nothing about this ceiling; the currency error covers it.
    else if (concession.currency === ctx.currency && concession.cap_minor > ceiling)
      fail("concession_policy.cap_minor", `must be at most ${ceiling} (${ctx.currency} minor units)`)
  }

  // The enum check above guarantees the persona exists.
  const voice = findVoice(book.persona)
  if (voice !== undefined && languageFamily(voice.language) !== languageFamily(book.language)) {
    fail("persona", `persona ${book.persona} speaks ${voice.language}, which does not match language ${book.language}`)
  }

  const spoken: Array<[string, string]> = [
    ["opening_line", book.opening_line],
    ["system_prompt", book.system_prompt],
    ...book.disclosure_lines.map((line, i): [string, string] => [`disclosure_lines.${i}`, line]),
    ...book.objection_handlers.map((h, i): [string, string] => [`objection_handlers.${i}.response`, h.response]),
  ]
  for (const [field, value] of spoken) {
    const unknown = unknownPlaceholders(value)
    if (unknown.length > 0) {
      const allowed = RULE_BOOK_PLACEHOLDERS.map((p) => `{${p}}`).join(", ")
      fail(
        field,
        `unknown placeholder${unknown.length > 1 ? "s" : ""} ${unknown.map((p) => `{${p}}`).join(", ")}; ` +
          `only ${allowed} are filled in`,
      )
    }
  }

  if (book.escalation_policy.allowed && book.escalation_policy.triggers.length === 0) {
    fail("escalation_policy.triggers", "at least one trigger is required when escalation is allowed")
  }
  if (book.recording === true && !recordsCalls(book))
    fail("recording", "a recorded call must be disclosed: add a disclosure line that says the call is recorded")
  if (book.analysis !== undefined) errors.push(...analysisSectionErrors(book.analysis))
  if (book.listening !== undefined && book.listening.goodbye_after_seconds < book.listening.reprompt_after_seconds)
    fail("listening.goodbye_after_seconds", "must be at least reprompt_after_seconds (the goodbye follows a reprompt)")
  return errors
}

export const languageFamily = (tag: string): string => tag.split("-")[0]!.toLowerCase()

/** Every distinct `{…}` in `text` that is not an allowed placeholder, in order of appearance. */
export function unknownPlaceholders(text: string): string[] {
  const allowed: ReadonlySet<string> = new Set(RULE_BOOK_PLACEHOLDERS)
  const found = new Set<string>()
  for (const m of text.matchAll(/\{([^{}]*)\}/g)) {
    const name = m[1]!
    if (!allowed.has(name)) found.add(name)
  }
  return [...found]
}

/**
 * The rule book's JSON Schema (draft 2020-12), as zod writes it; see the LLM adapter for OpenAI's
 * dialect. A model writes the book without its analysis, listening and recording sections: the operator sets them.
 */
export function ruleBookJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(RuleBook.omit({ analysis: true, listening: true, recording: true })) as Record<string, unknown>
}

/** One row of the global objection library, as the generator may draw on it. */
export interface LibraryObjection {
  readonly id: number
  readonly category: string
  readonly trigger_text: string
  readonly rebuttal_template: string
}

export interface RuleBookRequest {
  /** The tenant's natural-language campaign description (nl_prompt). */
  prompt: string
  /** A persona id chosen by the caller (persona_override); wins over anything the prompt says. */
  persona?: string | undefined
  /** The workspace currency: the concession policy is written in it. */
  currency: Currency
  /** The workspace's ISO 3166-1 alpha-2 country (e.g. "IN"), for local rules such as India's NCPR. */
  country: string
  /** The workspace plan tier; it sets the concession ceiling. */
  planTier: string
  /** The objection library, loaded by the caller; handlers are drawn from it. */
  objections: ReadonlyArray<LibraryObjection>
}

/** Policies a PUT may change one field at a time: merged one level deep. */
const POLICY_KEYS: ReadonlySet<string> = new Set(["concession_policy", "callback_policy", "escalation_policy"])

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * `patch` laid over `current`: top-level keys replace, the three *_policy objects merge one level
 * deep (so `{concession_policy: {cap_minor: 1000}}` keeps the other concession fields). Keys whose
 * value is undefined are ignored. The result is unvalidated: pass it to validateRuleBook.
 */
export function mergeRuleBook(current: RuleBook, patch: Record<string, unknown>): unknown {
  const merged: Record<string, unknown> = { ...current }
  for (const [key, value] of Object.entries(patch)) {
    if (value === undefined) continue
    const base = merged[key]
    // A non-object policy value replaces the old one whole, and validation then reports it.
    merged[key] = POLICY_KEYS.has(key) && isPlainObject(value) && isPlainObject(base) ? { ...base, ...value } : value
  }
  return merged
}
