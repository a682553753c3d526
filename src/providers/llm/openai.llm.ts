// The adapter for an OpenAI-compatible chat-completions API: the rule book and each agent reply are
// asked for as strict structured output (json_schema), with per-attempt timeouts, bounded retries
// and typed errors.
import { formatMinor, maxConcessionMinor } from "../../billing/pricing.js"
import { VOICES } from "../../voices/voices.catalog.js"
import { ruleBookJsonSchema } from "../../workflows/rulebook.schema.js"
import { parseRetryAfter, withRetries, type Attempt } from "../http.util.js"
import { fetchFailure, PLATFORM_DEFAULT, providerFetch, readBounded, type Outbound } from "../outbound.js"
import type { RuleBook } from "../../workflows/rulebook.schema.js"
import {
  AGENT_OUTCOMES,
  fillPlaceholders,
  LlmCallError,
  type AgentReply,
  type LanguageModel,
  type ProposalAction,
  type ReplyRequest,
  type RuleBookRequest,
} from "./llm.interface.js"

export interface OpenAiLlmOptions {
  /** The API root including its version, e.g. https://api.openai.com/v1 or http://localhost:11434/v1. */
  readonly baseUrl: string
  /** Sent as a bearer token; optional because local servers often need none. */
  readonly apiKey?: string | undefined
  readonly model: string
  /** Limit for each attempt (connect, request and the whole answer); default 20000 ms. */
  readonly timeoutMs?: number | undefined
  /** Replaces undici's fetch (tests). */
  readonly fetch?: typeof fetch
  /** The address guard (a tenant's base URL) and answer size cap; default: no guard, 2 MiB. */
  readonly outbound?: Outbound
}

/** How much of an API error body goes into the error message. */
const ERROR_DETAIL_CHARS = 200
/** The library listing in the system message is capped so a large library cannot crowd out the task. */
const MAX_LISTED_OBJECTIONS = 100
const LISTED_REBUTTAL_CHARS = 240

type LlmAttempt = Attempt<Record<string, unknown>, LlmCallError>

interface ChatMessage {
  readonly role: "system" | "user" | "assistant"
  readonly content: string
}

export function makeOpenAiLlm(opts: OpenAiLlmOptions): LanguageModel {
  const url = `${opts.baseUrl.replace(/\/+$/, "")}/chat/completions`
  const timeoutMs = opts.timeoutMs ?? 20_000
  const outbound = opts.outbound ?? PLATFORM_DEFAULT
  const apiKey = opts.apiKey ?? ""
  // The key must never reach a log line or an error message, even if the API echoes it back.
  const scrub = (s: string): string => (apiKey === "" ? s : s.split(apiKey).join("***"))
  // Built once: the schema is the same for every request.
  const schema = toStrictJsonSchema(ruleBookJsonSchema())

  async function attempt(body: string): Promise<LlmAttempt> {
    let res: Response
    let text: string
    try {
      res = await providerFetch(
        url,
        {
          method: "POST",
          headers: {
            "content-type": "application/json",
            accept: "application/json",
            ...(apiKey !== "" && { authorization: `Bearer ${apiKey}` }),
          },
          body,
          signal: AbortSignal.timeout(timeoutMs),
        },
        outbound,
        opts.fetch,
      )
      text = await readBounded(res, outbound.responseLimitBytes)
    } catch (e) {
      const f = fetchFailure(e, timeoutMs)
      // The cause may carry the request (and so the key): keep it only when it cannot.
      const options = { ...(f.timedOut && { cause: e }), ...(f.status !== undefined && { status: f.status }) }
      return { ok: false, error: new LlmCallError(`language model API ${scrub(f.message)}`, f.retryable, options) }
    }
    if (res.ok) return readCompletion(text, res.status)
    const detail = scrub(errorDetail(text)).replace(/\s+/g, " ").trim().slice(0, ERROR_DETAIL_CHARS)
    const message = `language model API answered ${res.status}${detail === "" ? "" : `: ${detail}`}`
    if (res.status === 429 || res.status >= 500) {
      const retryAfterMs = parseRetryAfter(res.headers.get("retry-after"))
      return { ok: false, error: new LlmCallError(message, true, { status: res.status }), ...(retryAfterMs !== undefined && { retryAfterMs }) }
    }
    // Any other 4xx (bad key, unknown model, a schema the server rejects) fails the same way every time.
    return { ok: false, error: new LlmCallError(message, false, { status: res.status }) }
  }

  /**
   * One chat completion whose answer must match `format.schema` (strict structured output),
   * retried within withRetries' budget; resolves with the parsed JSON object.
   */
  function chat(messages: ReadonlyArray<ChatMessage>, format: { name: string; schema: Record<string, unknown> }): Promise<Record<string, unknown>> {
    const body = JSON.stringify({
      model: opts.model,
      temperature: 0,
      messages,
      response_format: { type: "json_schema", json_schema: { name: format.name, strict: true, schema: format.schema } },
    })
    return withRetries(
      () => attempt(body),
      (message, cause) => new LlmCallError(message, true, { cause, ...(cause.status !== undefined && { status: cause.status }) }),
    )
  }

  return {
    name: "openai",
    model: opts.model,
    generateRuleBook(req: RuleBookRequest): Promise<unknown> {
      return chat(
        [
          { role: "system", content: systemMessage(req) },
          { role: "user", content: req.prompt },
        ],
        { name: "rule_book", schema },
      )
    },
    async reply(req: ReplyRequest): Promise<AgentReply> {
      const actions = allowedActions(req.ruleBook)
      const answer = await chat(replyMessages(req), { name: "agent_reply", schema: replySchema(actions) })
      return readReply(answer, actions)
    },
  }
}

