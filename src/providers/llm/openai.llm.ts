// The adapter for an OpenAI-compatible chat-completions API: each structured request (a rule book,
// say) and each agent reply are asked for as strict structured output (json_schema), with
// per-attempt timeouts, bounded retries and typed errors; a reply can be streamed as it is written.

import { formatAmount } from "../../platform/money.js"
import { type Attempt, parseJsonObject, parseRetryAfter, withRetries } from "../http.util.js"
import {
  type FetchFailure,
  fetchFailure,
  type Outbound,
  PLATFORM_DEFAULT,
  providerFetch,
  ResponseTooLarge,
  readBounded,
  retryableStatus,
  vendorAttempt,
} from "../outbound.js"
import {
  AGENT_OUTCOMES,
  type AgentBrief,
  type AgentReply,
  type AgentRules,
  type ChatMessage,
  fillPlaceholders,
  type JsonAnswer,
  type JsonRequest,
  type LanguageModel,
  LlmCallError,
  type ProposalAction,
  type ReplyRequest,
  type ToolChatAnswer,
  type ToolChatRequest,
} from "./llm.interface.js"
import { toStrictJsonSchema } from "./openai.schema.js"
import {
  type ChatDelta,
  type ChatStreamEnd,
  LeadingTextField,
  readChatStream,
  SpokenTextStream,
  spokenText,
  sseData,
  sseLines,
} from "./openai.stream.js"
import { readToolCompletion, toolChatBody } from "./openai.tools.js"

export interface OpenAiLlmOptions {
  /** The API root including its version, e.g. https://api.openai.com/v1 or http://localhost:11434/v1. */
  readonly baseUrl: string
  /** Sent as a bearer token; optional because local servers often need none. */
  readonly apiKey?: string | undefined
  /** Sent as the OpenAI-Organization header (a byok credential's primary_id); none when unset. */
  readonly organization?: string | null | undefined
  readonly model: string
  /** Limit for each attempt (connect, request and the whole answer); default 20000 ms. */
  readonly timeoutMs?: number | undefined
  /** Replaces undici's fetch (tests). */
  readonly fetch?: typeof fetch
  /** The address guard (a tenant's base URL) and answer size cap; default: no guard, 2 MiB. */
  readonly outbound?: Outbound
  /** Time limits of each attempt at a streamed reply (streamReply); defaults from timeoutMs. */
  readonly stream?: StreamLimits | undefined
}

/** How long a streamed reply may take, per attempt. */
export interface StreamLimits {
  /**
   * From the request to the first piece of the answer (connect and headers included): the moment
   * reply() would have given up with nothing. Default timeoutMs.
   */
  readonly firstTokenMs?: number | undefined
  /**
   * Between one event of the answer and the next, once it has begun (keep-alive comments do not
   * count: a server that only keeps the line open is not answering). Default a quarter of timeoutMs.
   */
  readonly idleMs?: number | undefined
  /**
   * The whole answer. Default twice timeoutMs: a model that begins at the first-token limit still
   * has a whole budget to finish in, and one that drips its answer is still cut off.
   */
  readonly totalMs?: number | undefined
}

/** How much of an API error body goes into the error message. */
const ERROR_DETAIL_CHARS = 200
type LlmAttempt = Attempt<JsonAnswer, LlmCallError>

/** Each caller schema in strict form, converted once (callers keep their schema objects). */
const strictSchemas = new WeakMap<Record<string, unknown>, Record<string, unknown>>()
const strictOf = (schema: Record<string, unknown>): Record<string, unknown> => {
  let strict = strictSchemas.get(schema)
  if (strict === undefined) strictSchemas.set(schema, (strict = toStrictJsonSchema(schema)))
  return strict
}

