// The adapter for an OpenAI-compatible chat-completions API: the rule book is asked for as strict
// structured output (json_schema), with per-attempt timeouts, bounded retries and typed errors.
import { formatMinor, maxConcessionMinor } from "../../billing/pricing.js"
import { VOICES } from "../../voices/voices.catalog.js"
import { ruleBookJsonSchema } from "../../workflows/rulebook.schema.js"
import { describeNetworkError, parseRetryAfter, withRetries, type Attempt } from "../http.util.js"
import { LlmCallError, type LanguageModel, type RuleBookRequest } from "./llm.interface.js"

export interface OpenAiLlmOptions {
  /** The API root including its version, e.g. https://api.openai.com/v1 or http://localhost:11434/v1. */
  readonly baseUrl: string
  /** Sent as a bearer token; optional because local servers often need none. */
  readonly apiKey?: string | undefined
  readonly model: string
  /** Limit for each attempt (connect, request and the whole answer); default 20000 ms. */
  readonly timeoutMs?: number | undefined
  /** Replaces the global fetch (tests). */
  readonly fetch?: typeof fetch
}

/** How much of an API error body goes into the error message. */
const ERROR_DETAIL_CHARS = 200
/** The library listing in the system message is capped so a large library cannot crowd out the task. */
const MAX_LISTED_OBJECTIONS = 100
const LISTED_REBUTTAL_CHARS = 240

type LlmAttempt = Attempt<Record<string, unknown>, LlmCallError>

export function makeOpenAiLlm(opts: OpenAiLlmOptions): LanguageModel {
  const url = `${opts.baseUrl.replace(/\/+$/, "")}/chat/completions`
  const timeoutMs = opts.timeoutMs ?? 20_000
  const doFetch = opts.fetch ?? fetch
  const apiKey = opts.apiKey ?? ""
  // The key must never reach a log line or an error message, even if the API echoes it back.
  const scrub = (s: string): string => (apiKey === "" ? s : s.split(apiKey).join("***"))
  // Built once: the schema is the same for every request.
  const schema = toStrictJsonSchema(ruleBookJsonSchema())

  async function attempt(body: string): Promise<LlmAttempt> {
    let res: Response
    let text: string
    try {
      res = await doFetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json",
          ...(apiKey !== "" && { authorization: `Bearer ${apiKey}` }),
        },
        body,
        signal: AbortSignal.timeout(timeoutMs),
      })
      text = await res.text()
    } catch (e) {
      const timedOut = e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError")
      const reason = timedOut ? `no answer within ${timeoutMs} ms` : scrub(describeNetworkError(e))
      // The cause may carry the request (and so the key): keep it only when it cannot.
      return { ok: false, error: new LlmCallError(`language model API unreachable: ${reason}`, true, timedOut ? { cause: e } : undefined) }
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

  return {
    name: "openai",
    model: opts.model,
    async generateRuleBook(req: RuleBookRequest): Promise<unknown> {
      const body = JSON.stringify({
        model: opts.model,
        temperature: 0,
        messages: [
          { role: "system", content: systemMessage(req) },
          { role: "user", content: req.prompt },
        ],
        response_format: { type: "json_schema", json_schema: { name: "rule_book", strict: true, schema } },
      })
      return withRetries(
        () => attempt(body),
        (message, cause) => new LlmCallError(message, true, { cause, ...(cause.status !== undefined && { status: cause.status }) }),
      )
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
