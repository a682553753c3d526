// The spec's optional primary_id on PUT /onboarding/credentials/{provider}: accepted and stored for
// every provider (not 422); for the language model it is the organisation id, sent as the
// OpenAI-Organization header on the validation probe and on every model call; elsewhere ignored.
import { randomBytes } from "node:crypto"
import { createServer, type IncomingHttpHeaders, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { loadConfig } from "../../src/platform/config.js"
import { ownLlmOf } from "../../src/providers/accounts.js"
import { api } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any>

let srv: TestServer
let fake: Server
let fakeUrl: string
const seen: Array<{ url: string; headers: IncomingHttpHeaders }> = []

beforeAll(async () => {
  // Answers /models (validation) with 200 and anything else (a model call) with 400.
  fake = createServer((req, res) => {
    seen.push({ url: req.url ?? "", headers: req.headers })
    req.resume()
    req.on("end", () => {
      const ok = req.url?.endsWith("/models")
      res.writeHead(ok ? 200 : 400, { "content-type": "application/json" })
      res.end(ok ? '{"data":[]}' : '{"error":{"message":"no"}}')
    })
  })
  await new Promise<void>((r) => fake.listen(0, "127.0.0.1", r))
  fakeUrl = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`
  srv = await startTestServer({
    env: { CREDENTIALS_MASTER_KEY: randomBytes(32).toString("base64"), ALLOW_PRIVATE_PROVIDER_URLS: "true" },
  })
})
afterAll(async () => {
  await srv?.stop()
  await new Promise((r) => fake?.close(r))
})

const put = async (token: string, provider: string, body: unknown) => {
  const res = await api(srv).call("PUT", `/onboarding/credentials/${provider}`, { token, body })
  return { status: res.status, body: (await res.json()) as Json }
}

describe("primary_id on provider credentials", () => {
  it("is accepted and stored for every provider", async () => {
    const s = await api(srv).signup()
    expect((await api(srv).call("PUT", "/onboarding/mode", { token: s.token, body: { mode: "byok" } })).status).toBe(
      200,
    )
    const key = `sk-${randomBytes(12).toString("hex")}`
    const cases: Array<[string, Json]> = [
      ["llm", { primary_id: "org-parley42", secret: key }],
      ["tts", { primary_id: "acct-tts-1", secret: key }],
      ["stt", { primary_id: "acct-stt-1", secret: key }],
      ["telco_b", { primary_id: "acct-4711", secret: key }],
      ["telco_a", { primary_id: `AC${randomBytes(16).toString("hex")}`, secret: randomBytes(16).toString("hex") }],
    ]
    for (const [provider, body] of cases) {
      const r = await put(s.token, provider, body)
      expect(r.status, provider).toBe(200)
      expect(r.body.credential, provider).toMatchObject({ provider, primary_id: body.primary_id })
      const [row] = await srv.sql<
        [{ primary_id: string }]
      >`select primary_id from provider_credentials where tenant_id = ${s.tenantId} and provider = ${provider}`
      expect(row.primary_id, provider).toBe(body.primary_id)
    }
    // Still optional, and still checked where it reaches a header or a provider's URL.
    expect((await put(s.token, "stt", { secret: key })).body.credential.primary_id).toBeNull()
    expect(await put(s.token, "llm", { primary_id: "org\u0007bell", secret: key })).toMatchObject({
      status: 422,
      body: { code: "VALIDATION_FAILED", field: "primary_id" },
    })
    expect(
      await put(s.token, "telco_a", { primary_id: "AC123", secret: randomBytes(16).toString("hex") }),
    ).toMatchObject({ status: 422, body: { field: "primary_id" } })
  })

  it("is the language model's organisation: sent as OpenAI-Organization when validating and calling", async () => {
    const s = await api(srv).signup()
    await api(srv).call("PUT", "/onboarding/mode", { token: s.token, body: { mode: "byok" } })
    const key = `sk-${randomBytes(12).toString("hex")}`
    seen.length = 0
    const r = await put(s.token, "llm", { primary_id: "org-acme", secret: key, extra: { base_url: `${fakeUrl}/v1` } })
    expect(r.body).toMatchObject({ saved: true, validated: true })
    expect(seen.at(-1)).toMatchObject({
      url: "/v1/models",
      headers: { "openai-organization": "org-acme", authorization: `Bearer ${key}` },
    })
    // Without one, no header.
    seen.length = 0
    await put(s.token, "llm", { secret: key, extra: { base_url: `${fakeUrl}/v1` } })
    expect(seen.at(-1)!.headers["openai-organization"]).toBeUndefined()

    // The workspace's own model (what runs and the chat agent use) sends it on each call.
    const config = loadConfig({ ALLOW_PRIVATE_PROVIDER_URLS: "true", LLM_TIMEOUT_MS: "2000" })
    const llm = ownLlmOf({ primaryId: "org-acme", secret: key, extra: { base_url: `${fakeUrl}/v1` } }, config)
    seen.length = 0
    await llm
      .generateJson({
        messages: [{ role: "user", content: "hello" }],
        format: { name: "x", schema: { type: "object", properties: {} } },
      })
      .catch(() => undefined)
    expect(seen.length).toBeGreaterThan(0)
    expect(seen[0]).toMatchObject({ url: "/v1/chat/completions", headers: { "openai-organization": "org-acme" } })
  })
})