export function makeOpenAiLlm(opts: OpenAiLlmOptions): LanguageModel {
  const url = `${opts.baseUrl.replace(/\/+$/, "")}/chat/completions`
  const timeoutMs = opts.timeoutMs ?? 20_000
  const outbound = opts.outbound ?? PLATFORM_DEFAULT
  const apiKey = opts.apiKey ?? ""
  // The key must never reach a log line or an error message, even if the API echoes it back.
  const scrub = (s: string): string => (apiKey === "" ? s : s.split(apiKey).join("***"))
  const headers = (accept: string): Record<string, string> => ({
    "content-type": "application/json",
    accept,
    ...(apiKey !== "" && { authorization: `Bearer ${apiKey}` }),
    ...(opts.organization && { "openai-organization": opts.organization }),
  })
  // The caller gave up (its own time limit): no request, and no retry of this one.
  const aborted = () => new LlmCallError("language model request aborted by its caller", false)
  /** No usable answer: unreachable, timed out, a redirect, an answer past the cap. */
  const unreachable = (f: FetchFailure, e: unknown, signal: AbortSignal | undefined): LlmCallError => {
    if (signal?.aborted) return aborted()
    // The cause may carry the request (and so the key): keep it only when it cannot.
    const options = { ...(f.timedOut && { cause: e }), ...(f.status !== undefined && { status: f.status }) }
    return new LlmCallError(`language model API ${scrub(f.message)}`, f.retryable, options)
  }
  /**
   * A status other than 2xx. 429 and 5xx may pass later; any other (a bad key, an unknown model, a
   * schema the server rejects) fails the same way every time.
   */
  const refused = (text: string, status: number): LlmCallError => {
    const detail = scrub(errorDetail(text)).replace(/\s+/g, " ").trim().slice(0, ERROR_DETAIL_CHARS)
    return new LlmCallError(
      `language model API answered ${status}${detail === "" ? "" : `: ${detail}`}`,
      retryableStatus(status),
      { status },
    )
  }

  async function attempt<T = Record<string, unknown>>(
    body: string,
    read: (text: string, status: number) => Attempt<T, LlmCallError>,
    signal?: AbortSignal,
  ): Promise<Attempt<T, LlmCallError>> {
    if (signal?.aborted) return { ok: false, error: aborted() }
    return vendorAttempt({
      url,
      init: { method: "POST", headers: headers("application/json"), body },
      timeoutMs,
      signal,
      outbound,
      fetch: opts.fetch,
      unreachable: (f, e) => unreachable(f, e, signal),
      answered: ({ text, status }) => read(text, status),
      refused: ({ text, status }) => refused(text, status),
    })
  }

  /** The chat-completions body asking for an answer that matches `format.schema` (strict structured output). */
  const chatBody = (
    messages: ReadonlyArray<ChatMessage>,
    format: { name: string; schema: Record<string, unknown> },
  ) => ({
    model: opts.model,
    temperature: 0,
    messages,
    response_format: { type: "json_schema", json_schema: { name: format.name, strict: true, schema: format.schema } },
  })

  /**
   * One chat completion whose answer must match `format.schema` (strict structured output),
   * retried within withRetries' budget; resolves with the parsed JSON object.
   */
  function chat(
    messages: ReadonlyArray<ChatMessage>,
    format: { name: string; schema: Record<string, unknown> },
    signal?: AbortSignal,
  ): Promise<JsonAnswer> {
    const body = JSON.stringify(chatBody(messages, format))
    return withRetries(() => attempt(body, readCompletion, signal), gaveUp)
  }

  const limits = {
    firstTokenMs: opts.stream?.firstTokenMs ?? timeoutMs,
    idleMs: opts.stream?.idleMs ?? Math.ceil(timeoutMs / 4),
    totalMs: opts.stream?.totalMs ?? 2 * timeoutMs,
  }

  /**
   * One attempt at a streamed reply: `give` gets the reply's text as spoken (spokenText's shape, so
   * nothing the final text will not hold) as the model writes it, and the attempt resolves with the
   * answer's JSON object. A failure once something was given is never retryable: a retry would say
   * it again. A server that answers whole (not text/event-stream) is read as reply() reads it, and
   * gives nothing here. What `give` throws rejects the attempt as it is.
   */
  async function streamAttempt(
    body: string,
    give: (piece: string) => void,
    signal: AbortSignal | undefined,
  ): Promise<Attempt<Record<string, unknown>, LlmCallError>> {
    if (signal?.aborted) return { ok: false, error: aborted() }
    const stop = new AbortController()
    let expired: string | undefined
    const expire = (ms: number, what: string) =>
      setTimeout(() => {
        expired ??= what
        stop.abort()
      }, ms)
    const whole = expire(limits.totalMs, `did not finish its answer within ${limits.totalMs} ms`)
    let quiet = expire(limits.firstTokenMs, `sent no answer within ${limits.firstTokenMs} ms`)
    const field = new LeadingTextField()
    const spoken = new SpokenTextStream(REPLY_TEXT_MAX)
    let begun = false
    let gave = false
    let callerThrew: { readonly error: unknown } | undefined
    const onDelta = (delta: ChatDelta): void => {
      // Before the answer begins, a chunk that carries none of it (the role, say) does not count.
      if (!begun && delta.content === "" && delta.refusal === "") return
      begun = true
      clearTimeout(quiet)
      quiet = expire(limits.idleMs, `went quiet for ${limits.idleMs} ms in the middle of its answer`)
      const piece = spoken.push(field.push(delta.content))
      if (piece === "") return
      gave = true
      try {
        give(piece)
      } catch (error) {
        callerThrew = { error }
        throw error
      }
    }
    const read = async (): Promise<Attempt<Record<string, unknown>, LlmCallError>> => {
      const res = await providerFetch(
        url,
        {
          method: "POST",
          headers: headers("text/event-stream"),
          body,
          signal: signal === undefined ? stop.signal : AbortSignal.any([stop.signal, signal]),
        },
        outbound,
        opts.fetch,
      )
      if (res.status < 200 || res.status >= 300) {
        const error = refused(await readBounded(res, outbound.responseLimitBytes), res.status)
        const retryAfterMs = error.retryable ? parseRetryAfter(res.headers.get("retry-after")) : undefined
        return { ok: false, error, ...(retryAfterMs !== undefined && { retryAfterMs }) }
      }
      if (!/^text\/event-stream\b/i.test(res.headers.get("content-type") ?? "")) {
        const answer = readCompletion(await readBounded(res, outbound.responseLimitBytes), res.status)
        return answer.ok ? { ok: true, value: answer.value.value } : answer
      }
      const events = sseData(sseLines(boundedBody(res, outbound.responseLimitBytes)))
      return readStreamEnd(await readChatStream(events, onDelta, scrub), res.status)
    }
    let result: Attempt<Record<string, unknown>, LlmCallError>
    try {
      result = await read()
    } catch (e) {
      if (callerThrew !== undefined) throw callerThrew.error
      const error =
        e instanceof LlmCallError
          ? e
          : expired !== undefined
            ? new LlmCallError(`language model API ${expired}`, true)
            : unreachable(fetchFailure(e, limits.firstTokenMs), e, signal)
      result = { ok: false, error }
    } finally {
      clearTimeout(whole)
      clearTimeout(quiet)
      // Lets the connection go when the answer was not read to its end (a failure, events after [DONE]).
      stop.abort()
    }
    if (result.ok || !gave || !result.error.retryable) return result
    const { error } = result
    return {
      ok: false,
      error: new LlmCallError(error.message, false, {
        cause: error,
        ...(error.status !== undefined && { status: error.status }),
      }),
    }
  }

  return {
    name: "openai",
    model: opts.model,
    async generateJson(req: JsonRequest): Promise<Record<string, unknown>> {
      return (await chat(req.messages, { name: req.format.name, schema: strictOf(req.format.schema) }, req.signal))
        .value
    },
    generateJsonAnswer(req: JsonRequest): Promise<JsonAnswer> {
      return chat(req.messages, { name: req.format.name, schema: strictOf(req.format.schema) }, req.signal)
    },
    async reply(req: ReplyRequest): Promise<AgentReply> {
      const actions = allowedActions(req.ruleBook)
      const answer = await chat(replyMessages(req), { name: "agent_reply", schema: replySchema(actions) })
      return readReply(answer.value, actions)
    },
    /**
     * The pieces given are the final reply's text as it will be (whitespace collapsed, trimmed,
     * capped as readReply does), never more: joined, they are the resolved reply's text. The text
     * is streamed when it is the answer's first key; otherwise, or when the server answers whole,
     * it is given in one piece once the answer is read. Retried as reply() is, but only while
     * nothing was given; a reply that fails readReply rejects, and what was given stands.
     */
    async streamReply(req: ReplyRequest, onText: (piece: string) => void): Promise<AgentReply> {
      const actions = allowedActions(req.ruleBook)
      const format = { name: "agent_reply", schema: replySchema(actions) }
      const body = JSON.stringify({ ...chatBody(replyMessages(req), format), stream: true })
      const signal = req.signal
      let given = ""
      const give = (piece: string): void => {
        given += piece
        onText(piece)
      }
      const reply = readReply(await withRetries(() => streamAttempt(body, give, signal), gaveUp), actions)
      // Only a JSON object with two "text" keys (JSON.parse keeps the last) can say otherwise.
      if (!reply.text.startsWith(given))
        throw new LlmCallError(
          "language model answered with a malformed reply: its text is not the one it streamed",
          false,
        )
      if (reply.text.length > given.length) onText(reply.text.slice(given.length))
      return reply
    },
    chatWithTools(req: ToolChatRequest): Promise<ToolChatAnswer> {
      const body = toolChatBody(opts.model, req)
      return withRetries(() => attempt(body, readToolCompletion), gaveUp)
    },
  }
}

