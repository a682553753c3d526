// The language-model providers: the simulator's rule books (deterministic, valid for INR and USD
// workspaces, the INVALID_RULEBOOK path, persona choice) and the OpenAI-compatible adapter against
// a local fake API (request shape, strict schema, retries, Retry-After, refusals, timeouts, and
// agent replies: the schema built from the rule book, decisions, knowledge-base rules, malformed answers).
import { Effect, Layer } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { replyRules } from "../../src/kb/reply-rules.js"
import { prepareCallRules } from "../../src/kb/rule-matching.js"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { loadConfig } from "../../src/platform/config.js"
import { makeLlm } from "../../src/providers/accounts.js"
import { Llm, LlmLive } from "../../src/providers/Llm.js"
import { LlmCallError, type ReplyRequest } from "../../src/providers/llm/llm.interface.js"
import { makeOpenAiLlm } from "../../src/providers/llm/openai.llm.js"
import { toStrictJsonSchema } from "../../src/providers/llm/openai.schema.js"
import { makeSimLlm } from "../../src/providers/llm/sim.llm.js"
import { providerStatus } from "../../src/providers/provider-status.js"
import { generateRuleBook } from "../../src/workflows/rulebook.prompt.js"
import {
  type LibraryObjection,
  type RuleBook,
  type RuleBookRequest,
  ruleBookJsonSchema,
  validateRuleBook,
} from "../../src/workflows/rulebook.schema.js"
import { simulateRuleBook } from "../../src/workflows/rulebook.sim-writer.js"
import { completion, type FakeOpenAi, type Scripted, startFakeOpenAi } from "../support/fake-openai.js"

/** A few rows shaped like the global library (migrations/0001), {offer} and {callback_window} included. */
const OBJECTIONS: LibraryObjection[] = [
  {
    id: 1,
    category: "price",
    trigger_text: "It's too expensive.",
    rebuttal_template:
      "I understand, cost matters. Many customers changed their mind once they saw what {offer} saves them.",
  },
  {
    id: 2,
    category: "price",
    trigger_text: "I can get it cheaper elsewhere.",
    rebuttal_template: "That's fair to check. {company} includes the setup others charge extra for.",
  },
  {
    id: 3,
    category: "timing",
    trigger_text: "I'm busy right now.",
    rebuttal_template: "Of course, I can call back. Would {callback_window} work better for you?",
  },
  {
    id: 5,
    category: "need",
    trigger_text: "I don't need this.",
    rebuttal_template: "Understood. May I ask what you use today?",
  },
  {
    id: 7,
    category: "trust",
    trigger_text: "How did you get my number?",
    rebuttal_template: "Fair question. You're on a list {company} holds with your consent.",
  },
  {
    id: 9,
    category: "authority",
    trigger_text: "I need to talk to my spouse first.",
    rebuttal_template: "That makes sense. Shall we speak again {callback_window}?",
  },
  {
    id: 11,
    category: "information",
    trigger_text: "Send me an email instead.",
    rebuttal_template: "Glad to. I'll send the details of {offer} right after this call.",
  },
  {
    id: 14,
    category: "do_not_call",
    trigger_text: "Don't call me again.",
    rebuttal_template: "Understood. You won't hear from {company} again.",
  },
]

const request = (over: Partial<RuleBookRequest> = {}): RuleBookRequest => ({
  prompt:
    "Call our broadband customers about the new fibre plan and offer a discount of up to ₹800 on the first month.",
  currency: "INR",
  country: "IN",
  planTier: "free",
  objections: OBJECTIONS,
  ...over,
})

const USD_REQUEST: Partial<RuleBookRequest> = { currency: "USD", country: "US" }

const PROMPTS = [
  "Remind patients about their dental check-up next week and offer to reschedule if the time does not suit.",
  "Win back lapsed gym members with a 20% discount; " +
    "keep calls under 3 minutes and leave a voicemail if nobody answers.",
  "Survey customers about their recent delivery experience.",
  "Sell home insurance renewals. If they mention a competitor price, we can waive the fee up to 250.",
  "x",
  "Tell {customer} about our {product} launch and the {offer}.",
]