/**
 * The rule book out of a 2xx chat completion. Everything here fails the same way on a retry (a
 * refusal, a truncated or non-JSON answer), so none of it is retryable.
 */
function readCompletion(text: string, status: number): LlmAttempt {
  const fail = (message: string): LlmAttempt => ({ ok: false, error: new LlmCallError(message, false, { status }) })
  const body = parseObject(text)
  const choices = body?.choices
  const first: unknown = Array.isArray(choices) ? choices[0] : undefined
  const message = isObject(first) ? first.message : undefined
  if (!isObject(first) || !isObject(message)) return fail(`language model API answered ${status} without a completion message`)
  if (typeof message.refusal === "string" && message.refusal.trim() !== "") {
    return fail(`language model refused: ${message.refusal.replace(/\s+/g, " ").trim().slice(0, ERROR_DETAIL_CHARS)}`)
  }
  const content = message.content
  const book = typeof content === "string" ? parseObject(content) : undefined
  if (book !== undefined) return { ok: true, value: book }
  const truncated = first.finish_reason === "length" ? " (the answer was cut off at the token limit)" : ""
  return fail(`language model answered without a JSON object${truncated}`)
}

/** The task, the tenant's limits and the objection library, for the model. */
function systemMessage(req: RuleBookRequest): string {
  const ceiling = maxConcessionMinor(req.currency, req.planTier)
  const personas = VOICES.map((v) => `${v.id} (${v.language}, ${v.gender}, ${v.accent})`).join("; ")
  const library = req.objections
    .slice(0, MAX_LISTED_OBJECTIONS)
    .map((o) => `#${o.id} [${o.category}] "${o.trigger_text}" -> ${o.rebuttal_template.replace(/\s+/g, " ").slice(0, LISTED_REBUTTAL_CHARS)}`)
    .join("\n")
  return [
    "You write the rule book for an outbound AI voice-calling campaign, from the campaign description the user gives.",
    "Answer with one JSON object matching the rule_book schema. Constraints the schema cannot express:",
    "- schema_version is 1.",
    "- name: at most 200 characters; goal: at most 1000; opening_line: at most 500; system_prompt: at most 8000.",
    "- opening_line, system_prompt, disclosure_lines and every handler response may use only the placeholders {name} (the callee), {agent_name} and {company}; no other text in braces.",
    "- disclosure_lines: 1 to 10 lines, each at most 300 characters; say who is calling for whom and that the call may be recorded.",
    "- objection_handlers: 1 to 50, triggers unique ignoring case, trigger at most 300 characters, response at most 1000. Prefer adapting the library below: set objection_id to the row's number and rewrite its {offer} and {callback_window} into plain words; use objection_id null for a handler of your own.",
    `- concession_policy.currency is ${req.currency}. cap_minor is in minor units (1/100) of ${req.currency}: greater than 0 and at most ${ceiling} (${formatMinor(ceiling, req.currency)}) when concessions are allowed, 0 when not. Allow concessions only if the description mentions discounts, offers or waivers.`,
    "- callback_policy.max_days_ahead: 1 to 30. escalation_policy: at least one trigger (each at most 200 characters) when allowed. Keep requires_approval true unless the description says otherwise.",
    "- max_call_seconds: 30 to 1800.",
    req.country.toUpperCase() === "IN"
      ? "- ncpr_category: the TRAI commercial-communication category 1-8 of the campaign's sector (1 banking, insurance, financial products, credit cards; 2 real estate; 3 education; 4 health; 5 consumer goods and automobiles; 6 communication, broadcasting, entertainment, IT; 7 tourism and leisure; 8 food and beverages), or null if unsure."
      : "- ncpr_category: null (the workspace is not in India).",
    `- persona: one of ${personas}. ${req.persona !== undefined && req.persona !== "" ? `Use ${req.persona}.` : "Pick the one that fits the audience; a Hindi campaign needs a Hindi persona."} language is the persona's language tag.`,
    "",
    `Workspace: country ${req.country}, currency ${req.currency}, plan ${req.planTier}.`,
    "",
    library === "" ? "Objection library: (empty)" : `Objection library (#id [category] trigger -> rebuttal template):\n${library}`,
  ].join("\n")
}

