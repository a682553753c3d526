// The offline language-model simulator: turns a campaign prompt into a rule book and answers a
// call's turns from that book, by plain text rules, deterministically, with no model account.
import { formatMinor, maxConcessionMinor, type Currency } from "../../billing/pricing.js"
import { findVoice, VOICES, type Voice } from "../../voices/voices.catalog.js"
import { RULE_BOOK_PLACEHOLDERS, type RuleBook } from "../../workflows/rulebook.schema.js"
import {
  fillPlaceholders,
  type AgentOutcome,
  type AgentReply,
  type LanguageModel,
  type LibraryObjection,
  type ProposalAction,
  type ReplyRequest,
  type RuleBookRequest,
} from "./llm.interface.js"

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

/** Handlers for when the caller passes an empty objection library: a book needs at least one. */
const BUILT_IN_HANDLERS = [
  { category: "timing", trigger: "I'm busy right now.", response: "Of course, I'll be brief, or I can call you back at a better time. Which would you prefer?" },
  { category: "not_interested", trigger: "I'm not interested.", response: "I understand, {name}. Thank you for your time, and have a good day." },
  {
    category: "do_not_call",
    trigger: "Don't call me again.",
    response: "Understood. I'm adding your number to our do-not-call list now, and you won't hear from {company} again.",
  },
]

/**
 * Words in a prompt that make a library category relevant. A category's own trigger texts count
 * too; these add the campaign-side words ("renewal" suggests timing objections).
 */
const CATEGORY_CUES: Readonly<Record<string, readonly string[]>> = {
  price: ["price", "pricing", "cost", "costs", "expensive", "cheap", "cheaper", "discount", "fee", "fees", "emi", "bill", "tariff", "rate", "rates", "payment"],
  timing: ["appointment", "schedule", "reschedule", "callback", "later", "busy", "reminder", "remind", "renewal", "renew", "due", "deadline"],
  need: ["upgrade", "switch", "provider", "product", "plan", "plans", "service", "sell", "sales", "offer"],
  trust: ["verify", "verification", "kyc", "consent", "scam", "fraud", "bank", "account", "security"],
  authority: ["business", "owner", "manager", "decision", "family", "spouse", "household"],
  information: ["details", "information", "brochure", "email", "explain", "features", "inform"],
  not_interested: ["winback", "lapsed", "survey", "feedback", "promotion", "sales", "offer"],
}

/** Always handled when the library has it: ignoring "don't call me again" is a compliance failure. */
const ALWAYS_CATEGORY = "do_not_call"
const MAX_RELEVANT = 6
const FALLBACK_COUNT = 5

const STOP_WORDS: ReadonlySet<string> = new Set(
  (
    "the and for from with about this that these those your you our they them their it's its i'm don't can't " +
    "call calls calling called customer customers again right now get can will would should could into " +
    "before after more than then there here what when who how why are was were has have had not but all any"
  ).split(" "),
)

/** TRAI commercial-communication categories by the words that suggest them. */
const NCPR_CUES: ReadonlyArray<[number, readonly string[]]> = [
  [1, ["bank", "banking", "loan", "loans", "insurance", "credit", "emi", "finance", "financial", "investment", "mutual"]],
  [2, ["property", "properties", "flat", "flats", "apartment", "apartments", "plot", "plots", "housing", "realty"]],
  [3, ["education", "course", "courses", "school", "college", "admission", "admissions", "tuition", "coaching"]],
  [4, ["health", "hospital", "clinic", "doctor", "medical", "pharmacy", "wellness"]],
  [5, ["car", "cars", "automobile", "vehicle", "vehicles", "bike", "appliance", "appliances", "electronics"]],
  [6, ["telecom", "mobile", "broadband", "internet", "dth", "entertainment", "software", "streaming"]],
  [7, ["travel", "tour", "tours", "tourism", "holiday", "holidays", "hotel", "resort", "flight", "flights"]],
  [8, ["food", "restaurant", "beverage", "beverages", "grocery", "groceries", "meal", "meals"]],
]

const SMALL_WORDS: ReadonlySet<string> = new Set(["a", "an", "the", "and", "or", "of", "to", "for", "in", "on", "at", "by", "with", "about", "from"])

