// Outbound requests to providers stay bounded: a tenant's URL whose name resolves publicly when the
// credential is saved and privately later is refused when it connects (also through the runtime's
// wiring and the onboarding API), redirects are never followed (so never to 127.0.0.1), a 100 MiB
// answer is cut at the cap without the process holding it, and a slow-drip body hits the timeout.
// There is no public network here: names resolve through an injected resolver, and the only
// servers ever connected to listen on 127.0.0.1.

import { randomBytes } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import pino from "pino"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import type { CallTerms } from "../../src/billing/call-terms.js"
import type { CredentialsService } from "../../src/onboarding/Credentials.js"
import { validateCredential } from "../../src/onboarding/credentials.validators.js"
import { privateUrlReason } from "../../src/onboarding/public-url.js"
import { loadConfig } from "../../src/platform/config.js"
import { providerResolver } from "../../src/providers/accounts.js"
import { ProviderCallError } from "../../src/providers/http.util.js"
import type { LanguageModel } from "../../src/providers/llm/llm.interface.js"
import { makeOpenAiLlm } from "../../src/providers/llm/openai.llm.js"
import { makeHttpMail } from "../../src/providers/mail/http.mail.js"
import { isPrivateAddress, outboundFor, readBounded, setHostResolver } from "../../src/providers/outbound.js"
import { postToGateway } from "../../src/providers/payments/payments.interface.js"
import { telcoARequest } from "../../src/providers/telephony/telco-a.numbers.js"
import { makeTelcoATelephony } from "../../src/providers/telephony/telco-a.telephony.js"
import type { CarrierEvent, TelephonyProvider } from "../../src/providers/telephony/telephony.interface.js"
import { generateRuleBook } from "../../src/workflows/rulebook.prompt.js"
import type { RuleBookRequest } from "../../src/workflows/rulebook.schema.js"
import { api } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

const MiB = 1024 * 1024
const PUBLIC_ADDRESS = "93.184.216.34"

interface Fake {
  readonly url: string
  readonly port: number
  hits: number
  /** Bytes the handler wrote (streams count themselves here). */
  sent: number
  close(): Promise<void>
}

