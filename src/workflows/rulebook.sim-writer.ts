// The simulator's rule-book writer: turns a campaign prompt into a rule book by plain text rules,
// deterministically, with no model account. The workflow service hands it to the language model as
// the offline answer (rulebook.prompt.ts), so the simulator answers with it and a real model ignores it.
import { maxConcessionMinor } from "../billing/pricing.js"
import { type Currency, formatAmount } from "../platform/money.js"
import { clip, wordsOf } from "../providers/llm/sim.text.js"
import { findVoice, VOICES, type Voice } from "../voices/voices.catalog.js"
import { GEOGRAPHY_PERSONAS } from "../voices/voices.geography.js"
import { RULE_BOOK_PLACEHOLDERS, type RuleBookRequest } from "./rulebook.schema.js"
import { objectionHandlers } from "./rulebook.sim-handlers.js"

/** The word that makes the simulator return a book failing validation (the API's 422 path). */
export const INVALID_RULEBOOK_MARKER = "INVALID_RULEBOOK"

const NAME_MAX = 60
const GOAL_MAX = 300
/** Leaves room in system_prompt (8000) for the rules around the embedded brief. */
const BRIEF_MAX = 5000
const TOPIC_MAX = 80

/** Cap used when a prompt allows concessions without naming an amount (clamped to the ceiling). */
const DEFAULT_CONCESSION_MINOR: Readonly<Record<Currency, number>> = { INR: 50_000, USD: 1_000 }
const DEFAULT_CALLBACK_DAYS = 7
const DEFAULT_CALL_SECONDS = 300

const DEFAULT_PERSONA: Readonly<Record<Currency, string>> = { INR: "priya", USD: "amelia" }
const HINDI_PERSONA = "meera"

const ESCALATION_TRIGGERS = [
  "The callee asks to speak to a human",
  "The callee is upset or threatens to complain",
  "The callee raises a legal, billing or data-protection dispute",
]

/** TRAI commercial-communication categories by the words that suggest them. */
const NCPR_CUES: ReadonlyArray<[number, readonly string[]]> = [
  [
    1,
    ["bank", "banking", "loan", "loans", "insurance", "credit", "emi", "finance", "financial", "investment", "mutual"],
  ],
  [2, ["property", "properties", "flat", "flats", "apartment", "apartments", "plot", "plots", "housing", "realty"]],
  [3, ["education", "course", "courses", "school", "college", "admission", "admissions", "tuition", "coaching"]],
  [4, ["health", "hospital", "clinic", "doctor", "medical", "pharmacy", "wellness"]],
  [5, ["car", "cars", "automobile", "vehicle", "vehicles", "bike", "appliance", "appliances", "electronics"]],
  [6, ["telecom", "mobile", "broadband", "internet", "dth", "entertainment", "software", "streaming"]],
  [7, ["travel", "tour", "tours", "tourism", "holiday", "holidays", "hotel", "resort", "flight", "flights"]],
  [8, ["food", "restaurant", "beverage", "beverages", "grocery", "groceries", "meal", "meals"]],
]

const SMALL_WORDS: ReadonlySet<string> = new Set([
  "a",
  "an",
  "the",
  "and",
  "or",
  "of",
  "to",
  "for",
  "in",
  "on",
  "at",
  "by",
  "with",
  "about",
  "from",
])

