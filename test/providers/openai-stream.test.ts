// A reply streamed from an OpenAI-compatible API: the SSE line reader and the JSON text extractor on
// chunks cut anywhere, and the adapter's streamReply against a local fake server speaking real SSE
// (pieces before the answer ends, the same reply as reply(), retries only before anything was
// given, time limits, an endless line, errors without the key).
import { once } from "node:events"
import type { ServerResponse } from "node:http"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { LlmCallError, type ReplyRequest } from "../../src/providers/llm/llm.interface.js"
import { makeOpenAiLlm, type OpenAiLlmOptions } from "../../src/providers/llm/openai.llm.js"
import {
  LeadingTextField,
  MAX_SSE_LINE_BYTES,
  readChatStream,
  SpokenTextStream,
  spokenText,
  sseData,
  sseLines,
} from "../../src/providers/llm/openai.stream.js"
import { outboundFor } from "../../src/providers/outbound.js"
import { type FakeOpenAi, type Scripted, startFakeOpenAi } from "../support/fake-openai.js"
import { simulatedBook } from "../support/rule-books.js"

const utf8 = (s: string) => new TextEncoder().encode(s)

async function* chunksOf(chunks: ReadonlyArray<Uint8Array | string>): AsyncGenerator<Uint8Array> {
  for (const c of chunks) yield typeof c === "string" ? utf8(c) : c
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const item of items) out.push(item)
  return out
}