/** A local HTTP server answering every request with `handle`; counts requests. */
async function fake(handle: (req: IncomingMessage, res: ServerResponse, self: Fake) => void): Promise<Fake> {
  const server = createServer((req, res) => {
    self.hits++
    req.resume()
    req.on("end", () => handle(req, res, self))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  const self: Fake = {
    url: `http://127.0.0.1:${port}`,
    port,
    hits: 0,
    sent: 0,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
  return self
}

/** Streams `total` bytes of JSON-looking filler, respecting backpressure, until done or the client leaves. */
async function stream(
  res: ServerResponse,
  self: Fake,
  total: number,
  headers: Record<string, string | number> = {},
): Promise<void> {
  res.writeHead(200, { "content-type": "application/json", ...headers })
  const chunk = Buffer.alloc(64 * 1024, 0x61)
  let gone = false
  res.on("close", () => (gone = true))
  while (!gone && self.sent < total) {
    self.sent += chunk.length
    if (!res.write(chunk))
      await new Promise<void>((resolve) => {
        const done = () => (res.off("drain", done), res.off("close", done), resolve())
        res.on("drain", done).on("close", done)
      })
  }
  if (!gone) res.end()
}

const ruleBookRequest: RuleBookRequest = {
  prompt: "Remind customers of their appointment.",
  currency: "USD",
  country: "US",
  planTier: "free",
  objections: [],
}

async function rejection(p: Promise<unknown>): Promise<ProviderCallError> {
  try {
    await p
  } catch (e) {
    expect(e).toBeInstanceOf(ProviderCallError)
    return e as ProviderCallError
  }
  throw new Error("expected a rejection")
}

const guardOn = { allowPrivateProviderUrls: false, providerResponseLimitBytes: 2 * MiB }

/** A resolver answering `public` for the first `publicFor` lookups of `name`, 127.0.0.1 after. */
function rebinding(name: string, publicFor: number): { lookups: () => number } {
  let n = 0
  setHostResolver(async (host) => {
    if (host !== name) throw Object.assign(new Error(`${host} does not resolve here`), { code: "ENOTFOUND" })
    n++
    return [{ address: n <= publicFor ? PUBLIC_ADDRESS : "127.0.0.1", family: 4 }]
  })
  return { lookups: () => n }
}

afterEach(() => setHostResolver(undefined))

describe("address classification", () => {
  it("treats loopback, private, link-local, CGNAT, multicast, unspecified and mapped forms as private", () => {
    for (const a of [
      "127.0.0.1",
      "10.1.2.3",
      "172.16.0.1",
      "192.168.1.1",
      "169.254.169.254",
      "100.64.0.1",
      "0.0.0.0",
      "224.0.0.1",
      "255.255.255.255",
    ])
      expect(isPrivateAddress(a), a).toBe(true)
    for (const a of [
      "::",
      "::1",
      "fd00::1",
      "fe80::1",
      "ff02::1",
      "::ffff:127.0.0.1",
      "::ffff:7f00:1",
      "[::ffff:a00:1]",
      "64:ff9b::a00:1",
      "::127.0.0.1",
    ])
      expect(isPrivateAddress(a), a).toBe(true)
    expect(isPrivateAddress("not an address")).toBe(true)
    for (const a of [PUBLIC_ADDRESS, "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
      expect(isPrivateAddress(a), a).toBe(false)
  })
})

describe("connect-time address guard (tenant URLs)", () => {
  let provider: Fake
  beforeAll(async () => {
    provider = await fake((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ choices: [{ message: { content: "{}" } }] }))
    })
  })
  afterAll(() => provider.close())

  it("refuses a name that resolved publicly at save time and privately at call time", async () => {
    const name = "llm.rebind.test"
    const dns = rebinding(name, 1)
    const baseUrl = `http://${name}:${provider.port}/v1`
    // Saved: the save-time check saw a public address.
    expect(await privateUrlReason(baseUrl)).toBeUndefined()
    const before = provider.hits
    const e = await rejection(
      generateRuleBook(
        makeOpenAiLlm({
          baseUrl,
          apiKey: "sk-x",
          model: "m",
          timeoutMs: 2_000,
          outbound: outboundFor(guardOn, "tenant"),
        }),
        ruleBookRequest,
      ),
    )
    expect(e.message).toMatch(/refused to connect to llm\.rebind\.test: it resolves to a non-public address/)
    expect(e.message).not.toContain("127.0.0.1")
    // Not worth retrying: the same refusal every time, so one lookup, and nothing reached the server.
    expect(e.retryable).toBe(false)
    expect(dns.lookups()).toBe(2)
    expect(provider.hits).toBe(before)
  })

  it(
    "refuses a private IP literal (also IPv4-mapped IPv6), " + "and the same URL as the platform's is allowed",
    async () => {
      const tenant = outboundFor(guardOn, "tenant")
      for (const host of ["127.0.0.1", "[::ffff:127.0.0.1]"]) {
        const e = await rejection(
          generateRuleBook(
            makeOpenAiLlm({
              baseUrl: `http://${host}:${provider.port}/v1`,
              model: "m",
              timeoutMs: 2_000,
              outbound: tenant,
            }),
            ruleBookRequest,
          ),
        )
        expect(e.message, host).toMatch(/refused to connect to .*not a public address/)
      }
      expect(provider.hits).toBe(0)
      // The operator's own URL (platform) is not guarded: the control that the guard is what refused.
      const platform = makeOpenAiLlm({
        baseUrl: `${provider.url}/v1`,
        model: "m",
        timeoutMs: 2_000,
        outbound: outboundFor(guardOn, "platform"),
      })
      await expect(generateRuleBook(platform, ruleBookRequest)).resolves.toEqual({})
      expect(provider.hits).toBe(1)
    },
  )

  it("refuses a name with any private address among its answers", async () => {
    setHostResolver(async () => [
      { address: PUBLIC_ADDRESS, family: 4 },
      { address: "10.0.0.5", family: 4 },
    ])
    const before = provider.hits
    const e = await rejection(
      telcoARequest(
        { apiUrl: `http://telco.mixed.test:${provider.port}`, accountSid: "AC1", authToken: "tok" },
        { method: "GET", path: "/x.json" },
        { timeoutMs: 2_000, outbound: outboundFor(guardOn, "tenant") },
      ),
    )
    expect(e.message).toMatch(/telco\.mixed\.test: it resolves to a non-public address/)
    expect(e.message).not.toContain("10.0.0.5")
    // The save-time check refuses it in the same words.
    const reason = await privateUrlReason(`http://telco.mixed.test:${provider.port}`)
    expect(reason).toBe("must be a public address; telco.mixed.test resolves to a non-public one")
    expect(provider.hits).toBe(before)
  })

  it("guards the runtime's tenant model: a byok credential's base URL rebinding to loopback is refused", async () => {
    const name = "own-llm.rebind.test"
    rebinding(name, 0)
    const config = loadConfig({ ALLOW_PRIVATE_PROVIDER_URLS: "false" })
    const credentials: CredentialsService = {
      crypto: undefined,
      active: async (_tenant, p) =>
        p === "llm"
          ? {
              provider: "llm",
              primaryId: null,
              secret: "sk-own",
              extra: { base_url: `http://${name}:${provider.port}/v1`, model: "m" },
            }
          : undefined,
      telcoAAccount: async () => undefined,
    }
    const resolve = providerResolver({
      config,
      credentials,
      platformTelephony: { name: "sim" } as unknown as TelephonyProvider,
      platformLlm: { name: "platform" } as unknown as LanguageModel,
      channel: { register: () => () => {} },
      log: pino({ level: "silent" }),
      terms: async () => ({ billing: "bundled", byokMissing: [] }) as unknown as CallTerms,
    })
    const { llm } = await resolve(1)
    expect(llm.name).toBe("openai")
    const before = provider.hits
    const e = await rejection(generateRuleBook(llm, ruleBookRequest))
    expect(e.message).toMatch(/refused to connect to own-llm\.rebind\.test/)
    expect(provider.hits).toBe(before)
  })

  it("guards live validation of a tenant's base URL", async () => {
    rebinding("tts.rebind.test", 0)
    const before = provider.hits
    const outcome = await validateCredential(
      "tts",
      {
        primaryId: null,
        secret: "spk_secret",
        extra: { api_base_url: `http://tts.rebind.test:${provider.port}` },
      } as never,
      { platform: {}, timeoutMs: 2_000, allowPrivateProviderUrls: false },
    )
    expect(outcome).toMatchObject({ result: "unavailable" })
    expect((outcome as { message: string }).message).toMatch(/refused to connect to tts\.rebind\.test/)
    expect(provider.hits).toBe(before)
  })
})

describe("through the onboarding API (ALLOW_PRIVATE_PROVIDER_URLS=false)", () => {
  let srv: TestServer
  let provider: Fake
  beforeAll(async () => {
    provider = await fake((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ id: "acct_1" }))
    })
    srv = await startTestServer({
      env: { CREDENTIALS_MASTER_KEY: randomBytes(32).toString("base64"), ALLOW_PRIVATE_PROVIDER_URLS: "false" },
    })
  })
  afterAll(async () => {
    await srv?.stop()
    await provider?.close()
  })

  it("a credential whose host passes the save-time check but rebinds is refused when validation connects", async () => {
    const name = "speech.rebind.test"
    const dns = rebinding(name, 1)
    const a = api(srv)
    const s = await a.signup()
    expect((await a.call("PUT", "/onboarding/mode", { token: s.token, body: { mode: "byok" } })).status).toBe(200)
    const res = await a.call("PUT", "/onboarding/credentials/tts", {
      token: s.token,
      body: { secret: "spk_0123456789abcdef", extra: { api_base_url: `http://${name}:${provider.port}` } },
    })
    const body = (await res.json()) as { validated: boolean; error?: string; credential: { status: string } }
    expect(res.status).toBe(200)
    expect(body).toMatchObject({ validated: false, credential: { status: "unvalidated" } })
    expect(body.error).toMatch(/refused to connect to speech\.rebind\.test/)
    expect(dns.lookups()).toBe(2)
    expect(provider.hits).toBe(0)
  })
})

