// The simulator's objection handlers for a rule book: library rows related to the campaign prompt,
// the do-not-call row always, or built-in handlers when the library is empty (rulebook.sim-writer.ts).
import { clip, wordsOf } from "../providers/llm/sim.text.js"
import type { LibraryObjection } from "./rulebook.schema.js"

/** Handlers for when the caller passes an empty objection library: a book needs at least one. */
const BUILT_IN_HANDLERS = [
  {
    category: "timing",
    trigger: "I'm busy right now.",
    response: "Of course, I'll be brief, or I can call you back at a better time. Which would you prefer?",
  },
  {
    category: "not_interested",
    trigger: "I'm not interested.",
    response: "I understand, {name}. Thank you for your time, and have a good day.",
  },
  {
    category: "do_not_call",
    trigger: "Don't call me again.",
    response:
      "Understood. I'm adding your number to our do-not-call list now, and you won't hear from {company} again.",
  },
]

/**
 * Words in a prompt that make a library category relevant. A category's own trigger texts count
 * too; these add the campaign-side words ("renewal" suggests timing objections).
 */
const CATEGORY_CUES: Readonly<Record<string, readonly string[]>> = {
  price: [
    "price",
    "pricing",
    "cost",
    "costs",
    "expensive",
    "cheap",
    "cheaper",
    "discount",
    "fee",
    "fees",
    "emi",
    "bill",
    "tariff",
    "rate",
    "rates",
    "payment",
  ],
  timing: [
    "appointment",
    "schedule",
    "reschedule",
    "callback",
    "later",
    "busy",
    "reminder",
    "remind",
    "renewal",
    "renew",
    "due",
    "deadline",
  ],
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
export function objectionHandlers(
  library: ReadonlyArray<LibraryObjection>,
  words: ReadonlySet<string>,
  callbackDays: number,
): Handler[] {
  if (library.length === 0) return BUILT_IN_HANDLERS.map((h) => ({ objection_id: null, ...h }))
  const rows = [...library].sort((a, b) => a.id - b.id)
  const score = (o: LibraryObjection): number => {
    const cues = (CATEGORY_CUES[o.category] ?? []).filter((c) => words.has(c)).length
    const overlap = [...wordsOf(`${o.category.replace(/_/g, " ")} ${o.trigger_text}`)].filter((w) =>
      words.has(w),
    ).length
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