// ---------------------------------------------------------------------------------------------
// Answering turns

const ACTIONS: readonly ProposalAction[] = ["concession", "callback", "escalate"]
const REPLY_TEXT_MAX = 1000

/** The proposals the rule book allows at all; the reply schema offers only these. */
function allowedActions(book: RuleBook): ProposalAction[] {
  return ACTIONS.filter((a) =>
    a === "concession" ? book.concession_policy.allowed && book.concession_policy.cap_minor > 0 : a === "callback" ? book.callback_policy.allowed : book.escalation_policy.allowed,
  )
}

/** `{text, propose, end}` in strict mode; `propose` can only be null when the book allows nothing. */
function replySchema(actions: readonly ProposalAction[]): Record<string, unknown> {
  const propose =
    actions.length === 0
      ? { type: "null" }
      : {
          anyOf: [
            {
              type: "object",
              properties: {
                action: { type: "string", enum: [...actions] },
                value_minor: { type: ["integer", "null"], description: "the concession in minor units of the rule book's currency; null for callback and escalate" },
                rationale: { type: "string", description: "why, for the human who approves it" },
              },
              required: ["action", "value_minor", "rationale"],
              additionalProperties: false,
            },
            { type: "null" },
          ],
        }
  return {
    type: "object",
    properties: {
      text: { type: "string", description: `your next spoken line; 1 to ${REPLY_TEXT_MAX} characters` },
      propose,
      end: {
        anyOf: [
          { type: "object", properties: { outcome: { type: "string", enum: [...AGENT_OUTCOMES] } }, required: ["outcome"], additionalProperties: false },
          { type: "null" },
        ],
      },
    },
    required: ["text", "propose", "end"],
    additionalProperties: false,
  }
}