/** A seeded generator, so a failure names the case that failed and repeats. */
function random(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = Math.imul(s ^ (s >>> 15), 1 | s)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** `text` cut at random places into pieces of 1 to `most` units. */
function cut(text: string, next: () => number, most = 6): string[] {
  const pieces: string[] = []
  for (let i = 0; i < text.length; ) {
    const n = 1 + Math.floor(next() * most)
    pieces.push(text.slice(i, i + n))
    i += n
  }
  return pieces
}

const endsInHalf = (s: string) => s.length > 0 && /[\uD800-\uDBFF]$/.test(s)

describe("reading SSE lines", () => {
  it("ends lines at LF, CRLF and CR wherever chunks are cut, and decodes characters split between them", async () => {
    const body = utf8("data: caf\u00e9 \u{1F600}\r\n\r\n: keep-alive\rdata: two\n\ndata: three\r\n")
    const whole = await collect(sseLines(chunksOf([body])))
    expect(whole).toEqual(["data: caf\u00e9 \u{1F600}", "", ": keep-alive", "data: two", "", "data: three"])
    // Every single cut, and a byte at a time: inside "é", inside the emoji, between CR and LF.
    for (let at = 1; at < body.length; at++) {
      expect(await collect(sseLines(chunksOf([body.subarray(0, at), body.subarray(at)]))), `cut at ${at}`).toEqual(
        whole,
      )
    }
    expect(await collect(sseLines(chunksOf([...body].map((b) => Uint8Array.of(b)))))).toEqual(whole)
  })

  it("drops a byte-order mark only before the first line, and an unended last line", async () => {
    expect(await collect(sseLines(chunksOf(["\uFEFFdata: a\n", "\uFEFFdata: b\n", "data: cut off"])))).toEqual([
      "data: a",
      "\uFEFFdata: b",
    ])
  })

  it("cuts a line that never ends without holding more than the bound", async () => {
    let sent = 0
    async function* endless(): AsyncGenerator<Uint8Array> {
      const chunk = new Uint8Array(4096).fill(0x78)
      for (;;) {
        sent += chunk.byteLength
        yield chunk
      }
    }
    const e = await collect(sseLines(endless(), 16 * 1024)).catch((err: unknown) => err)
    expect(e).toBeInstanceOf(LlmCallError)
    expect((e as LlmCallError).retryable).toBe(false)
    expect((e as LlmCallError).message).toContain("longer than 16384 bytes")
    expect(sent).toBeLessThanOrEqual(16 * 1024 + 4096)
    // A line within the bound passes, at the default bound too.
    const long = `data: ${"y".repeat(MAX_SSE_LINE_BYTES - 6)}`
    expect(await collect(sseLines(chunksOf([long, "\n"])))).toEqual([long])
  })

  it("gives each event's data: comments and other fields skipped, lines joined, an unended last event", async () => {
    const lines = chunksOf([
      ': keep-alive\n\nevent: message\nid: 7\ndata: {"a":\ndata:1}\n\nretry: 10\n\ndata\n\ndata: [DONE]\n',
    ])
    expect(await collect(sseData(sseLines(lines)))).toEqual(['{"a":\n1}', "", "[DONE]"])
  })
})

describe("the reply's text out of its JSON as it is written", () => {
  const text = 'Say "hi" \\ to caf\u00e9 \u{1F600}\n\t/\b\f\r \u0001 \u2028 ok \uD83D\uDE00 end'
  // Every escape JSON has, \uXXXX ones (a surrogate pair among them), and raw characters.
  const json =
    '{ "text" : "Say \\"hi\\" \\\\ to caf\\u00e9 \\ud83d\\ude00\\n\\t\\/\\b\\f\\r \\u0001 ' +
    '\\u2028 ok \uD83D\uDE00 end", "propose": {"text": "not this"}, "end": null}'

  it("decodes every escape, whole or split anywhere, and never returns half a character", () => {
    expect(JSON.parse(json).text).toBe(text)
    const whole = new LeadingTextField()
    expect(whole.push(json)).toBe(text)
    expect(whole.state).toBe("ended")
    for (let at = 0; at <= json.length; at++) {
      const f = new LeadingTextField()
      const a = f.push(json.slice(0, at))
      const b = f.push(json.slice(at))
      expect(a + b, `cut at ${at}`).toBe(text)
      expect(endsInHalf(a), `cut at ${at}`).toBe(false)
    }
    const next = random(1)
    for (let n = 0; n < 200; n++) {
      const f = new LeadingTextField()
      const out = cut(json, next).map((p) => f.push(p))
      expect(out.join(""), `case ${n}`).toBe(text)
      expect(out.some(endsInHalf), `case ${n}`).toBe(false)
    }
  })

  it("returns nothing until the key is known to be text, and nothing after the closing quote", () => {
    const f = new LeadingTextField()
    expect(f.push('{"te')).toBe("")
    expect(f.state).toBe("pending")
    expect(f.push('xt": "Hel')).toBe("Hel")
    expect(f.state).toBe("streaming")
    expect(f.push("lo\\u00")).toBe("lo")
    expect(f.push('e9", "end": {"text": "x"}}')).toBe("\u00e9")
    expect(f.state).toBe("ended")
    expect(f.push('"more"')).toBe("")
  })

  it("returns nothing when text is not the first key, or the answer is not an object", () => {
    for (const other of ['{"propose": null, "text": "Hi"}', '{"texts": "Hi"}', '["text"]', '{"tex": "Hi"}']) {
      const f = new LeadingTextField()
      expect(
        cut(other, random(2), 3)
          .map((p) => f.push(p))
          .join(""),
        other,
      ).toBe("")
      expect(f.state, other).toBe("absent")
    }
    // An escaped key is still the key.
    expect(new LeadingTextField().push('{"\\u0074ext": "Hi"}')).toBe("Hi")
  })

  it("shapes the text as the final reply is shaped, piece by piece: spaces collapsed, trimmed, capped", () => {
    const next = random(3)
    const alphabet = ["a", "b", " ", " ", "\n", "\t", "\u00a0", "\u3000", ".", "\u{1F600}"]
    for (let n = 0; n < 500; n++) {
      const raw = Array.from({ length: Math.floor(next() * 40) }, () => alphabet[Math.floor(next() * 10)]).join("")
      const max = 1 + Math.floor(next() * 30)
      const shaper = new SpokenTextStream(max)
      const pieces = cut(raw, next, 5).map((p) => shaper.push(p))
      const want = spokenText(raw, max)
      expect(pieces.join(""), `case ${n}: ${JSON.stringify(raw)} at most ${max}`).toBe(want)
      let sofar = ""
      for (const p of pieces) expect(want.startsWith((sofar += p))).toBe(true)
    }
  })

  it("reads deltas, refusals and the finish of a streamed completion, and an error in the stream", async () => {
    const event = (delta: object, finish: string | null = null) =>
      JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }] })
    async function* events(...data: string[]) {
      yield* data
    }
    const seen: string[] = []
    const end = await readChatStream(
      events(event({ role: "assistant" }), event({ content: "{" })),
      (d) => seen.push(d.content),
      (s) => s,
    )
    expect(end).toEqual({ content: "{", refusal: "", finishReason: null, done: false })
    expect(seen).toEqual(["", "{"])
    const done = await readChatStream(
      events(event({ refusal: "no" }), event({}, "stop"), JSON.stringify({ choices: [], usage: {} }), "[DONE]", "x"),
      () => {},
      (s) => s,
    )
    expect(done).toEqual({ content: "", refusal: "no", finishReason: "stop", done: true })
    const e = await rejection(
      readChatStream(
        events(JSON.stringify({ error: { message: "boom for sk-secret", code: "server_error" } })),
        () => {},
        (s) => s.replaceAll("sk-secret", "***"),
      ),
    )
    expect(e.message).toBe("language model API failed in the middle of its answer: server_error: boom for ***")
    expect(e.retryable).toBe(true)
  })
})