/** The simulator's rule book for `req`: a pure function of the request. */
export function simulateRuleBook(req: RuleBookRequest): Record<string, unknown> {
  const prompt = req.prompt.normalize("NFC").replace(/\s+/g, " ").trim()
  const brief = withoutPlaceholders(prompt)
  const words = wordsOf(prompt)

  const persona = choosePersona(req, prompt)
  const voice = findVoice(persona)
  const language = voice?.language ?? "en-IN"
  const hindi = language.startsWith("hi")

  const concession = concessionPolicy(prompt, req.currency, req.planTier)
  const callbackDays = callbackDaysAhead(prompt)
  const maxCallSeconds = callSeconds(prompt)
  const handlers = objectionHandlers(req.objections, words, callbackDays)

  const name = campaignName(brief)
  const goal = campaignGoal(brief)
  const book = {
    schema_version: 1,
    name,
    goal,
    language,
    persona,
    system_prompt: systemPrompt({
      brief,
      goal,
      voice,
      hindi,
      concession,
      currency: req.currency,
      callbackDays,
      maxCallSeconds,
    }),
    opening_line: hindi
      ? hindiOpening(voice)
      : `Hello {name}, this is {agent_name} calling from {company} about ${topicOf(brief, concession.allowed)}.` +
        " Do you have a minute?",
    disclosure_lines: hindi
      ? [
          "Yeh call {company} ki taraf se hai aur quality ke liye record ki ja sakti hai.",
          "Main {agent_name} hoon, {company} ki taraf se ek AI assistant.",
        ]
      : [
          "This call is from {company} and may be recorded for quality.",
          "I'm {agent_name}, an AI assistant calling on behalf of {company}.",
        ],
    objection_handlers: handlers,
    concession_policy: concession,
    callback_policy: { allowed: true, max_days_ahead: callbackDays, requires_approval: true },
    escalation_policy: { allowed: true, triggers: ESCALATION_TRIGGERS, requires_approval: true },
    voicemail: /\b(voicemail|voice mail|answering machine|leave a message)\b/i.test(prompt)
      ? "leave_opening_line"
      : "hang_up",
    max_call_seconds: maxCallSeconds,
    ncpr_category: req.country.toUpperCase() === "IN" ? ncprCategory(words) : null,
  }
  // The contract's failure path: well-formed, but without the disclosures and handlers every
  // book must have, so validation rejects it with field-level errors.
  if (new RegExp(`\\b${INVALID_RULEBOOK_MARKER}\\b`).test(req.prompt)) {
    return { ...book, disclosure_lines: [], objection_handlers: [] }
  }
  return book
}

// ---------------------------------------------------------------------------------------------
// Persona and language

function choosePersona(req: RuleBookRequest, prompt: string): string {
  if (req.persona !== undefined && req.persona !== "") return req.persona
  // The persona mentioned first wins ("like Rohan, not Kai").
  let named: { id: string; at: number } | undefined
  for (const v of VOICES) {
    const at = prompt.search(new RegExp(`\\b${v.id}\\b`, "i"))
    if (at !== -1 && (named === undefined || at < named.at)) named = { id: v.id, at }
  }
  if (named !== undefined) return named.id
  if (/\bhindi\b/i.test(prompt) || /[\u0900-\u097F]/.test(prompt)) return HINDI_PERSONA
  // A voice that sounds local in the workspace's country (at call time, a workflow with no persona
  // assigned speaks with the voice local to its audience: src/personas/geography.ts).
  return GEOGRAPHY_PERSONAS[req.country.toUpperCase()]?.[0] ?? DEFAULT_PERSONA[req.currency]
}

function hindiOpening(voice: Voice | undefined): string {
  // Hindi verbs agree with the speaker's gender.
  const speaking = voice?.gender === "male" ? "bol raha hoon" : "bol rahi hoon"
  return `Namaste {name}, main {agent_name} ${speaking}, {company} se. Kya aapke paas ek minute hai?`
}

// ---------------------------------------------------------------------------------------------
// Name, goal, topic, system prompt

/** The prompt with braces taken off anything but the allowed placeholders, so it can be embedded. */
function withoutPlaceholders(text: string): string {
  return text.replace(/\{([^{}]*)\}/g, (whole, inner: string) =>
    (RULE_BOOK_PLACEHOLDERS as readonly string[]).includes(inner) ? whole : inner,
  )
}

const firstSentence = (text: string): string => (text.split(/(?<=[.!?])\s+|\n/)[0] ?? "").trim()

function campaignName(brief: string): string {
  let clause = firstSentence(brief).replace(/[.!?]+$/, "")
  // A long sentence is named by its first clause.
  if (clause.length > NAME_MAX) clause = (clause.split(/[,;:–—]|\s-\s/)[0] ?? clause).trim()
  clause = clip(
    clause
      .replace(/\bINVALID_RULEBOOK\b/g, "")
      .replace(/\s+/g, " ")
      .trim(),
    NAME_MAX,
  )
  // "… bill and" reads cut off: a clipped name ends on a content word.
  const words = clause.split(" ")
  while (words.length > 1 && SMALL_WORDS.has(words[words.length - 1]!.toLowerCase())) words.pop()
  if (clause === "") return "Voice campaign"
  return words
    .map((w, i) =>
      i > 0 && SMALL_WORDS.has(w.toLowerCase()) ? w.toLowerCase() : w.charAt(0).toUpperCase() + w.slice(1),
    )
    .join(" ")
}