describe("redirects are never followed", () => {
  let target: Fake
  let redirector: Fake
  beforeAll(async () => {
    target = await fake((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ id: "m_1", sid: "CA1", choices: [{ message: { content: "{}" } }] }))
    })
    redirector = await fake((_req, res) => {
      res.writeHead(302, { location: `http://127.0.0.1:${target.port}/stolen` })
      res.end()
    })
  })
  afterAll(async () => {
    await target.close()
    await redirector.close()
  })

  // The first hop is the platform's own URL (allowed on loopback); the redirect target is never asked.
  const cases: Array<[string, () => Promise<unknown>]> = [
    [
      "language model",
      () => generateRuleBook(makeOpenAiLlm({ baseUrl: redirector.url, model: "m", timeoutMs: 2_000 }), ruleBookRequest),
    ],
    [
      "mail",
      () =>
        makeHttpMail({ baseUrl: redirector.url, apiKey: "k", from: "a@b.c", timeoutMs: 2_000 }).send({
          to: "x@y.z",
          subject: "s",
          text: "t",
          html: "<p>t</p>",
          kind: "verify_email",
        } as never),
    ],
    [
      "telco_a numbers",
      () =>
        telcoARequest(
          { apiUrl: redirector.url, accountSid: "AC1", authToken: "tok" },
          { method: "GET", path: "/IncomingPhoneNumbers.json" },
          { timeoutMs: 2_000 },
        ),
    ],
    [
      "payment gateway",
      () =>
        postToGateway({
          gateway: "gw_card",
          url: `${redirector.url}/checkout`,
          headers: {},
          body: "{}",
          timeoutMs: 2_000,
          fetch,
          secrets: [],
        }),
    ],
  ]
  for (const [what, run] of cases)
    it(`${what}: a 302 to http://127.0.0.1 is refused, not retried, and the target sees nothing`, async () => {
      const before = redirector.hits
      const e = await rejection(run())
      expect(e.message).toMatch(/HTTP 302 \(a redirect; provider calls do not follow redirects\)/)
      expect(e.retryable).toBe(false)
      expect(redirector.hits - before).toBe(1)
      expect(target.hits).toBe(0)
    })

  it("telco_a calls: a direct answer still creates the call (the control)", async () => {
    const telephony = makeTelcoATelephony({
      account: { sid: "AC1", token: "tok", apiUrl: target.url, callerId: null },
      publicBaseUrl: "http://127.0.0.1:9",
      channel: { register: () => () => {} },
      timeoutMs: 2_000,
    })
    const events: CarrierEvent[] = []
    const leg = telephony.dial({ callId: 3, to: "+14155550100", from: null, tenantId: 1 }, (e) => events.push(e))
    for (let i = 0; i < 100 && leg.providerCallId === ""; i++) await new Promise((r) => setTimeout(r, 10))
    expect(leg.providerCallId).toBe("CA1")
    expect(events).toEqual([])
    target.hits = 0
  })

  it("telco_a calls: a redirected call creation fails the leg without reaching the target", async () => {
    const events: CarrierEvent[] = []
    const telephony = makeTelcoATelephony({
      account: { sid: "AC1", token: "tok", apiUrl: redirector.url, callerId: null },
      publicBaseUrl: "http://127.0.0.1:9",
      channel: { register: () => () => {} },
      timeoutMs: 2_000,
    })
    const before = redirector.hits
    await new Promise<void>((resolve) =>
      telephony.dial(
        { callId: 1, to: "+14155550100", from: null, tenantId: 1 },
        (e) => (events.push(e), e.type === "FAILED" && resolve()),
      ),
    )
    expect(events.at(-1)?.type).toBe("FAILED")
    expect(redirector.hits - before).toBe(1)
    expect(target.hits).toBe(0)
  })
})