describe("sim language model", () => {
  const sim = makeSimLlm()

  it("is named sim, model sim-1", () => {
    expect(sim.name).toBe("sim")
    expect(sim.model).toBe("sim-1")
  })

  it("answers a structured request with the caller's offline answer, and refuses one without", async () => {
    expect(await generateRuleBook(sim, request())).toEqual(simulateRuleBook(request()))
    const e = await sim
      .generateJson({ messages: [], format: { name: "poem", schema: {} } })
      .catch((err: unknown) => err)
    expect(e).toBeInstanceOf(LlmCallError)
    expect((e as LlmCallError).retryable).toBe(false)
  })

  it("gives the same book for the same request, and another for another prompt", async () => {
    const a = await generateRuleBook(sim, request())
    const b = await generateRuleBook(sim, request({ objections: [...OBJECTIONS] }))
    expect(JSON.stringify(b)).toBe(JSON.stringify(a))
    const c = await generateRuleBook(sim, request({ prompt: PROMPTS[0]! }))
    expect(c).not.toEqual(a)
  })

  it.each([
    ["INR", request()],
    ["USD", request(USD_REQUEST)],
  ] as const)("writes books that pass validation for a %s workspace", async (_currency, base) => {
    for (const prompt of [base.prompt, ...PROMPTS]) {
      const book = await generateRuleBook(sim, { ...base, prompt })
      const result = validateRuleBook(book, { currency: base.currency, planTier: base.planTier })
      expect(result, prompt).toMatchObject({ ok: true })
    }
  })

  it("derives name, goal, opening line, disclosure and handlers from the prompt and library", async () => {
    const book = (await generateRuleBook(sim, request())) as RuleBook
    expect(book.name.length).toBeLessThanOrEqual(60)
    expect(book.name).toMatch(/^Call Our Broadband Customers/)
    expect(book.goal).toContain("new fibre plan")
    expect(book.opening_line).toContain("{name}")
    expect(book.opening_line).toContain("{agent_name}")
    expect(book.opening_line).toContain("{company}")
    expect(book.opening_line).toContain("the new fibre plan")
    expect(book.disclosure_lines).toContain("This call is from {company} and may be recorded for quality.")
    expect(book.system_prompt).toContain("new fibre plan")
    const ids = book.objection_handlers.map((h) => h.objection_id)
    expect(ids).toContain(1)
    // Do-not-call requests are always handled.
    expect(ids).toContain(14)
    for (const h of book.objection_handlers) {
      const row = OBJECTIONS.find((o) => o.id === h.objection_id)!
      expect(h.trigger).toBe(row.trigger_text)
      expect(h.category).toBe(row.category)
      // The library's own placeholders are written out; the rule book's stay.
      expect(h.response).not.toMatch(/\{offer\}|\{callback_window\}/)
    }
    expect(book.objection_handlers.find((h) => h.objection_id === 14)!.response).toContain("{company}")
    expect(book.ncpr_category).toBe(6)
  })

  it("draws a deterministic 3-5 handlers when nothing in the library relates to the prompt", async () => {
    const book = (await generateRuleBook(sim, request({ prompt: "x" }))) as RuleBook
    const fromLibrary = book.objection_handlers.filter((h) => h.objection_id !== 14)
    expect(fromLibrary.length).toBeGreaterThanOrEqual(3)
    expect(fromLibrary.length).toBeLessThanOrEqual(5)
    // One per category, first by id.
    expect(new Set(fromLibrary.map((h) => h.category)).size).toBe(fromLibrary.length)
  })

  it("writes its own handlers when the library is empty", async () => {
    const book = (await generateRuleBook(sim, request({ objections: [] }))) as RuleBook
    expect(book.objection_handlers.length).toBeGreaterThan(0)
    expect(book.objection_handlers.every((h) => h.objection_id === null)).toBe(true)
    expect(validateRuleBook(book, { currency: "INR", planTier: "free" }).ok).toBe(true)
  })

  it("takes the concession cap from the prompt in minor units, clamped to the ceiling", async () => {
    const cap = async (over: Partial<RuleBookRequest>) =>
      ((await generateRuleBook(sim, request(over))) as RuleBook).concession_policy
    expect(await cap({})).toEqual({ allowed: true, cap_minor: 80_000, currency: "INR", requires_approval: true })
    expect((await cap({ ...USD_REQUEST, prompt: "Offer a $20 credit to unhappy customers." })).cap_minor).toBe(2_000)
    expect((await cap({ ...USD_REQUEST, prompt: "Give a discount of up to 12.50 on renewals." })).cap_minor).toBe(1_250)
    expect((await cap({ prompt: "Offer a discount of up to Rs. 1,000,000 to everyone." })).cap_minor).toBe(500_000)
    // No amount (a percentage is not one): the default, within the ceiling.
    const percent = await cap({ ...USD_REQUEST, prompt: "Offer up to 20% discount." })
    expect(percent.allowed).toBe(true)
    expect(percent.cap_minor).toBeGreaterThan(0)
    expect(percent.cap_minor).toBeLessThanOrEqual(10_000)
    // An amount in the other currency is not converted.
    expect((await cap({ ...USD_REQUEST, prompt: "Offer a ₹500 discount." })).cap_minor).toBe(percent.cap_minor)
    expect(await cap({ prompt: "Remind customers about their appointment." })).toEqual({
      allowed: false,
      cap_minor: 0,
      currency: "INR",
      requires_approval: true,
    })
  })

  it("reads call length, voicemail and callback window from the prompt", async () => {
    const book = (await generateRuleBook(sim, request({ prompt: PROMPTS[1]! }))) as RuleBook
    expect(book.max_call_seconds).toBe(180)
    expect(book.voicemail).toBe("leave_opening_line")
    const plain = (await generateRuleBook(
      sim,
      request({ prompt: "Call customers back within 3 days about their order." }),
    )) as RuleBook
    expect(plain.voicemail).toBe("hang_up")
    expect(plain.callback_policy.max_days_ahead).toBe(3)
    expect(plain.escalation_policy.triggers.length).toBeGreaterThan(0)
  })

  it("chooses the persona: override, then one named in the prompt, then Hindi, then local to the callees", async () => {
    const persona = async (over: Partial<RuleBookRequest>) => {
      const book = (await generateRuleBook(sim, request(over))) as RuleBook
      return [book.persona, book.language]
    }
    expect(await persona({ persona: "kai", prompt: "Use Rohan, in Hindi." })).toEqual(["kai", "en-US"])
    expect(await persona({ prompt: "Use Leo's voice, not Kai, to renew policies." })).toEqual(["leo", "en-AU"])
    expect(await persona({ prompt: "Call customers in Hindi about the new plan." })).toEqual(["meera", "hi-IN"])
    expect(await persona({ prompt: "नए प्लान के बारे में बताइए" })).toEqual(["meera", "hi-IN"])
    expect(await persona({ prompt: "Call customers about the new plan." })).toEqual(["priya", "en-IN"])
    const plain = { ...USD_REQUEST, prompt: "Call customers about the new plan." }
    // A US workspace's book speaks with an American voice, a British one's with a British voice.
    expect(await persona({ ...plain, country: "US" })).toEqual(["anya", "en-US"])
    expect(await persona({ ...plain, country: "GB" })).toEqual(["amelia", "en-GB"])
    expect(await persona({ ...plain, country: "AU" })).toEqual(["leo", "en-AU"])
    expect(await persona({ ...plain, country: "AE" })).toEqual(["amelia", "en-GB"])
  })

  it("writes an opening that says what the call is about", async () => {
    const opening = async (prompt: string) =>
      ((await generateRuleBook(sim, request({ ...USD_REQUEST, prompt }))) as RuleBook).opening_line
    expect(await opening("Call patients overdue for a cleaning; offer 20% off.")).toContain(
      "about your next dental visit",
    )
    expect(await opening("Call lapsed gym members; offer up to $20 off to rejoin.")).toContain("about your membership")
    expect(await opening("Call customers about their unpaid invoice.")).toContain("about your unpaid invoice")
    expect(await opening("Offer a discount to everyone.")).toContain("about an offer for you")
    expect(await opening("Say hello.")).toContain("about your account with us")
  })

  it("writes a valid Hindi book, opening and disclosure in Hindi", async () => {
    const book = (await generateRuleBook(
      sim,
      request({ prompt: "Call customers in Hindi about the new plan." }),
    )) as RuleBook
    expect(book.opening_line).toMatch(/^Namaste \{name\}/)
    expect(validateRuleBook(book, { currency: "INR", planTier: "free" }).ok).toBe(true)
  })

  it("yields a book failing validation when the prompt contains INVALID_RULEBOOK", async () => {
    for (const base of [request(), request(USD_REQUEST)]) {
      const book = await generateRuleBook(sim, { ...base, prompt: "Sell upgrades INVALID_RULEBOOK please" })
      const result = validateRuleBook(book, { currency: base.currency, planTier: "free" })
      expect(result.ok).toBe(false)
      if (!result.ok)
        expect(result.errors.map((e) => e.field).sort()).toEqual(["disclosure_lines", "objection_handlers"])
    }
  })

  it("leaves only allowed placeholders in what it embeds from the prompt", async () => {
    const book = (await generateRuleBook(sim, request({ prompt: PROMPTS[5]! }))) as RuleBook
    expect(book.system_prompt).toContain("Tell customer about our product launch")
    expect(validateRuleBook(book, { currency: "INR", planTier: "free" }).ok).toBe(true)
  })

  it("omits the NCPR category outside India and for an unknown sector", () => {
    expect(simulateRuleBook(request(USD_REQUEST)).ncpr_category).toBeNull()
    expect(simulateRuleBook(request({ prompt: "Call people about things." })).ncpr_category).toBeNull()
    expect(simulateRuleBook(request({ prompt: "Offer home loans at a lower interest rate." })).ncpr_category).toBe(1)
  })
})