/** withRetries' last retryable failure: the call gave up. */
const gaveUp = (message: string, cause: LlmCallError): LlmCallError =>
  new LlmCallError(message, true, { cause, ...(cause.status !== undefined && { status: cause.status }) })

/** A streamed answer's body, abandoned (ResponseTooLarge) past the outbound cap, as readBounded's is. */
async function* boundedBody(res: Response, limitBytes: number): AsyncGenerator<Uint8Array, void, undefined> {
  if (res.body === null) return
  let total = 0
  for await (const chunk of res.body) {
    total += chunk.byteLength
    if (total > limitBytes) throw new ResponseTooLarge(limitBytes, res.status)
    yield chunk
  }
}

/**
 * The JSON object out of a streamed completion that has ended, as readCompletion reads a whole one.
 * A body that ended without [DONE] is fine when the answer is whole; when it is not, the stream was
 * cut short, which may not happen again (retryable).
 */
function readStreamEnd(end: ChatStreamEnd, status: number): Attempt<Record<string, unknown>, LlmCallError> {
  const fail = (message: string, retryable = false): Attempt<Record<string, unknown>, LlmCallError> => ({
    ok: false,
    error: new LlmCallError(message, retryable, { status }),
  })
  if (end.refusal.trim() !== "")
    return fail(`language model refused: ${end.refusal.replace(/\s+/g, " ").trim().slice(0, ERROR_DETAIL_CHARS)}`)
  const json = parseJsonObject(end.content)
  if (json !== undefined) return { ok: true, value: json }
  if (end.finishReason === "length")
    return fail("language model answered without a JSON object (the answer was cut off at the token limit)")
  if (!end.done && end.finishReason === null)
    return fail("language model answered without a JSON object (the stream ended before the answer did)", true)
  return fail("language model answered without a JSON object")
}

