// The mail providers: the outbox simulator's one-line-per-message file (also under concurrency)
// and the HTTP adapter against a local fake mail API (request shape, retries, refusal, timeout).

import { mkdtemp, readFile, rm } from "node:fs/promises"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { makeHttpMail } from "../../src/providers/mail/http.mail.js"
import { fromOnBehalf, MailDeliveryError, type OutgoingMail } from "../../src/providers/mail/mail.interface.js"
import { makeOutboxMail, readOutbox } from "../../src/providers/mail/outbox.mail.js"

const mail = (over: Partial<OutgoingMail> = {}): OutgoingMail => ({
  to: "ada@example.com",
  subject: "Verify your email",
  text: "Open https://parley.test/verify?t=abc\nto verify.",
  html: '<p>Open <a href="https://parley.test/verify?t=abc">this link</a> "now"</p>',
  links: ["https://parley.test/verify?t=abc"],
  kind: "verify_email",
  ...over,
})

describe("outbox mail", () => {
  let dir: string
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "parley-outbox-"))
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it("appends one parseable line per mail with every field, creating the directory", async () => {
    const file = join(dir, "nested", "deeper", "outbox.jsonl")
    const outbox = makeOutboxMail(file)
    expect(outbox.name).toBe("outbox")
    const before = Date.now()
    const first = await outbox.send(mail())
    const second = await outbox.send(
      mail({ to: "bob@example.com", kind: "otp", subject: "Your code", text: "Code: 123456", links: [] }),
    )
    expect(first.id).not.toBe(second.id)

    const raw = await readFile(file, "utf8")
    expect(raw.endsWith("\n")).toBe(true)
    const lines = raw.split("\n").filter((l) => l !== "")
    expect(lines).toHaveLength(2)
    const one = JSON.parse(lines[0]!) as Record<string, unknown>
    expect(Object.keys(one).sort()).toEqual(["at", "html", "id", "kind", "links", "subject", "text", "to"])
    expect(one).toMatchObject({ id: first.id, ...mail(), links: ["https://parley.test/verify?t=abc"] })
    expect(typeof one.at).toBe("string")
    expect(new Date(one.at as string).toISOString()).toBe(one.at)
    expect(Date.parse(one.at as string)).toBeGreaterThanOrEqual(before - 1)

    const all = readOutbox(file)
    expect(all.map((m) => [m.id, m.to, m.kind])).toEqual([
      [first.id, "ada@example.com", "verify_email"],
      [second.id, "bob@example.com", "otp"],
    ])
    expect(all[1]!.text).toBe("Code: 123456")
    expect(all[1]!.links).toEqual([])
  })

  it("reads an absent outbox as empty", () => {
    expect(readOutbox(join(dir, "never-written.jsonl"))).toEqual([])
  })

  it("keeps 50 concurrent sends as 50 intact lines", async () => {
    const file = join(dir, "concurrent.jsonl")
    const outbox = makeOutboxMail(file)
    // Large enough bodies that interleaved writes would certainly tear a line.
    const big = "x".repeat(20_000)
    const ids = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        outbox.send(mail({ to: `user${i}@example.com`, text: `${i} ${big}`, html: `<p>${i}</p>` })),
      ),
    )
    const lines = (await readFile(file, "utf8")).split("\n").filter((l) => l !== "")
    expect(lines).toHaveLength(50)
    const parsed = lines.map((l) => JSON.parse(l) as { id: string; to: string; text: string })
    expect(new Set(parsed.map((p) => p.id))).toEqual(new Set(ids.map((r) => r.id)))
    for (const p of parsed) {
      const n = Number(p.to.slice(4, p.to.indexOf("@")))
      expect(p.text).toBe(`${n} ${big}`)
    }
    expect(readOutbox(file)).toHaveLength(50)
  })

  it("refuses to read a corrupted outbox rather than skip lines", async () => {
    const file = join(dir, "corrupt.jsonl")
    await makeOutboxMail(file).send(mail())
    const { appendFile } = await import("node:fs/promises")
    await appendFile(file, '{"id": "half\n')
    expect(() => readOutbox(file)).toThrow(/corrupt\.jsonl:2/)
  })
})

interface Received {
  method: string | undefined
  url: string | undefined
  headers: IncomingMessage["headers"]
  body: string
}