// ---------------------------------------------------------------------------------------------
// The adapter against a fake OpenAI-compatible server.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
/** Resolves when the client has gone (it hung up, or the test server closed). */
const gone = (res: ServerResponse) => (res.closed ? Promise.resolve() : once(res, "close").then(() => {}))

const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  `data: ${JSON.stringify({
    id: "chatcmpl-1",
    object: "chat.completion.chunk",
    model: "gpt-4o-mini-2024-07-18",
    choices: [{ index: 0, delta, finish_reason: finish }],
  })}\n\n`

/** A completion streamed: the role, `pieces` of the content, the finish, and [DONE] unless left out. */
const events = (pieces: ReadonlyArray<string>, o: { done?: boolean; finish?: string } = {}): string =>
  [
    chunk({ role: "assistant", content: "" }),
    ...pieces.map((p) => chunk({ content: p })),
    chunk({}, o.finish ?? "stop"),
    ...(o.done === false ? [] : ["data: [DONE]\n\n"]),
  ].join("")

const openStream = (res: ServerResponse) => {
  res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" })
  res.flushHeaders()
}

/** Streams `sse` in writes of at most `size` bytes (cut anywhere, inside characters too), `gapMs` apart. */
const streamed =
  (sse: string, o: { size?: number; gapMs?: number } = {}): Scripted =>
  async (res) => {
    openStream(res)
    const bytes = Buffer.from(sse, "utf8")
    const size = o.size ?? bytes.length
    for (let i = 0; i < bytes.length; i += size) {
      res.write(bytes.subarray(i, i + size))
      if (o.gapMs !== undefined) await sleep(o.gapMs)
    }
    res.end()
  }

const whole =
  (status: number, body: unknown, headers: Record<string, string> = {}): Scripted =>
  (res) =>
    void res
      .writeHead(status, { "content-type": "application/json", ...headers })
      .end(typeof body === "string" ? body : JSON.stringify(body))

const completion = (content: string) => ({
  id: "chatcmpl-1",
  object: "chat.completion",
  model: "gpt-4o-mini-2024-07-18",
  choices: [{ index: 0, message: { role: "assistant", content, refusal: null }, finish_reason: "stop" }],
})

async function rejection(p: Promise<unknown>): Promise<LlmCallError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  )
  expect(e).toBeInstanceOf(LlmCallError)
  return e as LlmCallError
}