/**
 * The JSON object out of a 2xx chat completion, with the model version the API reports. Everything
 * here fails the same way on a retry (a refusal, a truncated or non-JSON answer), so none of it is
 * retryable.
 */
function readCompletion(text: string, status: number): LlmAttempt {
  const fail = (message: string): LlmAttempt => ({ ok: false, error: new LlmCallError(message, false, { status }) })
  const body = parseJsonObject(text)
  const choices = body?.choices
  const first: unknown = Array.isArray(choices) ? choices[0] : undefined
  const message = isObject(first) ? first.message : undefined
  if (!isObject(first) || !isObject(message))
    return fail(`language model API answered ${status} without a completion message`)
  if (typeof message.refusal === "string" && message.refusal.trim() !== "") {
    return fail(`language model refused: ${message.refusal.replace(/\s+/g, " ").trim().slice(0, ERROR_DETAIL_CHARS)}`)
  }
  const content = message.content
  const json = typeof content === "string" ? parseJsonObject(content) : undefined
  // The version that answered (an alias such as gpt-4o-mini resolves to a dated one), kept short.
  const version = typeof body?.model === "string" && body.model.trim() !== "" ? body.model.trim().slice(0, 200) : null
  if (json !== undefined) return { ok: true, value: { value: json, modelVersion: version } }
  const truncated = first.finish_reason === "length" ? " (the answer was cut off at the token limit)" : ""
  return fail(`language model answered without a JSON object${truncated}`)
}