function campaignGoal(brief: string): string {
  const sentence = clip(firstSentence(brief), GOAL_MAX).replace(/[.!?]+$/, "")
  if (sentence === "") return "Reach each contact and handle the conversation politely."
  return `${sentence.charAt(0).toUpperCase()}${sentence.slice(1)}.`
}

/** What the opening line says the call is about: the prompt's own "about …", else a neutral phrase. */
function topicOf(brief: string, offers: boolean): string {
  const about = /\babout\s+([^.,;:!?]{3,})/i.exec(brief)?.[1]
  if (about !== undefined) {
    // "about their bill and offer a discount" is about the bill: stop at the next clause.
    const subject =
      about.split(/\s(?:and|if|to|so|because|who|which|that|but|or|with|before|after|by|unless|until|while)\s/i)[0] ??
      about
    const topic = clip(subject.trim(), TOPIC_MAX)
      .replace(/\b(their|his|her|its)\b/gi, "your")
      .replace(/\b(them|him)\b/gi, "you")
    if (topic !== "") return topic
  }
  // Else what the campaign is evidently about, by the first subject the brief names.
  let first: { at: number; subject: string } | undefined
  for (const [cue, subject] of SUBJECTS) {
    const at = brief.search(cue)
    if (at !== -1 && (first === undefined || at < first.at)) first = { at, subject }
  }
  if (first !== undefined) return first.subject
  return offers ? "an offer for you" : "your account with us"
}

/** What a call is about, by the words of a brief that name it (so a dental recall says so). */
const SUBJECTS: ReadonlyArray<readonly [RegExp, string]> = [
  [/\b(dental|dentist|check-?ups?|cleanings?|hygienist)\b/i, "your next dental visit"],
  [/\b(appointments?|consultations?)\b/i, "your appointment"],
  [/\b(members?|memberships?|gym)\b/i, "your membership"],
  [/\b(renew\w*)\b/i, "your renewal"],
  [/\bsubscri\w*\b/i, "your subscription"],
  [/\b(bills?|invoices?|payments?|dues|arrears)\b/i, "your bill"],
  [/\b(orders?|deliver\w*|shipments?)\b/i, "your order"],
  [/\b(polic(y|ies)|insurance|premiums?)\b/i, "your policy"],
  [/\b(loans?|emi|mortgages?)\b/i, "your loan"],
  [/\b(bookings?|reservations?|stays?)\b/i, "your booking"],
  [/\b(carts?|checkout)\b/i, "the items in your cart"],
  [/\b(surveys?|feedback)\b/i, "a short survey"],
  [/\b(events?|webinars?|workshops?)\b/i, "our upcoming event"],
  [/\b(trials?|demos?)\b/i, "your trial"],
]

interface PromptParts {
  brief: string
  goal: string
  voice: Voice | undefined
  hindi: boolean
  concession: ConcessionPolicy
  currency: Currency
  callbackDays: number
  maxCallSeconds: number
}

function systemPrompt(p: PromptParts): string {
  const speak = p.hindi
    ? "Speak Hindi, simply and respectfully; use common English words where callers do."
    : `Speak ${p.voice?.accent ?? "English"}, warmly and concisely.`
  const concession = p.concession.allowed
    ? `You may propose a concession of at most ${formatAmount(p.concession.cap_minor, p.currency)}; ` +
      "a human approves it before you confirm it to the callee."
    : "Do not offer discounts, waivers or other concessions."
  const minutes = Math.max(1, Math.round(p.maxCallSeconds / 60))
  return [
    `You are {agent_name}, a voice agent calling {name} on behalf of {company}. ${speak}`,
    `Campaign brief: ${clip(p.brief, BRIEF_MAX)}`,
    `Goal: ${p.goal}`,
    "Rules:",
    "- Start with the opening line and the disclosure lines, before anything else.",
    `- Keep the call under ${minutes} minute${minutes === 1 ? "" : "s"}; ` +
      "one question at a time; let the callee finish speaking.",
    "- Use the objection handlers when the callee objects; never argue or pressure.",
    `- ${concession}`,
    `- You may offer to call back within ${p.callbackDays} day${p.callbackDays === 1 ? "" : "s"}; ` +
      "a human approves the callback.",
    "- If the callee asks for a human or an escalation trigger occurs, offer a transfer; a human approves it.",
    "- If the callee asks not to be called again, apologise, confirm they will not be called, and end the call.",
    "- Never invent prices, terms or facts that are not in this brief.",
  ].join("\n")
}