/** The rule book as instructions, the transcript as turns, and the human's latest decision. */
function replyMessages(req: ReplyRequest): ChatMessage[] {
  const book = req.ruleBook
  const fill = (t: string): string => fillPlaceholders(t, { name: req.callee.name ?? "the callee", agentName: req.agentName, company: req.company })
  const c = book.concession_policy
  const approval = (required: boolean): string => (required ? "a human approves it first: propose it, tell the callee you are checking, and promise nothing until you hear the decision" : "no approval is needed, but still propose it")
  const system = [
    fill(book.system_prompt),
    "",
    `You are on a live phone call as ${req.agentName} from ${req.company}${req.callee.name === null ? "" : `, speaking with ${req.callee.name}`}. The disclosure lines were spoken at the start of the call:`,
    ...book.disclosure_lines.map((l) => `- ${fill(l)}`),
    "",
    "Objection handlers (when the callee says something like the trigger, answer in the spirit of the response):",
    ...book.objection_handlers.map((h) => `- "${h.trigger}" -> ${fill(h.response)}`),
    "",
    "Policies:",
    c.allowed && c.cap_minor > 0
      ? `- Concession: at most ${formatMinor(c.cap_minor, c.currency)} (value_minor at most ${c.cap_minor}, minor units of ${c.currency}); ${approval(c.requires_approval)}.`
      : "- Concession: none; never offer a discount, waiver or credit.",
    book.callback_policy.allowed ? `- Callback: within ${book.callback_policy.max_days_ahead} days; ${approval(book.callback_policy.requires_approval)}.` : "- Callback: not offered.",
    book.escalation_policy.allowed
      ? `- Escalation to a human colleague when: ${book.escalation_policy.triggers.join("; ")}; ${approval(book.escalation_policy.requires_approval)}.`
      : "- Escalation: not available.",
    "",
    "Answer with one JSON object: text is your next spoken line (short, plain speech, never empty); propose is the proposal needing a decision, else null; end is set when the call should end after this line, else null.",
    "Outcomes: agreed (the callee accepts), agreed_with_concession (accepts with an approved concession), declined (refuses twice), callback_scheduled (an approved callback), escalated (an approved transfer), pending_approval (the decision did not come in time: say you will confirm by message), do_not_call (asks never to be called again), no_decision (the call goes nowhere).",
  ].join("\n")
  const messages: ChatMessage[] = [{ role: "system", content: system }]
  for (const turn of req.history) messages.push({ role: turn.speaker === "agent" ? "assistant" : "user", content: turn.text })
  const d = req.decision
  if (d !== undefined) {
    const fresh = req.history.at(-1)?.speaker === "agent"
    const what =
      d.status === "approved"
        ? "approved: you may now promise it"
        : d.status === "denied"
          ? "denied: say politely that you cannot offer it, and carry on"
          : "not decided in time: say you will confirm by message, and end with outcome pending_approval"
    messages.push({ role: "system", content: `${fresh ? "The human has just decided" : "Earlier, the human decided"} on your ${d.action} proposal: ${what}.` })
  }
  return messages
}

/** The structured answer checked beyond what strict mode guarantees; a bad one is not retried here. */
function readReply(answer: Record<string, unknown>, actions: readonly ProposalAction[]): AgentReply {
  const fail = (why: string): never => {
    throw new LlmCallError(`language model answered with a malformed reply: ${why}`, false)
  }
  const text = typeof answer.text === "string" ? answer.text.replace(/\s+/g, " ").trim().slice(0, REPLY_TEXT_MAX) : ""
  if (text === "") fail("no text")
  const out: AgentReply = { text }
  const p = answer.propose
  if (isObject(p)) {
    const action = p.action
    if (typeof action !== "string" || !(actions as readonly string[]).includes(action)) fail(`proposes ${String(action)}, which the rule book does not allow`)
    const value = p.value_minor
    if (value !== null && value !== undefined && !(typeof value === "number" && Number.isInteger(value) && value >= 0)) fail("value_minor is not a whole number of minor units")
    out.propose = {
      action: action as ProposalAction,
      value_minor: action === "concession" && typeof value === "number" ? value : null,
      rationale: typeof p.rationale === "string" ? p.rationale.trim().slice(0, REPLY_TEXT_MAX) : "",
    }
  } else if (p !== null && p !== undefined) fail("propose is neither an object nor null")
  const e = answer.end
  if (isObject(e)) {
    if (typeof e.outcome !== "string" || !(AGENT_OUTCOMES as readonly string[]).includes(e.outcome)) fail(`unknown outcome ${String(e.outcome)}`)
    out.end = { outcome: e.outcome as string }
  } else if (e !== null && e !== undefined) fail("end is neither an object nor null")
  return out
}

// ---------------------------------------------------------------------------------------------
// OpenAI's strict structured-output dialect of JSON Schema

/** Validation keywords strict mode may reject; validateRuleBook checks them after generation. */
const DROPPED_KEYWORDS = [
  "minLength",
  "maxLength",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "minItems",
  "maxItems",
  "pattern",
  "format",
  "multipleOf",
  "uniqueItems",
] as const

/**
 * `schema` rewritten for strict mode: every object lists all its properties in `required` and
 * sets `additionalProperties: false` (an optional property becomes nullable instead), nullable
 * primitives become type unions (`["integer", "null"]`), `const` becomes a one-value `enum`,
 * `$schema` is dropped, and length, range and size limits move into `description`, which the
 * model reads but the server does not enforce.
 */