describe("answers are capped", () => {
  let huge: Fake
  let declared: Fake
  beforeAll(async () => {
    huge = await fake((_req, res, self) => void stream(res, self, 100 * MiB))
    declared = await fake((_req, res, self) => void stream(res, self, 100 * MiB, { "content-length": 100 * MiB }))
  })
  afterAll(async () => {
    await huge.close()
    await declared.close()
  })

  it("cuts a 100 MiB answer at the cap, once, without the process holding it", async () => {
    const rssBefore = process.memoryUsage().rss
    const e = await rejection(
      generateRuleBook(makeOpenAiLlm({ baseUrl: huge.url, model: "m", timeoutMs: 10_000 }), ruleBookRequest),
    )
    const grown = process.memoryUsage().rss - rssBefore
    expect(e.message).toMatch(/answer larger than 2097152 bytes/)
    expect(e.retryable).toBe(false)
    expect(huge.hits).toBe(1)
    // The server stopped when we hung up: far less than 100 MiB left it (socket buffers aside).
    await new Promise((r) => setTimeout(r, 50))
    expect(huge.sent).toBeLessThan(32 * MiB)
    expect(grown).toBeLessThan(40 * MiB)
  })

  it("refuses a declared Content-Length over the cap before reading", async () => {
    const e = await rejection(
      telcoARequest(
        { apiUrl: declared.url, accountSid: "AC1", authToken: "tok" },
        { method: "GET", path: "/x.json" },
        { timeoutMs: 5_000 },
      ),
    )
    expect(e.message).toMatch(/answer larger than 2097152 bytes/)
    expect(declared.hits).toBe(1)
  })

  it("applies the configured cap in every adapter", async () => {
    const small = { responseLimitBytes: 1024 }
    const before = huge.hits
    for (const run of [
      () =>
        makeHttpMail({ baseUrl: huge.url, apiKey: "k", from: "a@b.c", timeoutMs: 5_000, outbound: small }).send({
          to: "x@y.z",
          subject: "s",
          text: "t",
          html: "t",
          kind: "verify_email",
        } as never),
      () =>
        telcoARequest(
          { apiUrl: huge.url, accountSid: "AC1", authToken: "tok" },
          { method: "GET", path: "/x.json" },
          { timeoutMs: 5_000, outbound: small },
        ),
      () =>
        generateRuleBook(
          makeOpenAiLlm({ baseUrl: huge.url, model: "m", timeoutMs: 5_000, outbound: small }),
          ruleBookRequest,
        ),
      // The gateways' cap is the default 2 MiB.
      () =>
        postToGateway({
          gateway: "gw_upi",
          url: huge.url,
          headers: {},
          body: "{}",
          timeoutMs: 5_000,
          fetch,
          secrets: [],
        }),
    ]) {
      const e = await rejection(run())
      expect(e.message).toMatch(/answer larger than (1024|2097152) bytes/)
      expect(e.retryable).toBe(false)
    }
    expect(huge.hits - before).toBe(4)
  })

  it("readBounded returns an answer within the cap whole", async () => {
    const text = JSON.stringify({ ok: "é".repeat(100) })
    expect(await readBounded(new Response(text), Buffer.byteLength(text))).toBe(text)
    await expect(readBounded(new Response(text), Buffer.byteLength(text) - 1)).rejects.toThrow(/answer larger than/)
  })
})

