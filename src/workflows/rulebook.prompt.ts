// Asking a language model for a rule book: what the workflow service sends (the task, the
// workspace's limits, the personas and the objection library as a system message, the campaign
// prompt as the user's, the rule book's JSON Schema) and, for the offline simulator, the
// deterministic writer's book as the answer. The caller validates what comes back.
import { maxConcessionMinor } from "../billing/pricing.js"
import { formatAmount } from "../platform/money.js"
import type { JsonRequest, LanguageModel } from "../providers/llm/llm.interface.js"
import { VOICES } from "../voices/voices.catalog.js"
import { type RuleBookRequest, ruleBookJsonSchema } from "./rulebook.schema.js"
import { simulateRuleBook } from "./rulebook.sim-writer.js"

/** The library listing in the system message is capped so a large library cannot crowd out the task. */
const MAX_LISTED_OBJECTIONS = 100
const LISTED_REBUTTAL_CHARS = 240

let schema: Record<string, unknown> | undefined
/** Built once: the same object every time, so an adapter can keep its own form of it. */
const ruleBookSchema = (): Record<string, unknown> => (schema ??= ruleBookJsonSchema())

/** The structured request for `req`'s rule book; the simulator answers it with simulateRuleBook. */
export function ruleBookRequest(req: RuleBookRequest): JsonRequest {
  return {
    messages: [
      { role: "system", content: systemMessage(req) },
      { role: "user", content: req.prompt },
    ],
    format: { name: "rule_book", schema: ruleBookSchema() },
    offline: () => simulateRuleBook(req),
  }
}

/**
 * The model's rule book for `req` as a raw JSON object: unvalidated, the caller runs
 * validateRuleBook on it. Rejects with LlmCallError.
 */
export function generateRuleBook(llm: LanguageModel, req: RuleBookRequest): Promise<Record<string, unknown>> {
  return llm.generateJson(ruleBookRequest(req))
}

/** The task, the tenant's limits and the objection library, for the model. */
function systemMessage(req: RuleBookRequest): string {
  const ceiling = maxConcessionMinor(req.currency, req.planTier)
  const personas = VOICES.map((v) => `${v.id} (${v.language}, ${v.gender}, ${v.accent})`).join("; ")
  const library = req.objections
    .slice(0, MAX_LISTED_OBJECTIONS)
    .map(
      (o) =>
        `#${o.id} [${o.category}] "${o.trigger_text}" -> ` +
        `${o.rebuttal_template.replace(/\s+/g, " ").slice(0, LISTED_REBUTTAL_CHARS)}`,
    )
    .join("\n")
  return [
    "You write the rule book for an outbound AI voice-calling campaign, from the campaign description the user gives.",
    "Answer with one JSON object matching the rule_book schema. Constraints the schema cannot express:",
    "- schema_version is 1.",
    "- name: at most 200 characters; goal: at most 1000; opening_line: at most 500; system_prompt: at most 8000.",
    "- opening_line, system_prompt, disclosure_lines and every handler response may use only the placeholders " +
      "{name} (the callee), {agent_name} and {company}; no other text in braces.",
    "- disclosure_lines: 1 to 10 lines, each at most 300 characters; say who is calling for whom and that the call " +
      "may be recorded.",
    "- objection_handlers: 1 to 50, triggers unique ignoring case, trigger at most 300 characters, response at most " +
      "1000. Prefer adapting the library below: set objection_id to the row's number and rewrite its {offer} and " +
      "{callback_window} into plain words; use objection_id null for a handler of your own.",
    `- concession_policy.currency is ${req.currency}. ` +
      `cap_minor is in minor units (1/100) of ${req.currency}: greater than 0 and at most ${ceiling} ` +
      `(${formatAmount(ceiling, req.currency)}) when concessions are allowed, 0 when not. ` +
      "Allow concessions only if the description mentions discounts, offers or waivers.",
    "- callback_policy.max_days_ahead: 1 to 30. escalation_policy: at least one trigger (each at most 200 " +
      "characters) when allowed. Keep requires_approval true unless the description says otherwise.",
    "- max_call_seconds: 30 to 1800.",
    `- The workspace is in ${req.country.toUpperCase()}: choose a persona whose accent ` +
      "sounds local there unless the description names one. The opening line says what the call is about " +
      '(the campaign\'s purpose in a few words), never a generic "special offer".',
    req.country.toUpperCase() === "IN"
      ? "- ncpr_category: the TRAI commercial-communication category 1-8 of the campaign's sector (1 banking, " +
        "insurance, financial products, credit cards; 2 real estate; 3 education; 4 health; 5 consumer goods and " +
        "automobiles; 6 communication, broadcasting, entertainment, IT; 7 tourism and leisure; 8 food and " +
        "beverages), or null if unsure."
      : "- ncpr_category: null (the workspace is not in India).",
    `- persona: one of ${personas}. ` +
      (req.persona !== undefined && req.persona !== ""
        ? `Use ${req.persona}.`
        : "Pick the one that fits the audience; a Hindi campaign needs a Hindi persona.") +
      " language is the persona's language tag.",
    "",
    `Workspace: country ${req.country}, currency ${req.currency}, plan ${req.planTier}.`,
    "",
    library === ""
      ? "Objection library: (empty)"
      : `Objection library (#id [category] trigger -> rebuttal template):\n${library}`,
  ].join("\n")
}
