// The public demo's fixed rule book and who speaks it: one short, harmless conversation in the
// persona the visitor picked (or the one for their number's country), with nothing to approve.
import type { Currency } from "../platform/money.js"
import { findVoice, VOICES } from "../voices/voices.catalog.js"
import type { RuleBook } from "../workflows/rulebook.schema.js"

/** The demo's script is English: the catalogue's English personas speak it. */
export const DEMO_PERSONAS = VOICES.filter((v) => v.language.startsWith("en-")).map((v) => v.id) as [
  string,
  ...string[],
]

/** The persona for a number whose caller chose none: a voice from the number's own country. */
const PERSONA_BY_COUNTRY: Readonly<Record<string, string>> = {
  IN: "priya",
  US: "anya",
  CA: "anya",
  GB: "amelia",
  AU: "leo",
}
const FALLBACK_PERSONA = "anya"

export const defaultDemoPersona = (country: string | undefined): string =>
  PERSONA_BY_COUNTRY[country ?? ""] ?? FALLBACK_PERSONA

/**
 * The demo's rule book in `personaId`'s voice and language. No concession, callback or escalation
 * is allowed (nobody is there to approve one), a voicemail is hung up on, and any registration on
 * the national registry keeps a number out (ncpr_category null).
 */
export function demoRuleBook(personaId: string, currency: Currency, maxCallSeconds: number): RuleBook {
  const voice = findVoice(personaId)
  if (voice === undefined || !DEMO_PERSONAS.includes(personaId)) throw new Error(`no demo persona ${personaId}`)
  return {
    schema_version: 1,
    name: "Parley demo call",
    goal:
      "Show the person who asked for this demo what a Parley voice agent sounds like: introduce yourself, say in " +
      "a sentence or two what you can do for a business, answer a question or two, and close politely.",
    language: voice.language as RuleBook["language"],
    persona: voice.id,
    system_prompt:
      "You are {agent_name}, a voice agent from {company}, on a short demo call that {name} asked for on the " +
      "website. Be warm and brief; the call ends within two minutes. Never ask for personal details, payment " +
      "details, passwords or codes. Offer nothing, promise nothing and sell nothing. If they want to stop, " +
      "thank them and say goodbye.",
    opening_line:
      "Hi {name}, this is {agent_name} from {company}. You asked for a demo call, so here I am. I call " +
      "customers for businesses, answer their questions and book the next step. Do you have a minute?",
    disclosure_lines: [
      "This is an automated demo call from {company}, placed because this number was entered on our website.",
    ],
    objection_handlers: [
      {
        objection_id: null,
        category: "not_interested",
        trigger: "I'm not interested",
        response: "No problem at all. Thanks for trying the demo, and have a great day. Goodbye!",
      },
      {
        objection_id: null,
        category: "identity",
        trigger: "Who is this? Are you a robot?",
        response:
          "I'm {agent_name}, an AI voice agent from {company}. Someone entered this number for a demo call on " +
          "our website, and you won't get another one unless it's asked for again.",
      },
      {
        objection_id: null,
        category: "price",
        trigger: "How much does it cost?",
        response: "There's a free trial, and the prices are on our website. I can't quote or discount on a demo call.",
      },
    ],
    concession_policy: { allowed: false, cap_minor: 0, currency, requires_approval: false },
    callback_policy: { allowed: false, max_days_ahead: 1, requires_approval: false },
    escalation_policy: { allowed: false, triggers: [], requires_approval: false },
    voicemail: "hang_up",
    max_call_seconds: maxCallSeconds,
    ncpr_category: null,
  }
}