export function makeSimLlm(): LanguageModel {
  return {
    name: "sim",
    model: "sim-1",
    async generateRuleBook(req: RuleBookRequest): Promise<unknown> {
      return simulateRuleBook(req)
    },
    async reply(req: ReplyRequest): Promise<AgentReply> {
      return simulateReply(req)
    },
  }
}

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
    system_prompt: systemPrompt({ brief, goal, voice, hindi, concession, currency: req.currency, callbackDays, maxCallSeconds }),
    opening_line: hindi ? hindiOpening(voice) : `Hello {name}, this is {agent_name} calling from {company} about ${topicOf(brief, concession.allowed)}. Do you have a minute?`,
    disclosure_lines: hindi
      ? ["Yeh call {company} ki taraf se hai aur quality ke liye record ki ja sakti hai.", "Main {agent_name} hoon, {company} ki taraf se ek AI assistant."]
      : ["This call is from {company} and may be recorded for quality.", "I'm {agent_name}, an AI assistant calling on behalf of {company}."],
    objection_handlers: handlers,
    concession_policy: concession,
    callback_policy: { allowed: true, max_days_ahead: callbackDays, requires_approval: true },
    escalation_policy: { allowed: true, triggers: ESCALATION_TRIGGERS, requires_approval: true },
    voicemail: /\b(voicemail|voice mail|answering machine|leave a message)\b/i.test(prompt) ? "leave_opening_line" : "hang_up",
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
  return DEFAULT_PERSONA[req.currency]
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
  return text.replace(/\{([^{}]*)\}/g, (whole, inner: string) => ((RULE_BOOK_PLACEHOLDERS as readonly string[]).includes(inner) ? whole : inner))
}

const firstSentence = (text: string): string => (text.split(/(?<=[.!?])\s+|\n/)[0] ?? "").trim()

/** `text` cut to at most `max` characters at a word boundary. */
function clip(text: string, max: number): string {
  if (text.length <= max) return text
  const cut = text.slice(0, max + 1)
  const space = cut.lastIndexOf(" ")
  return (space > max / 2 ? cut.slice(0, space) : text.slice(0, max)).replace(/[\s,;:–—-]+$/, "")
}