export function toStrictJsonSchema(schema: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  const hints: string[] = []
  for (const [key, value] of Object.entries(schema)) {
    if (key === "$schema") continue
    if ((DROPPED_KEYWORDS as readonly string[]).includes(key)) continue
    if (key === "const") out.enum = [value]
    else if (key === "properties" && isObject(value)) {
      out.properties = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, isObject(v) ? toStrictJsonSchema(v) : v]))
    } else if (key === "items" && isObject(value)) out.items = toStrictJsonSchema(value)
    else if ((key === "anyOf" || key === "$defs") && value !== undefined) {
      out[key] = Array.isArray(value)
        ? value.map((v: unknown) => (isObject(v) ? toStrictJsonSchema(v) : v))
        : isObject(value)
          ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, isObject(v) ? toStrictJsonSchema(v) : v]))
          : value
    } else out[key] = value
  }
  hints.push(...limitHints(schema))

  if (isObject(out.properties)) {
    const properties = out.properties
    const required = new Set(Array.isArray(schema.required) ? (schema.required as unknown[]).filter((k): k is string => typeof k === "string") : [])
    for (const [k, v] of Object.entries(properties)) {
      if (!required.has(k) && isObject(v)) properties[k] = nullable(v)
    }
    out.required = Object.keys(properties)
    out.additionalProperties = false
  }

  const union = primitiveUnion(out.anyOf)
  if (union !== undefined) {
    delete out.anyOf
    out.type = union.types
    hints.unshift(...union.descriptions)
  }

  const description = [typeof out.description === "string" ? out.description : undefined, ...hints].filter((d): d is string => d !== undefined && d !== "")
  if (description.length > 0) out.description = description.join("; ")
  return out
}

/** The dropped limits in words, e.g. "1 to 200 characters". */
function limitHints(schema: Record<string, unknown>): string[] {
  const n = (key: string): number | undefined => {
    const v = schema[key]
    // zod writes MAX_SAFE_INTEGER as every integer's maximum: no limit worth telling.
    return typeof v === "number" && Math.abs(v) < Number.MAX_SAFE_INTEGER ? v : undefined
  }
  const range = (lo: number | undefined, hi: number | undefined, unit: string): string | undefined =>
    lo !== undefined && hi !== undefined ? `${lo} to ${hi}${unit}` : lo !== undefined ? `at least ${lo}${unit}` : hi !== undefined ? `at most ${hi}${unit}` : undefined
  const exclusiveMin = n("exclusiveMinimum")
  return [
    range(n("minLength"), n("maxLength"), " characters"),
    range(n("minItems"), n("maxItems"), " items"),
    range(n("minimum") ?? (exclusiveMin !== undefined && schema.type === "integer" ? exclusiveMin + 1 : undefined), n("maximum"), ""),
    typeof schema.pattern === "string" ? `matching ${schema.pattern}` : undefined,
  ].filter((h): h is string => h !== undefined)
}

/** `anyOf` of bare primitive types (after conversion) as one type list, with their descriptions. */
function primitiveUnion(anyOf: unknown): { types: string[]; descriptions: string[] } | undefined {
  if (!Array.isArray(anyOf) || anyOf.length === 0) return undefined
  const types: string[] = []
  const descriptions: string[] = []
  for (const branch of anyOf) {
    if (!isObject(branch) || typeof branch.type !== "string" || ["object", "array"].includes(branch.type)) return undefined
    if (Object.keys(branch).some((k) => k !== "type" && k !== "description")) return undefined
    types.push(branch.type)
    if (typeof branch.description === "string") descriptions.push(branch.description)
  }
  return { types, descriptions }
}

/** `schema` that also accepts null. */
function nullable(schema: Record<string, unknown>): Record<string, unknown> {
  const t = schema.type
  if (typeof t === "string") return t === "null" ? schema : { ...schema, type: [t, "null"], ...(Array.isArray(schema.enum) && { enum: [...(schema.enum as unknown[]), null] }) }
  if (Array.isArray(t)) return t.includes("null") ? schema : { ...schema, type: [...t, "null"] }
  return { anyOf: [schema, { type: "null" }] }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(text)
    if (isObject(parsed)) return parsed
  } catch {
    // Not JSON: the caller reports it.
  }
  return undefined
}

/** The human part of an OpenAI-style error body (error.message, with error.code), else the text. */
function errorDetail(text: string): string {
  const err = parseObject(text)?.error
  if (isObject(err) && typeof err.message === "string") return typeof err.code === "string" ? `${err.code}: ${err.message}` : err.message
  return text
}