// ---------------------------------------------------------------------------------------------
// Answering turns

const ACTIONS: readonly ProposalAction[] = ["concession", "callback", "escalate"]
const REPLY_TEXT_MAX = 1000

/** The proposals the rule book allows at all; the reply schema offers only these. */
function allowedActions(book: AgentBrief): ProposalAction[] {
  return ACTIONS.filter((a) =>
    a === "concession"
      ? book.concession_policy.allowed && book.concession_policy.cap_minor > 0
      : a === "callback"
        ? book.callback_policy.allowed
        : book.escalation_policy.allowed,
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
                value_minor: {
                  type: ["integer", "null"],
                  description:
                    "the concession in minor units of the rule book's currency; null for callback and escalate",
                },
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
          {
            type: "object",
            properties: { outcome: { type: "string", enum: [...AGENT_OUTCOMES] } },
            required: ["outcome"],
            additionalProperties: false,
          },
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
  const fill = (t: string): string =>
    fillPlaceholders(t, { name: req.callee.name ?? "the callee", agentName: req.agentName, company: req.company })
  const c = book.concession_policy
  const approval = (required: boolean): string =>
    required
      ? "a human approves it first: propose it, tell the callee you are checking, and promise nothing until you " +
        "hear the decision"
      : "no approval is needed, but still propose it"
  const system = [
    fill(book.system_prompt),
    "",
    `You are on a live phone call as ${req.agentName} from ${req.company}` +
      `${req.callee.name === null ? "" : `, speaking with ${req.callee.name}`}.` +
      " The disclosure lines were spoken at the start of the call:",
    ...book.disclosure_lines.map((l) => `- ${fill(l)}`),
    "",
    "Objection handlers (when the callee says something like the trigger, answer in the spirit of the response):",
    ...book.objection_handlers.map((h) => `- "${h.trigger}" -> ${fill(h.response)}`),
    "",
    "Policies:",
    c.allowed && c.cap_minor > 0
      ? `- Concession: at most ${formatAmount(c.cap_minor, c.currency)} ` +
        `(value_minor at most ${c.cap_minor}, minor units of ${c.currency}); ${approval(c.requires_approval)}.`
      : "- Concession: none; never offer a discount, waiver or credit.",
    book.callback_policy.allowed
      ? `- Callback: within ${book.callback_policy.max_days_ahead} days; ` +
        `${approval(book.callback_policy.requires_approval)}.`
      : "- Callback: not offered.",
    book.escalation_policy.allowed
      ? `- Escalation to a human colleague when: ${book.escalation_policy.triggers.join("; ")}; ` +
        `${approval(book.escalation_policy.requires_approval)}.`
      : "- Escalation: not available.",
    ...rulesSection(req.rules),
    "",
    "Answer with one JSON object: text is your next spoken line (short, plain speech, never empty); propose is the " +
      "proposal needing a decision, else null; end is set when the call should end after this line, else null.",
    "Outcomes: agreed (the callee accepts), agreed_with_concession (accepts with an approved concession), declined " +
      "(refuses twice), callback_scheduled (an approved callback), escalated (an approved transfer), " +
      "pending_approval (the decision did not come in time: say you will confirm by message), do_not_call (asks " +
      "never to be called again), no_decision (the call goes nowhere).",
  ].join("\n")
  const messages: ChatMessage[] = [{ role: "system", content: system }]
  for (const turn of req.history)
    messages.push({ role: turn.speaker === "agent" ? "assistant" : "user", content: turn.text })
  const d = req.decision
  if (d !== undefined) {
    const fresh = req.history.at(-1)?.speaker === "agent"
    const what =
      d.status === "approved"
        ? d.action === "concession" && typeof d.value_minor === "number"
          ? `approved at ${d.value_minor} minor units of ${book.concession_policy.currency} ` +
            `(${formatAmount(d.value_minor, book.concession_policy.currency)}): offer exactly that amount`
          : "approved: you may now promise it"
        : d.status === "denied"
          ? "denied: say politely that you cannot offer it, and carry on"
          : "not decided in time: say you will confirm by message, and end with outcome pending_approval"
    messages.push({
      role: "system",
      content:
        `${fresh ? "The human has just decided" : "Earlier, the human decided"}` +
        ` on your ${d.action} proposal: ${what}.`,
    })
  }
  const avoid = req.avoid ?? []
  if (avoid.length > 0) {
    messages.push({
      role: "system",
      content:
        "Your last answer was refused because it says a line you must never say. Answer again. Do not say: " +
        avoid.map((l) => `"${l}"`).join("; "),
    })
  }
  return messages
}

/**
 * The call's knowledge-base rules as instructions, highest priority first, then the banned lines.
 * They come after the rule book, and say they outrank it: a supervisor wrote them from past calls.
 */
function rulesSection(rules: AgentRules | undefined): string[] {
  if (rules === undefined) return []
  const out: string[] = []
  if (rules.instructions.length > 0) {
    out.push(
      "",
      "Knowledge-base rules from your supervisors (highest priority first; they override the objection handlers " +
        "above where they apply):",
    )
    for (const r of rules.instructions) {
      const when: string[] = []
      if (r.trigger !== null && r.trigger.phrases.length > 0)
        when.push(`when the callee says ${r.trigger.phrases.map((p) => `"${p}"`).join(" or ")}`)
      if (r.trigger !== null && r.trigger.category !== null) when.push(`when the objection is ${r.trigger.category}`)
      out.push(`- [${r.bucket}] ${r.title}: ${r.body}${when.length === 0 ? "" : ` (${when.join("; or ")})`}`)
    }
  }
  if (rules.banned.length > 0) {
    out.push("", "Never say any of these lines, nor anything close to them:")
    for (const line of rules.banned) out.push(`- "${line}"`)
  }
  return out
}

/** The structured answer checked beyond what strict mode guarantees; a bad one is not retried here. */
function readReply(answer: Record<string, unknown>, actions: readonly ProposalAction[]): AgentReply {
  const fail = (why: string): never => {
    throw new LlmCallError(`language model answered with a malformed reply: ${why}`, false)
  }
  const text = typeof answer.text === "string" ? spokenText(answer.text, REPLY_TEXT_MAX) : ""
  if (text === "") fail("no text")
  const out: AgentReply = { text }
  const p = answer.propose
  if (isObject(p)) {
    const action = p.action
    if (typeof action !== "string" || !(actions as readonly string[]).includes(action))
      fail(`proposes ${String(action)}, which the rule book does not allow`)
    const value = p.value_minor
    if (value !== null && value !== undefined && !(typeof value === "number" && Number.isInteger(value) && value >= 0))
      fail("value_minor is not a whole number of minor units")
    out.propose = {
      action: action as ProposalAction,
      value_minor: action === "concession" && typeof value === "number" ? value : null,
      rationale: typeof p.rationale === "string" ? p.rationale.trim().slice(0, REPLY_TEXT_MAX) : "",
    }
  } else if (p !== null && p !== undefined) fail("propose is neither an object nor null")
  const e = answer.end
  if (isObject(e)) {
    if (typeof e.outcome !== "string" || !(AGENT_OUTCOMES as readonly string[]).includes(e.outcome))
      fail(`unknown outcome ${String(e.outcome)}`)
    out.end = { outcome: e.outcome as string }
  } else if (e !== null && e !== undefined) fail("end is neither an object nor null")
  return out
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/** The human part of an OpenAI-style error body (error.message, with error.code), else the text. */
function errorDetail(text: string): string {
  const err = parseJsonObject(text)?.error
  if (isObject(err) && typeof err.message === "string")
    return typeof err.code === "string" ? `${err.code}: ${err.message}` : err.message
  return text
}