describe("the per-attempt timeout covers the body", () => {
  let drip: Fake
  beforeAll(async () => {
    // Headers at once, then one byte every 100 ms, for up to a minute.
    drip = await fake((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.write("{")
      const timer = setInterval(() => res.write(" "), 100)
      const stop = setTimeout(() => (clearInterval(timer), res.end("}")), 60_000)
      res.on("close", () => (clearInterval(timer), clearTimeout(stop)))
    })
  })
  afterAll(() => drip.close())

  it("a slow-drip answer times out (and is retried) in the model, telco_a and mail adapters", async () => {
    for (const run of [
      () => generateRuleBook(makeOpenAiLlm({ baseUrl: drip.url, model: "m", timeoutMs: 300 }), ruleBookRequest),
      () =>
        telcoARequest(
          { apiUrl: drip.url, accountSid: "AC1", authToken: "tok" },
          { method: "GET", path: "/x.json" },
          { timeoutMs: 300 },
        ),
      () =>
        makeHttpMail({ baseUrl: drip.url, apiKey: "k", from: "a@b.c", timeoutMs: 300 }).send({
          to: "x@y.z",
          subject: "s",
          text: "t",
          html: "t",
          kind: "verify_email",
        } as never),
    ]) {
      const before = drip.hits
      const started = Date.now()
      const e = await rejection(run())
      expect(e.message).toMatch(/no answer within 300 ms \(gave up after 3 attempts\)/)
      expect(drip.hits - before).toBe(3)
      expect(Date.now() - started).toBeLessThan(5_000)
    }
  })

  it("telco_a calls: a slow-drip answer to call creation times out and is retried, then the leg fails", async () => {
    const telephony = makeTelcoATelephony({
      account: { sid: "AC1", token: "tok", apiUrl: drip.url, callerId: null },
      publicBaseUrl: "http://127.0.0.1:9",
      channel: { register: () => () => {} },
      timeoutMs: 300,
    })
    const before = drip.hits
    const ended = await new Promise<CarrierEvent>((resolve) =>
      telephony.dial(
        { callId: 2, to: "+14155550100", from: null, tenantId: 1 },
        (e) => e.type === "FAILED" && resolve(e),
      ),
    )
    expect(ended.type).toBe("FAILED")
    expect(drip.hits - before).toBe(3)
  })
})