// ---------------------------------------------------------------------------------------------
// Policies

interface ConcessionPolicy {
  allowed: boolean
  cap_minor: number
  currency: Currency
  requires_approval: boolean
}

const CONCESSION_WORDS = /\b(discount\w*|offer\w*|concession\w*|waiv\w*|rebate\w*|cashback|coupon\w*|promo\w*)\b/i

function concessionPolicy(prompt: string, currency: Currency, planTier: string): ConcessionPolicy {
  if (!CONCESSION_WORDS.test(prompt)) return { allowed: false, cap_minor: 0, currency, requires_approval: true }
  const ceiling = maxConcessionMinor(currency, planTier)
  const named = amountInPrompt(prompt, currency)
  const cap = named !== undefined && named > 0 ? named : DEFAULT_CONCESSION_MINOR[currency]
  return { allowed: true, cap_minor: Math.min(cap, ceiling), currency, requires_approval: true }
}

const NUMBER = String.raw`(\d[\d,]*(?:\.\d{1,2})?)`
const INR_MARK = String.raw`(?:₹|rs\.?|inr)`
const USD_MARK = String.raw`(?:\$|usd|us\$)`

/**
 * The first amount in the tenant's currency, in minor units: "₹500", "Rs. 1,200", "$20",
 * "20 dollars", else a bare "up to 500". Amounts in the other currency are ignored: the
 * simulator does not convert money.
 */
function amountInPrompt(prompt: string, currency: Currency): number | undefined {
  const mark = currency === "INR" ? INR_MARK : USD_MARK
  const word = currency === "INR" ? String.raw`(?:rupees?|rs\.?|inr)` : "(?:dollars?|usd)"
  const patterns = [
    new RegExp(`${mark}\\s*${NUMBER}`, "i"),
    new RegExp(`${NUMBER}\\s*${word}(?![a-z])`, "i"),
    // A bare number only after "up to", and not a count of days, minutes or a percentage.
    new RegExp(
      `\\bup to\\s+${NUMBER}(?![\\d,.]|\\s*` +
        "(?:%|percent|per cent|days?|weeks?|hours?|mins?|minutes?|seconds?|secs?|months?)\\b|\\s*%)",
      "i",
    ),
  ]
  for (const p of patterns) {
    const m = p.exec(prompt)
    if (m?.[1] !== undefined) {
      const value = Number(m[1].replace(/,/g, ""))
      if (Number.isFinite(value)) return Math.round(value * 100)
    }
  }
  return undefined
}

function callbackDaysAhead(prompt: string): number {
  const m = /\bwithin\s+(\d{1,3})\s+days?\b/i.exec(prompt)
  return m?.[1] === undefined ? DEFAULT_CALLBACK_DAYS : clamp(Number(m[1]), 1, 30)
}

const CALL_LENGTH = new RegExp(
  String.raw`\b(?:under|within|at most|max(?:imum)?(?: of)?|no (?:more|longer) than|less than|up to)` +
    String.raw`\s+(\d{1,4})\s*(minutes?|mins?|seconds?|secs?)\b`,
  "i",
)

function callSeconds(prompt: string): number {
  const m = CALL_LENGTH.exec(prompt)
  if (m?.[1] === undefined || m[2] === undefined) return DEFAULT_CALL_SECONDS
  const seconds = Number(m[1]) * (m[2].toLowerCase().startsWith("m") ? 60 : 1)
  return clamp(seconds, 30, 1800)
}

function ncprCategory(words: ReadonlySet<string>): number | null {
  let best: { category: number; hits: number } | undefined
  for (const [category, cues] of NCPR_CUES) {
    const hits = cues.filter((c) => words.has(c)).length
    if (hits > 0 && (best === undefined || hits > best.hits)) best = { category, hits }
  }
  // Unknown sector: null, the conservative reading (any NCPR registration blocks the number).
  return best?.category ?? null
}

const clamp = (n: number, lo: number, hi: number): number => Math.min(hi, Math.max(lo, n))