function campaignName(brief: string): string {
  let clause = firstSentence(brief).replace(/[.!?]+$/, "")
  // A long sentence is named by its first clause.
  if (clause.length > NAME_MAX) clause = (clause.split(/[,;:–—]|\s-\s/)[0] ?? clause).trim()
  clause = clip(clause.replace(/\bINVALID_RULEBOOK\b/g, "").replace(/\s+/g, " ").trim(), NAME_MAX)
  // "… bill and" reads cut off: a clipped name ends on a content word.
  const words = clause.split(" ")
  while (words.length > 1 && SMALL_WORDS.has(words[words.length - 1]!.toLowerCase())) words.pop()
  if (clause === "") return "Voice campaign"
  return words
    .map((w, i) => (i > 0 && SMALL_WORDS.has(w.toLowerCase()) ? w.toLowerCase() : w.charAt(0).toUpperCase() + w.slice(1)))
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
    const subject = about.split(/\s(?:and|if|to|so|because|who|which|that|but|or|with|before|after|by|unless|until|while)\s/i)[0] ?? about
    const topic = clip(subject.trim(), TOPIC_MAX)
      .replace(/\b(their|his|her|its)\b/gi, "your")
      .replace(/\b(them|him)\b/gi, "you")
    if (topic !== "") return topic
  }
  return offers ? "a special offer for you" : "your account with us"
}

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
    ? `You may propose a concession of at most ${formatMinor(p.concession.cap_minor, p.currency)}; a human approves it before you confirm it to the callee.`
    : "Do not offer discounts, waivers or other concessions."
  const minutes = Math.max(1, Math.round(p.maxCallSeconds / 60))
  return [
    `You are {agent_name}, a voice agent calling {name} on behalf of {company}. ${speak}`,
    `Campaign brief: ${clip(p.brief, BRIEF_MAX)}`,
    `Goal: ${p.goal}`,
    "Rules:",
    "- Start with the opening line and the disclosure lines, before anything else.",
    `- Keep the call under ${minutes} minute${minutes === 1 ? "" : "s"}; one question at a time; let the callee finish speaking.`,
    "- Use the objection handlers when the callee objects; never argue or pressure.",
    `- ${concession}`,
    `- You may offer to call back within ${p.callbackDays} day${p.callbackDays === 1 ? "" : "s"}; a human approves the callback.`,
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
  const word = currency === "INR" ? String.raw`(?:rupees?|rs\.?|inr)` : String.raw`(?:dollars?|usd)`
  const patterns = [
    new RegExp(`${mark}\\s*${NUMBER}`, "i"),
    new RegExp(`${NUMBER}\\s*${word}(?![a-z])`, "i"),
    // A bare number only after "up to", and not a count of days, minutes or a percentage.
    new RegExp(`\\bup to\\s+${NUMBER}(?![\\d,.]|\\s*(?:%|percent|per cent|days?|weeks?|hours?|mins?|minutes?|seconds?|secs?|months?)\\b|\\s*%)`, "i"),
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

function callSeconds(prompt: string): number {
  const m = /\b(?:under|within|at most|max(?:imum)?(?: of)?|no (?:more|longer) than|less than|up to)\s+(\d{1,4})\s*(minutes?|mins?|seconds?|secs?)\b/i.exec(prompt)
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

// ---------------------------------------------------------------------------------------------
// Objection handlers

function wordsOf(text: string): Set<string> {
  return new Set((text.toLowerCase().match(/[a-z]+/g) ?? []).filter((w) => w.length >= 3 && !STOP_WORDS.has(w)))
}

interface Handler {
  objection_id: number | null
  category: string
  trigger: string
  response: string
}

/**
 * Library rows related to the prompt (by category cues and trigger words), strongest first; too
 * few related → one row per category in id order, so every book covers the common objections.
 */
function objectionHandlers(library: ReadonlyArray<LibraryObjection>, words: ReadonlySet<string>, callbackDays: number): Handler[] {
  if (library.length === 0) return BUILT_IN_HANDLERS.map((h) => ({ objection_id: null, ...h }))
  const rows = [...library].sort((a, b) => a.id - b.id)
  const score = (o: LibraryObjection): number => {
    const cues = (CATEGORY_CUES[o.category] ?? []).filter((c) => words.has(c)).length
    const overlap = [...wordsOf(`${o.category.replace(/_/g, " ")} ${o.trigger_text}`)].filter((w) => words.has(w)).length
    return cues * 2 + overlap
  }
  const related = rows
    .map((o) => ({ o, s: score(o) }))
    .filter((x) => x.s > 0 && x.o.category !== ALWAYS_CATEGORY)
    .sort((a, b) => b.s - a.s || a.o.id - b.o.id)
    .slice(0, MAX_RELEVANT)
    .map((x) => x.o)

  const picked = new Map<number, LibraryObjection>(related.map((o) => [o.id, o]))
  if (picked.size < 3) {
    const covered = new Set([...picked.values()].map((o) => o.category))
    for (const o of rows) {
      if (picked.size >= FALLBACK_COUNT) break
      if (o.category === ALWAYS_CATEGORY || covered.has(o.category)) continue
      covered.add(o.category)
      picked.set(o.id, o)
    }
  }
  const dnc = rows.find((o) => o.category === ALWAYS_CATEGORY)
  if (dnc !== undefined) picked.set(dnc.id, dnc)

  const seenTriggers = new Set<string>()
  const handlers: Handler[] = []
  for (const o of [...picked.values()].sort((a, b) => a.id - b.id)) {
    const trigger = clip(o.trigger_text.trim(), 300)
    const key = trigger.toLowerCase()
    if (trigger === "" || seenTriggers.has(key)) continue
    seenTriggers.add(key)
    handlers.push({
      objection_id: o.id,
      category: clip(o.category, 60),
      trigger,
      response: clip(fillTemplate(o.rebuttal_template, callbackDays), 1000),
    })
  }
  return handlers
}

/**
 * Library templates also use {offer} and {callback_window}, which a rule book may not carry (only
 * {name}, {agent_name} and {company} are filled per call): they are written out here.
 */
function fillTemplate(template: string, callbackDays: number): string {
  const window = callbackDays <= 1 ? "tomorrow" : callbackDays >= 5 ? "later this week" : "in the next few days"
  return template.replace(/\{([^{}]*)\}/g, (whole, inner: string) => {
    switch (inner) {
      case "name":
      case "agent_name":
      case "company":
        return whole
      case "offer":
        return "our current offer"
      case "callback_window":
        return window
      default:
        return inner.replace(/_/g, " ")
    }
  })
}

// ---------------------------------------------------------------------------------------------
// Answering turns
//
// The simulator keeps no state between turns: everything it needs is in the request (the
// transcript, the latest human decision), so any runtime process can answer any call's next turn.

/** The simulator ends a call without a decision when its answer would be this many turns in. */
export const SIM_TURN_CAP = 16

const DO_NOT_CALL_ASK = /\b(?:(?:don't|do not|never) (?:ever )?call (?:me|this number)|stop calling|remove (?:me|my number)|take me off)\b/
const HUMAN_ASK = /\b(?:human|real person|a person|manager|supervisor|representative|operator)\b/
const CALLBACK_ASK = /\b(?:call (?:me )?back|callback|call me later|another time|tomorrow)\b/
const DECLINE = /\b(?:not interested|no thanks|no,? thank you|not for me|i'll pass|(?:don't|do not) (?:\w+ ){0,3}need)\b/
const DISCOUNT_ASK = /\b(?:discount|better price|lower price|cheaper|better deal|reduce the price|any offers?)\b/
const AGREE = /\b(?:yes|yeah|yep|sure|sounds good|okay|ok|go ahead|that works|i'm in|let's do it|deal)\b/

/**
 * The concession the simulator asks a human to approve: half the rule book's cap (at least one
 * minor unit), so the approver sees a request with headroom below the ceiling and the callee hears
 * a round amount (cap ₹800 → ₹400).
 */
export function simConcessionMinor(book: RuleBook): number {
  return Math.max(1, Math.floor(book.concession_policy.cap_minor / 2))
}

/** The simulator's next agent line: a pure function of the request. */
export function simulateReply(req: ReplyRequest): AgentReply {
  const book = req.ruleBook
  const fill = (text: string): string => {
    const filled = fillPlaceholders(text, { name: req.callee.name, agentName: req.agentName, company: req.company }).trim()
    return filled === "" ? "I see." : filled
  }
  const say = (text: string): AgentReply => ({ text: fill(text) })
  const end = (text: string, outcome: AgentOutcome): AgentReply => ({ text: fill(text), end: { outcome } })
  const amount = formatMinor(simConcessionMinor(book), book.concession_policy.currency)
  const decided = req.decision
  const last = req.history.at(-1)

  // Right after a decision, the transcript still ends with the agent's "one moment" line.
  if (decided !== undefined && last?.speaker === "agent") {
    const { action, status } = decided
    if (status === "timeout") {
      const what = action === "concession" ? "confirm that discount" : action === "callback" ? "confirm a callback time" : "reach a colleague"
      return end(`I couldn't ${what} just now, {name}; I'll confirm by message shortly. Thank you for your time, goodbye.`, "pending_approval")
    }
    if (action === "concession") {
      return status === "approved"
        ? say(`Good news, {name}: I can take ${amount} off for you. Shall we go ahead?`)
        : say("I'm sorry, {name}, I can't offer a discount on this one. Would you still like to go ahead at the regular price?")
    }
    if (action === "callback") {
      return status === "approved"
        ? end("All set, {name}: someone from {company} will call you back tomorrow. Thank you for your time, goodbye.", "callback_scheduled")
        : say("I'm sorry, {name}, I can't book a callback right now. Do you have two minutes now instead?")
    }
    return status === "approved"
      ? end("Thank you for holding, {name}. I'm connecting you to a colleague now.", "escalated")
      : say("I'm sorry, {name}, no colleague is free right now, so I can't transfer you. Can I help you myself?")
  }

  if (req.history.length >= SIM_TURN_CAP - 1) return end("I'll let you go now, {name}. Thank you for your time, and goodbye.", "no_decision")
  if (last?.speaker !== "callee") return say("Are you still there, {name}?")

  const heard = last.text.toLowerCase().replace(/[\u2018\u2019]/g, "'")
  const quoted = `"${clip(last.text.replace(/\s+/g, " ").trim(), 200)}"`
  const agentTurns = req.history.filter((h) => h.speaker === "agent").length
  const pending = (action: ProposalAction): boolean => decided?.action !== action
  const propose = (text: string, action: ProposalAction, value_minor: number | null, rationale: string): AgentReply => ({
    text: fill(text),
    propose: { action, value_minor, rationale },
  })

  if (DO_NOT_CALL_ASK.test(heard)) {
    const handler = book.objection_handlers.find((h) => h.category === ALWAYS_CATEGORY)
    return end(handler?.response ?? "Understood. You won't hear from {company} again. Goodbye.", "do_not_call")
  }
  if (HUMAN_ASK.test(heard)) {
    if (book.escalation_policy.allowed && pending("escalate")) {
      return propose("Of course, {name}. Let me see whether a colleague can take over; one moment, please.", "escalate", null, `The callee asked for a human: ${quoted}.`)
    }
    return say("I'm sorry, {name}, no colleague is free to take this call, but I'm happy to help myself. What would you like to know?")
  }
  if (CALLBACK_ASK.test(heard)) {
    if (book.callback_policy.allowed && pending("callback")) {
      return propose("Of course, {name}. Let me check that we can call you back tomorrow; one moment, please.", "callback", null, `The callee asked to be called back: ${quoted}.`)
    }
    return say("I'm sorry, {name}, I can't book a callback right now. Do you have two minutes now instead?")
  }
  if (DECLINE.test(heard)) {
    const declines = req.history.filter((h) => h.speaker === "callee" && DECLINE.test(h.text.toLowerCase().replace(/[\u2018\u2019]/g, "'"))).length
    if (declines >= 2) return end("I understand, {name}. Thank you for your time, and have a good day.", "declined")
    return say(bestHandler(book, heard)?.response ?? "I understand, {name}. Before you decide, may I take thirty seconds to explain how this could help you?")
  }
  if (DISCOUNT_ASK.test(heard)) {
    const policy = book.concession_policy
    if (policy.allowed && policy.cap_minor > 0 && pending("concession")) {
      return propose(
        "I understand, {name}. Let me check with my team what I can do on the price; one moment, please.",
        "concession",
        simConcessionMinor(book),
        `The callee asked for a discount: ${quoted}. Proposing half of the ${formatMinor(policy.cap_minor, policy.currency)} cap.`,
      )
    }
    if (decided?.action === "concession" && decided.status === "approved") return say(`As I said, {name}, I can take ${amount} off for you. Shall we go ahead?`)
    return say("I'm sorry, {name}, I can't offer a discount on this. Would you still like to go ahead?")
  }
  if (AGREE.test(heard)) {
    if (decided?.action === "concession" && decided.status === "approved") {
      return end("Wonderful, {name}. I've applied the discount and noted that you're in; {company} will send you the details shortly. Thank you, goodbye.", "agreed_with_concession")
    }
    // The first "yes" answers "do you have a minute?": it earns the pitch, not a sale.
    if (agentTurns >= 2) return end("Wonderful, {name}. I've noted that you're in; {company} will send you the details shortly. Thank you for your time, goodbye.", "agreed")
    return say(pitch(book))
  }
  const handler = bestHandler(book, heard)
  if (handler !== undefined) return say(handler.response)
  return say(agentTurns <= 1 ? pitch(book) : "I see. Would you like to go ahead, {name}?")
}

/** The offer in a sentence, from the opening line's "about …" when it has one. */
function pitch(book: RuleBook): string {
  const topic = /\babout ([^.?!]{3,120})[.?!]/.exec(book.opening_line)?.[1]?.trim()
  const offer = "takes just a minute to set up, and I can do it for you right now. Shall we go ahead?"
  return topic === undefined ? `Thank you, {name}. It ${offer}` : `Thank you, {name}. I'm calling about ${topic}: it ${offer}`
}

/** The handler whose trigger shares the most words with what the callee said (first on a tie). */
function bestHandler(book: RuleBook, heard: string): RuleBook["objection_handlers"][number] | undefined {
  const said = wordsOf(heard)
  let best: { h: RuleBook["objection_handlers"][number]; overlap: number } | undefined
  for (const h of book.objection_handlers) {
    let overlap = 0
    for (const w of wordsOf(h.trigger)) if (said.has(w)) overlap++
    if (overlap > 0 && (best === undefined || overlap > best.overlap)) best = { h, overlap }
  }
  return best?.h
}