// ---------------------------------------------------------------------------------------------
// The OpenAI-compatible adapter against a local fake API.

/** The fake's answer once its script is spent: the simulator's rule book, as a completion. */
const BOOK = simulateRuleBook(request())
const startFake = () => startFakeOpenAi({ status: 200, body: completion(JSON.stringify(BOOK)) })

async function caught(p: Promise<unknown>): Promise<LlmCallError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  )
  expect(e).toBeInstanceOf(LlmCallError)
  return e as LlmCallError
}

/** Every object node of a JSON Schema, with its path. */
function objectNodes(schema: unknown, path = "$"): Array<{ path: string; node: Record<string, unknown> }> {
  if (typeof schema !== "object" || schema === null) return []
  if (Array.isArray(schema)) return schema.flatMap((s, i) => objectNodes(s, `${path}[${i}]`))
  const node = schema as Record<string, unknown>
  const here =
    node.type === "object" || (Array.isArray(node.type) && node.type.includes("object")) ? [{ path, node }] : []
  return [...here, ...Object.entries(node).flatMap(([k, v]) => objectNodes(v, `${path}.${k}`))]
}

describe("OpenAI-compatible adapter", () => {
  const KEY = "sk-test-0123456789abcdef"
  let fake: FakeOpenAi
  beforeAll(async () => {
    fake = await startFake()
  })
  afterEach(() => fake.reset())
  afterAll(async () => {
    await fake.close()
  })

  const llm = (over: { apiKey?: string; timeoutMs?: number } = {}) =>
    makeOpenAiLlm({ baseUrl: `${fake.url}/`, apiKey: KEY, model: "gpt-4o-mini", timeoutMs: 2_000, ...over })

  it("posts a strict json_schema chat completion and returns the parsed book", async () => {
    const model = llm()
    expect(model.name).toBe("openai")
    expect(model.model).toBe("gpt-4o-mini")
    const book = await generateRuleBook(model, request({ persona: "rohan" }))
    expect(book).toEqual(BOOK)

    expect(fake.requests).toHaveLength(1)
    const r = fake.requests[0]!
    expect(r.method).toBe("POST")
    expect(r.path).toBe("/v1/chat/completions")
    expect(r.headers.authorization).toBe(`Bearer ${KEY}`)
    expect(r.headers["content-type"]).toBe("application/json")
    expect(r.body.model).toBe("gpt-4o-mini")
    expect(r.body.temperature).toBe(0)
    const messages = r.body.messages as Array<{ role: string; content: string }>
    expect(messages.map((m) => m.role)).toEqual(["system", "user"])
    expect(messages[1]!.content).toBe(request().prompt)
    // The system message carries the tenant's limits and the library.
    expect(messages[0]!.content).toContain('#14 [do_not_call] "Don\'t call me again."')
    expect(messages[0]!.content).toContain("at most 500000")
    expect(messages[0]!.content).toContain("Use rohan.")
    const format = r.body.response_format as {
      type: string
      json_schema: { name: string; strict: boolean; schema: Record<string, unknown> }
    }
    expect(format.type).toBe("json_schema")
    expect(format.json_schema.name).toBe("rule_book")
    expect(format.json_schema.strict).toBe(true)
    expect(format.json_schema.schema).toEqual(toStrictJsonSchema(ruleBookJsonSchema()))
  })

  it("sends no authorization header without a key (local servers)", async () => {
    await generateRuleBook(llm({ apiKey: "" }), request())
    expect(fake.requests[0]!.headers.authorization).toBeUndefined()
    await generateRuleBook(makeOpenAiLlm({ baseUrl: fake.url, model: "local" }), request())
    expect(fake.requests[1]!.headers.authorization).toBeUndefined()
    expect(fake.requests[1]!.body.model).toBe("local")
  })

  it("sends a schema that satisfies strict mode", () => {
    const schema = toStrictJsonSchema(ruleBookJsonSchema())
    expect(schema.$schema).toBeUndefined()
    const objects = objectNodes(schema)
    // The book, its handler items and the three policies.
    expect(objects.length).toBe(5)
    for (const { path, node } of objects) {
      expect(node.additionalProperties, path).toBe(false)
      expect([...(node.required as string[])].sort(), path).toEqual(Object.keys(node.properties as object).sort())
    }
    const props = schema.properties as Record<string, Record<string, unknown>>
    expect(props.ncpr_category!.type).toEqual(["integer", "null"])
    expect(props.ncpr_category!.anyOf).toBeUndefined()
    const handler = (props.objection_handlers!.items as Record<string, Record<string, Record<string, unknown>>>)
      .properties!
    expect(handler.objection_id!.type).toEqual(["integer", "null"])
    expect(props.schema_version).toMatchObject({ enum: [1] })
    // Limits the server may not enforce move into descriptions.
    expect(JSON.stringify(schema)).not.toMatch(
      /"(minLength|maxLength|minimum|maximum|exclusiveMinimum|maxItems|const)"/,
    )
    expect(props.opening_line!.description).toBe("1 to 500 characters")
  })

  it("makes optional properties nullable and keeps them required", () => {
    const converted = toStrictJsonSchema({
      type: "object",
      properties: {
        a: { type: "string" },
        b: { type: "integer", minimum: 2 },
        c: { type: "object", properties: { d: { type: "string", enum: ["x"] } } },
      },
      required: ["a"],
    })
    expect(converted.required).toEqual(["a", "b", "c"])
    const props = converted.properties as Record<string, Record<string, unknown>>
    expect(props.a!.type).toBe("string")
    expect(props.b).toEqual({ type: ["integer", "null"], description: "at least 2" })
    expect(props.c!.type).toEqual(["object", "null"])
    expect(props.c!.additionalProperties).toBe(false)
    expect((props.c!.properties as Record<string, Record<string, unknown>>).d).toEqual({
      type: ["string", "null"],
      enum: ["x", null],
    })
  })

  it("retries after a 500 and succeeds", async () => {
    fake.script({ status: 500, body: { error: { message: "The server had an error", type: "server_error" } } })
    const book = await generateRuleBook(llm(), request())
    expect(book).toEqual(BOOK)
    expect(fake.requests).toHaveLength(2)
    expect(fake.requests[1]!.body).toEqual(fake.requests[0]!.body)
  })

  it("honours Retry-After on a 429", async () => {
    fake.script({
      status: 429,
      body: { error: { message: "Rate limit reached", type: "requests", code: "rate_limit_exceeded" } },
      headers: { "retry-after": "1" },
    })
    await generateRuleBook(llm(), request())
    expect(fake.requests).toHaveLength(2)
    expect(fake.requests[1]!.at - fake.requests[0]!.at).toBeGreaterThanOrEqual(950)
  })

  it("gives up after three 5xx answers with a retryable error", async () => {
    fake.script(...Array.from({ length: 3 }, () => ({ status: 503, body: { error: { message: "overloaded" } } })))
    const e = await caught(generateRuleBook(llm(), request()))
    expect(e.retryable).toBe(true)
    expect(e.status).toBe(503)
    expect(e.message).toMatch(/gave up after 3 attempts/)
    expect(fake.requests).toHaveLength(3)
  })

  it("does not retry a 400, and keeps the key out of the message", async () => {
    fake.script({
      status: 400,
      body: {
        error: {
          message: `Invalid schema for response_format 'rule_book' (key ${KEY})`,
          code: "invalid_request_error",
        },
      },
    })
    const e = await caught(generateRuleBook(llm(), request()))
    expect(e.retryable).toBe(false)
    expect(e.status).toBe(400)
    expect(e.message).toContain("Invalid schema")
    expect(e.message).not.toContain(KEY)
    expect(fake.requests).toHaveLength(1)
  })

  it("times out each attempt and gives up with a retryable error", async () => {
    fake.script("hang", "hang", "hang")
    const started = Date.now()
    const e = await caught(generateRuleBook(llm({ timeoutMs: 150 }), request()))
    expect(e.retryable).toBe(true)
    expect(e.message).toMatch(/no answer within 150 ms.*gave up after 3 attempts/)
    expect(fake.requests).toHaveLength(3)
    expect(Date.now() - started).toBeLessThan(5_000)
  })

  it("fails without retrying on a refusal", async () => {
    fake.script({ status: 200, body: completion(null, { refusal: "I can't help with that request." }) })
    const e = await caught(generateRuleBook(llm(), request()))
    expect(e.retryable).toBe(false)
    expect(e.message).toContain("refused: I can't help with that request.")
    expect(fake.requests).toHaveLength(1)
  })

  it("fails without retrying on content that is not a JSON object, or no message at all", async () => {
    fake.script(
      { status: 200, body: completion("Here is your rule book: {") },
      { status: 200, body: completion("[1, 2]") },
      { status: 200, body: { choices: [] } },
      { status: 200, body: "<html>" },
    )
    for (let i = 0; i < 4; i++) {
      const e = await caught(generateRuleBook(llm(), request()))
      expect(e.retryable).toBe(false)
    }
    expect(fake.requests).toHaveLength(4)
  })

  it("reports an unreachable server as retryable", async () => {
    const e = await caught(
      generateRuleBook(
        makeOpenAiLlm({ baseUrl: "http://127.0.0.1:1/v1", apiKey: KEY, model: "m", timeoutMs: 500 }),
        request(),
      ),
    )
    expect(e.retryable).toBe(true)
    expect(e.message).toContain("unreachable")
    expect(e.message).not.toContain(KEY)
  })
})