/** A fake mail API: each request is recorded and answered by the next scripted handler. */
class FakeMailApi {
  readonly received: Received[] = []
  script: Array<(res: ServerResponse) => void> = []
  private server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      this.received.push({
        method: req.method,
        url: req.url,
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      })
      const handler = this.script.shift() ?? ((r: ServerResponse) => json(r, 500, { error: "unscripted" }))
      handler(res)
    })
  })
  url = ""

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve))
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`
  }

  reset(): void {
    this.received.length = 0
    this.script = []
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", ...headers })
  res.end(JSON.stringify(body))
}

describe("HTTP mail adapter", () => {
  const api = new FakeMailApi()
  const apiKey = "mk_live_0123456789abcdef"
  const from = "Parley <no-reply@parley.test>"
  beforeAll(() => api.start())
  afterEach(() => api.reset())
  afterAll(() => api.stop())

  it("POSTs the message as JSON to {baseUrl}/messages with the bearer key", async () => {
    api.script.push((res) => json(res, 202, { id: "msg_1" }))
    const provider = makeHttpMail({ baseUrl: `${api.url}/`, apiKey, from })
    expect(provider.name).toBe("http")
    await expect(provider.send(mail())).resolves.toEqual({ id: "msg_1" })

    expect(api.received).toHaveLength(1)
    const req = api.received[0]!
    expect(req.method).toBe("POST")
    expect(req.url).toBe("/v1/messages")
    expect(req.headers.authorization).toBe(`Bearer ${apiKey}`)
    expect(req.headers["content-type"]).toMatch(/^application\/json/)
    expect(JSON.parse(req.body)).toEqual({
      from,
      to: "ada@example.com",
      subject: "Verify your email",
      text: mail().text,
      html: mail().html,
      tags: ["verify_email"],
    })
  })

  it("sends a workspace's mail in its name from our address, with no header injection", async () => {
    const provider = makeHttpMail({ baseUrl: api.url, apiKey, from })
    for (let i = 0; i < 3; i++) api.script.push((res) => json(res, 202, { id: `msg_${i}` }))
    await provider.send(mail({ senderName: "Acme Dental" }))
    await provider.send(mail({ senderName: 'Evil"\r\nBcc: all@example.com' }))
    await provider.send(mail({ senderName: '\n"' }))
    const froms = api.received.map((r) => (JSON.parse(r.body) as { from: string }).from)
    expect(froms).toEqual([
      '"Acme Dental via Parley" <no-reply@parley.test>',
      '"EvilBcc: all@example.com via Parley" <no-reply@parley.test>',
      from,
    ])
    expect(fromOnBehalf("no-reply@x.test", "Acme")).toBe('"Acme via Parley" <no-reply@x.test>')
    expect(fromOnBehalf('"Ops Team" <ops@x.test>', "Acme")).toBe('"Acme via Ops Team" <ops@x.test>')
  })

  it("retries a 503 and succeeds, sending the same idempotency key", async () => {
    api.script.push((res) => json(res, 503, { error: "overloaded" }))
    api.script.push((res) => json(res, 200, { id: "msg_2" }))
    const provider = makeHttpMail({ baseUrl: api.url, apiKey, from })
    await expect(provider.send(mail({ kind: "otp" }))).resolves.toEqual({ id: "msg_2" })
    expect(api.received).toHaveLength(2)
    const keys = api.received.map((r) => r.headers["idempotency-key"])
    expect(keys[0]).toBeTruthy()
    expect(keys[1]).toBe(keys[0])
    expect(api.received[1]!.body).toBe(api.received[0]!.body)
  })

  it("retries a 429 too, and gives up after three attempts with a retryable error", async () => {
    for (let i = 0; i < 3; i++) api.script.push((res) => json(res, 429, { error: "slow down" }, { "retry-after": "0" }))
    const provider = makeHttpMail({ baseUrl: api.url, apiKey, from })
    const err = await provider.send(mail()).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(MailDeliveryError)
    expect((err as MailDeliveryError).retryable).toBe(true)
    expect((err as MailDeliveryError).status).toBe(429)
    expect(api.received).toHaveLength(3)
  })

  it("gives up on a 400 at once, without retrying and without the key in the error", async () => {
    // A provider that echoes the request's credentials back in its error body.
    api.script.push((res) => json(res, 400, { error: `invalid recipient (key ${apiKey})` }))
    const provider = makeHttpMail({ baseUrl: api.url, apiKey, from })
    const err = await provider.send(mail({ to: "not-an-address" })).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(MailDeliveryError)
    const e = err as MailDeliveryError
    expect(e.retryable).toBe(false)
    expect(e.status).toBe(400)
    expect(e.message).toMatch(/400/)
    expect(e.message).toMatch(/invalid recipient/)
    expect(e.message).not.toContain(apiKey)
    expect(api.received).toHaveLength(1)
  })

  it("refuses a 2xx without a message id rather than guess", async () => {
    api.script.push((res) => {
      res.writeHead(200, { "content-type": "text/html" })
      res.end("<html>welcome</html>")
    })
    const err = await makeHttpMail({ baseUrl: api.url, apiKey, from })
      .send(mail())
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(MailDeliveryError)
    expect((err as MailDeliveryError).retryable).toBe(false)
    expect(api.received).toHaveLength(1)
  })

  it("times out on a server that never answers", async () => {
    // Never answers: the handler leaves the response open.
    for (let i = 0; i < 3; i++) api.script.push(() => {})
    const provider = makeHttpMail({ baseUrl: api.url, apiKey, from, timeoutMs: 150 })
    const t0 = performance.now()
    const err = await provider.send(mail()).catch((e: unknown) => e)
    const elapsed = performance.now() - t0
    expect(err).toBeInstanceOf(MailDeliveryError)
    const e = err as MailDeliveryError
    expect(e.retryable).toBe(true)
    expect(e.message).toMatch(/no answer within 150 ms/)
    expect(api.received).toHaveLength(3)
    // Three 150 ms attempts plus 250 + 500 ms of backoff, and nowhere near a default timeout.
    expect(elapsed).toBeGreaterThanOrEqual(3 * 150 + 750 - 50)
    expect(elapsed).toBeLessThan(5_000)
  })

  it("treats an unreachable host as retryable", async () => {
    const closed = new FakeMailApi()
    await closed.start()
    const url = closed.url
    await closed.stop()
    const err = await makeHttpMail({ baseUrl: url, apiKey, from, timeoutMs: 1000 })
      .send(mail())
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(MailDeliveryError)
    expect((err as MailDeliveryError).retryable).toBe(true)
    expect((err as MailDeliveryError).message).toMatch(/unreachable/)
  })

  it("uses an injected fetch", async () => {
    const calls: string[] = []
    const fakeFetch: typeof fetch = async (input) => {
      calls.push(String(input))
      return new Response(JSON.stringify({ id: 42 }), { status: 200, headers: { "content-type": "application/json" } })
    }
    const provider = makeHttpMail({ baseUrl: "https://mail.invalid/api", apiKey, from, fetch: fakeFetch })
    await expect(provider.send(mail())).resolves.toEqual({ id: "42" })
    expect(calls).toEqual(["https://mail.invalid/api/messages"])
  })
})