describe("OpenAI-compatible adapter: streamed replies", () => {
  const KEY = "sk-test-stream-0123456789abcdef"
  const BOOK = simulatedBook()
  let fake: FakeOpenAi
  beforeAll(async () => {
    fake = await startFakeOpenAi()
  })
  afterEach(() => fake.reset())
  afterAll(async () => {
    await fake.close()
  })

  const llm = (over: Partial<OpenAiLlmOptions> = {}) =>
    makeOpenAiLlm({ baseUrl: fake.url, apiKey: KEY, model: "gpt-4o-mini", timeoutMs: 2_000, ...over })
  const request = (): ReplyRequest => ({
    ruleBook: BOOK,
    history: [
      { speaker: "agent", text: BOOK.opening_line },
      { speaker: "callee", text: "Sounds good, what does it cost?" },
    ],
    callee: { name: "Asha" },
    agentName: "Priya",
    company: "Acme",
  })
  const streamReply = async (over: Partial<OpenAiLlmOptions> = {}, req = request()) => {
    const pieces: string[] = []
    const reply = await llm(over).streamReply!(req, (p) => pieces.push(p))
    return { reply, pieces }
  }
  /** streamReply, for one that rejects: its error and the pieces given before it did. */
  const failedStream = async (over: Partial<OpenAiLlmOptions> = {}, req = request()) => {
    const pieces: string[] = []
    const error = await rejection(llm(over).streamReply!(req, (p) => pieces.push(p)))
    expect(error.message).not.toContain(KEY)
    return { error, pieces }
  }

  const ANSWER = {
    text: 'The fibre plan is \u20b9799 a month, and the caf\u00e9 "Wi-Fi" works too. Shall I sign you up?',
    propose: null,
    end: { outcome: "no_decision" },
  }
  const ANSWER_JSON = JSON.stringify(ANSWER)

  it("gives the text in pieces while the server still holds the answer open, and the reply reply() gives", async () => {
    let release!: () => void
    const held = new Promise<void>((resolve) => (release = resolve))
    let ended = false
    const cutAt = ANSWER_JSON.indexOf("Shall")
    fake.script(async (res) => {
      openStream(res)
      res.write(chunk({ role: "assistant", content: "" }))
      for (const p of cut(ANSWER_JSON.slice(0, cutAt), random(4), 4)) res.write(chunk({ content: p }))
      await held
      res.end(`${chunk({ content: ANSWER_JSON.slice(cutAt) })}${chunk({}, "stop")}data: [DONE]\n\n`)
      ended = true
    })
    const pieces: string[] = []
    const before = 'The fibre plan is \u20b9799 a month, and the caf\u00e9 "Wi-Fi" works too.'
    let heard!: () => void
    const allBefore = new Promise<void>((resolve) => (heard = resolve))
    let firstWhileOpen = false
    const model = llm()
    const streaming = model.streamReply!(request(), (p) => {
      if (pieces.length === 0) firstWhileOpen = !ended
      pieces.push(p)
      if (pieces.join("") === before) heard()
    })
    // Everything the server wrote before it holds the answer is heard while it still holds it.
    await allBefore
    expect(firstWhileOpen).toBe(true)
    expect(ended).toBe(false)
    release()
    const reply = await streaming
    expect(pieces.length).toBeGreaterThan(1)
    expect(pieces.join("")).toBe(reply.text)

    fake.script(whole(200, completion(ANSWER_JSON)))
    expect(reply).toEqual(await model.reply(request()))
    expect(reply).toEqual({ text: ANSWER.text, end: { outcome: "no_decision" } })

    // The same request as reply()'s, streamed.
    const [asked, plain] = fake.requests
    expect(asked!.path).toBe("/v1/chat/completions")
    expect(asked!.headers.authorization).toBe(`Bearer ${KEY}`)
    expect(asked!.headers.accept).toBe("text/event-stream")
    const { stream, ...rest } = asked!.body
    expect(stream).toBe(true)
    expect(rest).toEqual(plain!.body)
  })

  it("decodes escapes and characters cut between writes, with CRLF lines and keep-alive comments", async () => {
    const answer = JSON.stringify({ text: 'Caf\u00e9 \u{1F600} \u2014 "ok"\\ done.', propose: null, end: null })
    // The content pieces escape everything outside ASCII, then are cut inside the escapes.
    const escaped = answer.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)
    expect(JSON.parse(escaped)).toEqual(JSON.parse(answer))
    const sse = `: keep-alive\r\n\r\n${events(cut(escaped, random(5), 3)).replaceAll("\n", "\r\n")}`
    fake.script(streamed(sse, { size: 7, gapMs: 1 }))
    const { reply, pieces } = await streamReply()
    expect(reply.text).toBe('Caf\u00e9 \u{1F600} \u2014 "ok"\\ done.')
    expect(pieces.join("")).toBe(reply.text)
    expect(pieces.some(endsInHalf)).toBe(false)

    // Raw UTF-8 in the content, written a byte at a time.
    fake.script(streamed(events(cut(answer, random(6), 5)), { size: 1 }))
    const raw = await streamReply()
    expect(raw.reply.text).toBe(reply.text)
    expect(raw.pieces.join("")).toBe(reply.text)
  })

  it("gives only what the final text holds: spaces collapsed and trimmed, cut at 1000 characters", async () => {
    const spaced = { text: "  Hello,\n\n  Asha.   How  are\tyou?  ", propose: null, end: null }
    fake.script(streamed(events(cut(JSON.stringify(spaced), random(7), 3))))
    const a = await streamReply()
    expect(a.reply.text).toBe("Hello, Asha. How are you?")
    expect(a.pieces.join("")).toBe(a.reply.text)

    const long = { text: "word ".repeat(300), propose: null, end: null }
    fake.script(streamed(events(cut(JSON.stringify(long), random(8), 20))))
    const b = await streamReply()
    expect(b.reply.text).toHaveLength(1000)
    expect(b.pieces.join("")).toBe(b.reply.text)
  })

  it("gives the whole text at the end when text is not the first key, or the server answers whole", async () => {
    const late = JSON.stringify({ end: null, propose: null, text: "Thanks, Asha. Goodbye." })
    fake.script(streamed(events(cut(late, random(9), 4))))
    const a = await streamReply()
    expect(a.pieces).toEqual(["Thanks, Asha. Goodbye."])
    expect(a.reply).toEqual({ text: "Thanks, Asha. Goodbye." })

    fake.script(whole(200, completion(ANSWER_JSON)))
    const b = await streamReply()
    expect(b.pieces).toEqual([ANSWER.text])
  })

  it("takes a body that ends without [DONE] once the answer is whole, and rejects one cut short", async () => {
    fake.script(streamed(events(cut(ANSWER_JSON, random(10), 8), { done: false })))
    const a = await streamReply()
    expect(a.reply.text).toBe(ANSWER.text)

    fake.script(streamed(`${chunk({ role: "assistant", content: "" })}${chunk({ content: ANSWER_JSON.slice(0, 40) })}`))
    const b = await failedStream()
    expect(b.error.message).toContain("the stream ended before the answer did")
    expect(b.error.retryable).toBe(false)
    expect(b.pieces.join("")).toBe(ANSWER.text.slice(0, 40 - '{"text":"'.length))
    // The first answer's request and this one's: pieces were given, so no retry.
    expect(fake.requests).toHaveLength(2)
  })

  it("retries a 429 (with its Retry-After) and an error event before anything was given", async () => {
    fake.script(
      whole(429, { error: { message: "Rate limit reached", code: "rate_limit_exceeded" } }, { "retry-after": "0" }),
      streamed(`${chunk({ role: "assistant" })}data: {"error":{"message":"overloaded","type":"server_error"}}\n\n`),
      streamed(events(cut(ANSWER_JSON, random(11), 6))),
    )
    const { reply, pieces } = await streamReply()
    expect(reply.text).toBe(ANSWER.text)
    expect(pieces.join("")).toBe(ANSWER.text)
    expect(fake.requests).toHaveLength(3)
  })

  it("rejects a 401 at once, not retryable, without the key", async () => {
    fake.script(whole(401, { error: { message: `Incorrect API key provided: ${KEY}.`, code: "invalid_api_key" } }))
    const { error, pieces } = await failedStream()
    expect(error.retryable).toBe(false)
    expect(error.status).toBe(401)
    expect(error.message).toBe("language model API answered 401: invalid_api_key: Incorrect API key provided: ***.")
    expect(pieces).toEqual([])
    expect(fake.requests).toHaveLength(1)
  })

  it("rejects an error in the stream after pieces were given, and does not retry", async () => {
    fake.script(
      streamed(
        `${chunk({ role: "assistant", content: "" })}${chunk({ content: '{"text":"The fibre plan is ' })}` +
          `data: {"error":{"message":"server error with ${KEY}","type":"server_error"}}\n\n`,
      ),
      streamed(events([ANSWER_JSON])),
    )
    const { error, pieces } = await failedStream()
    expect(error.retryable).toBe(false)
    expect(error.message).toContain("failed in the middle of its answer: server error with ***")
    expect(pieces.join("")).toBe("The fibre plan is")
    expect(fake.requests).toHaveLength(1)
  })

  it("rejects a stream that goes quiet after its first pieces, at the idle limit, without retrying", async () => {
    fake.script(async (res) => {
      openStream(res)
      res.write(`${chunk({ role: "assistant", content: "" })}${chunk({ content: '{"text":"One moment. ' })}`)
      // Keep-alive comments are not an answer.
      const alive = setInterval(() => res.write(": keep-alive\n\n"), 30)
      await gone(res)
      clearInterval(alive)
    })
    const started = Date.now()
    const { error, pieces } = await failedStream({ stream: { idleMs: 150 } })
    expect(Date.now() - started).toBeLessThan(1_500)
    expect(error.message).toBe("language model API went quiet for 150 ms in the middle of its answer")
    expect(error.retryable).toBe(false)
    expect(pieces).toEqual(["One moment."])
    expect(fake.requests).toHaveLength(1)
  })

  it("retries a stream that sends no answer by the first-token limit, then gives up", async () => {
    const silent: Scripted = async (res) => {
      openStream(res)
      res.write(chunk({ role: "assistant", content: "" }))
      await gone(res)
    }
    fake.script(silent, silent, silent)
    const { error, pieces } = await failedStream({ stream: { firstTokenMs: 100 } })
    expect(error.message).toBe("language model API sent no answer within 100 ms (gave up after 3 attempts)")
    expect(error.retryable).toBe(true)
    expect(pieces).toEqual([])
    expect(fake.requests).toHaveLength(3)
  })

  it("cuts off an endless line", async () => {
    let written = 0
    fake.script(async (res) => {
      openStream(res)
      res.write("data: ")
      const x = Buffer.alloc(8 * 1024, "x")
      const flood = setInterval(() => {
        written += x.length
        res.write(x)
      }, 1)
      await gone(res)
      clearInterval(flood)
    })
    const { error } = await failedStream()
    expect(error.message).toBe(
      `language model API sent a stream line longer than ${MAX_SSE_LINE_BYTES} bytes (cut off)`,
    )
    expect(error.retryable).toBe(false)
    expect(fake.requests).toHaveLength(1)
    expect(written).toBeLessThan(4 * 1024 * 1024)
  })

  it("rejects a refusal, a reply cut at the token limit and a malformed reply, none retried", async () => {
    fake.script(
      streamed(`${chunk({ role: "assistant", refusal: "I can't " })}${chunk({ refusal: "help with that." })}`),
    )
    expect((await failedStream()).error.message).toBe("language model refused: I can't help with that.")

    fake.script(streamed(events([ANSWER_JSON.slice(0, 30)], { finish: "length" })))
    const cutOff = await failedStream()
    expect(cutOff.error.message).toContain("cut off at the token limit")
    expect(cutOff.error.retryable).toBe(false)

    const bad = JSON.stringify({ text: "I'll give you 90% off.", propose: { action: "refund" }, end: null })
    fake.script(streamed(events(cut(bad, random(12), 5))))
    const malformed = await failedStream()
    expect(malformed.error.message).toContain("malformed reply: proposes refund")
    expect(malformed.pieces.join("")).toBe("I'll give you 90% off.")
    expect(fake.requests).toHaveLength(3)
  })

  it("stops when the caller's signal fires", async () => {
    fake.script(async (res) => {
      openStream(res)
      await gone(res)
    })
    const ac = new AbortController()
    setTimeout(() => ac.abort(), 50)
    const { error } = await failedStream({}, { ...request(), signal: ac.signal })
    expect(error.message).toBe("language model request aborted by its caller")
    expect(error.retryable).toBe(false)
    expect(fake.requests).toHaveLength(1)
  })

  it("rejects with what the caller's onText throws, and stops reading", async () => {
    fake.script(streamed(events(cut(ANSWER_JSON, random(13), 6))))
    const mine = new Error("the leg is gone")
    const e = await llm().streamReply!(request(), () => {
      throw mine
    }).catch((err: unknown) => err)
    expect(e).toBe(mine)
    expect(fake.requests).toHaveLength(1)
  })

  it("is refused a private address under a tenant's guard", async () => {
    const guarded = outboundFor({ allowPrivateProviderUrls: false, providerResponseLimitBytes: 1024 * 1024 }, "tenant")
    const { error } = await failedStream({ outbound: guarded })
    expect(error.message).toContain("not a public address")
    expect(error.retryable).toBe(false)
    expect(fake.requests).toHaveLength(0)
  })
})