describe("Llm service", () => {
  const run = (env: Record<string, string>) =>
    Effect.runSync(Effect.provide(Llm, LlmLive.pipe(Layer.provide(AppConfig.layer(loadConfig(env))))))

  it("uses the simulator unless LLM_BASE_URL is set", () => {
    expect(run({}).name).toBe("sim")
    const live = run({ LLM_BASE_URL: "http://127.0.0.1:9/v1/", LLM_MODEL: "llama3" })
    expect(live.name).toBe("openai")
    expect(live.model).toBe("llama3")
  })

  it("parses the LLM settings with defaults", () => {
    expect(loadConfig({})).toMatchObject({
      llmBaseUrl: undefined,
      llmApiKey: undefined,
      llmModel: "gpt-4o-mini",
      llmTimeoutMs: 20_000,
    })
    expect(
      loadConfig({ LLM_BASE_URL: "https://api.example/v1/", LLM_API_KEY: " k ", LLM_TIMEOUT_MS: "5000" }),
    ).toMatchObject({
      llmBaseUrl: "https://api.example/v1",
      llmApiKey: "k",
      llmTimeoutMs: 5_000,
    })
    expect(() => loadConfig({ LLM_BASE_URL: "not a url" })).toThrow(/LLM_BASE_URL/)
    expect(() => loadConfig({ LLM_TIMEOUT_MS: "0" })).toThrow(/LLM_TIMEOUT_MS/)
  })

  it("reports the model in provider status", () => {
    expect(providerStatus(loadConfig({})).llm).toEqual({ provider: "sim", mode: "simulator", configured: true })
    expect(providerStatus(loadConfig({ LLM_BASE_URL: "http://127.0.0.1:9/v1" })).llm).toEqual({
      provider: "openai",
      mode: "live",
      configured: true,
    })
  })

  it("builds the adapter from configuration with an injected fetch", async () => {
    const seen: string[] = []
    const fakeFetch: typeof fetch = async (input) => {
      seen.push(String(input))
      return new Response(JSON.stringify(completion(JSON.stringify({ ok: 1 }))), {
        status: 200,
        headers: { "content-type": "application/json" },
      })
    }
    const model = makeLlm(
      { llmBaseUrl: "http://llm.test/v1", llmApiKey: undefined, llmModel: "m", llmTimeoutMs: 1000 },
      { fetch: fakeFetch },
    )
    expect(await generateRuleBook(model, request())).toEqual({ ok: 1 })
    expect(seen).toEqual(["http://llm.test/v1/chat/completions"])
  })
})

// ---------------------------------------------------------------------------------------------
// Answering turns through the OpenAI-compatible adapter.

describe("OpenAI-compatible adapter: replies", () => {
  let fake: FakeOpenAi
  beforeAll(async () => {
    fake = await startFake()
  })
  afterEach(() => fake.reset())
  afterAll(async () => {
    await fake.close()
  })

  const validated = (req: RuleBookRequest): RuleBook => {
    const v = validateRuleBook(simulateRuleBook(req), { currency: req.currency, planTier: req.planTier })
    if (!v.ok) throw new Error(JSON.stringify(v.errors))
    return v.value
  }
  const BOOK = validated(request())
  const replyRequest = (over: Partial<ReplyRequest> = {}): ReplyRequest => ({
    ruleBook: BOOK,
    history: [
      { speaker: "agent", text: "Hello Asha, this is Priya from Acme. Do you have a minute?" },
      { speaker: "callee", text: "It's a bit pricey. Can you give me a discount?" },
    ],
    callee: { name: "Asha" },
    agentName: "Priya",
    company: "Acme",
    ...over,
  })
  const answer = (reply: Record<string, unknown>): Scripted => ({
    status: 200,
    body: completion(JSON.stringify(reply)),
  })
  const llm = () => makeOpenAiLlm({ baseUrl: fake.url, apiKey: "sk-test", model: "gpt-4o-mini", timeoutMs: 2_000 })
  type Schema = Record<string, unknown> & { properties: Record<string, Record<string, unknown>> }
  const sentSchema = (i = 0) =>
    (fake.requests[i]!.body.response_format as { json_schema: { name: string; strict: boolean; schema: Schema } })
      .json_schema

  it("asks for a strict agent_reply built from the rule book and reads the answer", async () => {
    fake.script(
      answer({
        text: "Let me check what I can do on the price; one moment.",
        propose: { action: "concession", value_minor: 40_000, rationale: "asked for a discount" },
        end: null,
      }),
    )
    const reply = await llm().reply(replyRequest())
    expect(reply).toEqual({
      text: "Let me check what I can do on the price; one moment.",
      propose: { action: "concession", value_minor: 40_000, rationale: "asked for a discount" },
    })

    expect(fake.requests).toHaveLength(1)
    const body = fake.requests[0]!.body
    expect(body.temperature).toBe(0)
    const format = sentSchema()
    expect(format.name).toBe("agent_reply")
    expect(format.strict).toBe(true)
    for (const { path, node } of objectNodes(format.schema)) {
      expect(node.additionalProperties, path).toBe(false)
      expect([...(node.required as string[])].sort(), path).toEqual(Object.keys(node.properties as object).sort())
    }
    const propose = format.schema.properties.propose as {
      anyOf: Array<{ properties?: { action: { enum: string[] } } }>
    }
    expect(propose.anyOf[0]!.properties!.action.enum).toEqual(["concession", "callback", "escalate"])
    const end = format.schema.properties.end as { anyOf: Array<{ properties?: { outcome: { enum: string[] } } }> }
    expect(end.anyOf[0]!.properties!.outcome.enum).toContain("agreed_with_concession")

    const messages = body.messages as Array<{ role: string; content: string }>
    expect(messages.map((m) => m.role)).toEqual(["system", "assistant", "user"])
    const system = messages[0]!.content
    // The book's system prompt with its placeholders filled, the disclosures, handlers and policies.
    expect(system).toContain("You are Priya, a voice agent calling Asha on behalf of Acme.")
    expect(system).not.toMatch(/\{(name|agent_name|company)\}/)
    expect(system).toContain("This call is from Acme and may be recorded for quality.")
    expect(system).toContain('"It\'s too expensive."')
    expect(system).toContain("value_minor at most 80000")
    expect(messages[2]!.content).toBe("It's a bit pricey. Can you give me a discount?")
  })

  it("offers only the proposals the rule book allows", async () => {
    const book: RuleBook = {
      ...BOOK,
      concession_policy: { ...BOOK.concession_policy, allowed: false, cap_minor: 0 },
      escalation_policy: { ...BOOK.escalation_policy, allowed: false, triggers: [] },
    }
    fake.script(answer({ text: "Shall we go ahead?", propose: null, end: null }))
    expect(await llm().reply(replyRequest({ ruleBook: book }))).toEqual({ text: "Shall we go ahead?" })
    const propose = sentSchema().schema.properties.propose as {
      anyOf: Array<{ properties?: { action: { enum: string[] } } }>
    }
    expect(propose.anyOf[0]!.properties!.action.enum).toEqual(["callback"])
    expect((fake.requests[0]!.body.messages as Array<{ content: string }>)[0]!.content).toContain(
      "never offer a discount",
    )

    const none: RuleBook = { ...book, callback_policy: { ...book.callback_policy, allowed: false } }
    fake.script(answer({ text: "Thanks, goodbye.", propose: null, end: { outcome: "declined" } }))
    expect(await llm().reply(replyRequest({ ruleBook: none }))).toEqual({
      text: "Thanks, goodbye.",
      end: { outcome: "declined" },
    })
    expect(sentSchema(1).schema.properties.propose).toEqual({ type: "null" })
  })

  it("tells the model the human's decision", async () => {
    fake.script(answer({ text: "Good news: I can take ₹400.00 off. Shall we go ahead?", propose: null, end: null }))
    const history = [...replyRequest().history, { speaker: "agent" as const, text: "Let me check; one moment." }]
    await llm().reply(replyRequest({ history, decision: { action: "concession", status: "approved" } }))
    const messages = fake.requests[0]!.body.messages as Array<{ role: string; content: string }>
    expect(messages.map((m) => m.role)).toEqual(["system", "assistant", "user", "assistant", "system"])
    expect(messages.at(-1)!.content).toMatch(/just decided on your concession proposal: approved/)

    fake.script(
      answer({ text: "I'll confirm by message. Goodbye.", propose: null, end: { outcome: "pending_approval" } }),
    )
    await llm().reply(replyRequest({ history, decision: { action: "callback", status: "timeout" } }))
    const second = fake.requests[1]!.body.messages as Array<{ content: string }>
    expect(second.at(-1)!.content).toMatch(/outcome pending_approval/)
  })

  it("puts the call's knowledge-base rules in the system prompt, and the refused lines in a note", async () => {
    const rules = prepareCallRules(
      [
        {
          id: 1,
          bucket: "objection.price",
          title: "Price",
          body: "Say the plan pays for itself, {name}.",
          trigger: { phrases: ["too pricey"], category: "price" },
          priority: 1,
        },
        {
          id: 2,
          bucket: "compliance",
          title: "Competitors",
          body: "Never name a competitor.",
          trigger: null,
          priority: 9,
        },
        { id: 3, bucket: "banned_phrases", title: "Pushy", body: "Buy now, {name}!", trigger: null, priority: 0 },
      ],
      { name: "Asha", agentName: "Priya", company: "Acme" },
    )
    fake.script(answer({ text: "It pays for itself, Asha.", propose: null, end: null }))
    await llm().reply(replyRequest(replyRules(rules, [])))
    const messages = fake.requests[0]!.body.messages as Array<{ role: string; content: string }>
    expect(messages.map((m) => m.role)).toEqual(["system", "assistant", "user"])
    const system = messages[0]!.content
    const section = system.slice(system.indexOf("Knowledge-base rules"))
    expect(section).toContain("highest priority first")
    // Highest priority first, with when each applies; the banned line filled for this callee.
    expect(section.indexOf("- [compliance] Competitors: Never name a competitor.")).toBeGreaterThan(0)
    expect(section.indexOf("- [compliance]")).toBeLessThan(section.indexOf("- [objection.price]"))
    expect(section).toContain(
      '- [objection.price] Price: Say the plan pays for itself, Asha. (when the callee says "too pricey"; or when ' +
        "the objection is price)",
    )
    expect(section).toContain('Never say any of these lines, nor anything close to them:\n- "Buy now, Asha!"')
    expect(section).not.toContain("[banned_phrases]")

    fake.script(answer({ text: "Would it help to hear the price?", propose: null, end: null }))
    await llm().reply(replyRequest(replyRules(rules, [], ["Buy now, Asha!"])))
    const again = fake.requests[1]!.body.messages as Array<{ role: string; content: string }>
    expect(again.map((m) => m.role)).toEqual(["system", "assistant", "user", "system"])
    expect(again.at(-1)!.content).toMatch(/refused.*Do not say: "Buy now, Asha!"$/)

    // Without rules nothing is added.
    fake.script(answer({ text: "Sure.", propose: null, end: null }))
    await llm().reply(replyRequest())
    expect((fake.requests[2]!.body.messages as Array<{ content: string }>)[0]!.content).not.toContain("Knowledge-base")
  })

  it("rejects malformed replies without retrying", async () => {
    fake.script(
      answer({ text: "  ", propose: null, end: null }),
      answer({ text: "Bye.", propose: null, end: { outcome: "sold" } }),
      answer({ text: "Hold on.", propose: { action: "refund", value_minor: 5, rationale: "" }, end: null }),
      answer({ text: "Hold on.", propose: { action: "concession", value_minor: -5, rationale: "" }, end: null }),
    )
    for (let i = 0; i < 4; i++) {
      const e = await caught(llm().reply(replyRequest()))
      expect(e.retryable).toBe(false)
      expect(e.message).toMatch(/malformed reply/)
    }
    expect(fake.requests).toHaveLength(4)
  })

  it("shares the retry path with rule-book generation", async () => {
    fake.script(
      { status: 503, body: { error: { message: "overloaded" } } },
      answer({ text: "Sure.", propose: null, end: null }),
    )
    expect(await llm().reply(replyRequest())).toEqual({ text: "Sure." })
    expect(fake.requests).toHaveLength(2)
    expect(fake.requests[1]!.body).toEqual(fake.requests[0]!.body)
  })
})
