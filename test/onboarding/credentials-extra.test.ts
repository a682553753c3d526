// The spec's extra on PUT /onboarding/credentials/{provider} is a free object (issue 32): keys the
// provider uses are checked as before, other keys are stored encrypted and answered by name only
// (ignored_extra), never by value; too many, badly named or too large ones are still a 422.
import { randomBytes } from "node:crypto"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { activeCredential, makeCredentialCrypto } from "../../src/onboarding/Credentials.js"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any>

const MASTER_KEY = randomBytes(32).toString("base64")
const crypto = makeCredentialCrypto(MASTER_KEY)
let srv: TestServer
let fake: Server
let fakeUrl: string

beforeAll(async () => {
  // A provider that accepts every key: every GET (/v1/models, /v1/account, /v1/projects, /v1/user) answers 200.
  fake = createServer((req, res) => {
    req.resume()
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end('{"data":[]}')
    })
  })
  await new Promise<void>((r) => fake.listen(0, "127.0.0.1", r))
  fakeUrl = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`
  srv = await startTestServer({ env: { CREDENTIALS_MASTER_KEY: MASTER_KEY, ALLOW_PRIVATE_PROVIDER_URLS: "true" } })
})
afterAll(async () => {
  await srv?.stop()
  await new Promise((r) => fake?.close(r))
})

const put = async (token: string, provider: string, body: unknown) => {
  const res = await api(srv).call("PUT", `/onboarding/credentials/${provider}`, { token, body })
  const text = await res.text()
  return { status: res.status, text, body: JSON.parse(text) as Json }
}

async function byokWorkspace(): Promise<Session> {
  const s = await api(srv).signup()
  expect((await api(srv).call("PUT", "/onboarding/mode", { token: s.token, body: { mode: "byok" } })).status).toBe(200)
  return s
}

const rowOf = async (tenantId: number, provider: string) =>
  (
    await srv.sql<Array<{ extra: Json; secret_enc: string; ignored_extra_enc: string | null }>>`
      select extra, secret_enc, ignored_extra_enc from provider_credentials
      where tenant_id = ${tenantId} and provider = ${provider}`
  )[0]

const key = () => `sk-${randomBytes(12).toString("hex")}`

describe("extra keys a provider does not use", () => {
  it("are stored encrypted and reported by name, beside the provider's own fields, checked as before", async () => {
    const s = await byokWorkspace()
    const secret = key()
    const r = await put(s.token, "llm", {
      secret,
      extra: { base_url: `${fakeUrl}/v1`, model: "gpt-4o-mini", region: "eu-west-1" },
    })
    expect(r.status).toBe(200)
    expect(r.body).toMatchObject({
      saved: true,
      validated: true,
      ignored_extra: ["region"],
      credential: { provider: "llm", status: "validated", extra: { base_url: `${fakeUrl}/v1`, model: "gpt-4o-mini" } },
    })
    expect(r.body.credential.extra).not.toHaveProperty("region")
    expect(r.text).not.toContain("eu-west-1")
    expect(r.text).not.toContain(secret)

    const row = (await rowOf(s.tenantId, "llm"))!
    expect(row.extra).toEqual({ base_url: `${fakeUrl}/v1`, model: "gpt-4o-mini" })
    expect(row.ignored_extra_enc).toMatch(/^v1:/)
    expect(row.ignored_extra_enc).not.toContain("eu-west-1")
    expect(
      JSON.parse(crypto.decrypt(row.ignored_extra_enc!, { tenantId: s.tenantId, provider: "llm/ignored_extra" })),
    ).toEqual({ region: "eu-west-1" })
    // Bound to its own purpose: it is not the secret's envelope, nor another workspace's.
    expect(() => crypto.decrypt(row.ignored_extra_enc!, { tenantId: s.tenantId, provider: "llm" })).toThrow()
    expect(() =>
      crypto.decrypt(row.ignored_extra_enc!, { tenantId: s.tenantId + 1, provider: "llm/ignored_extra" }),
    ).toThrow()
    // What the runtime gets is the provider's fields only.
    const active = await activeCredential(srv.sql, crypto, s.tenantId, "llm")
    expect(active).toMatchObject({ secret, extra: { base_url: `${fakeUrl}/v1`, model: "gpt-4o-mini" } })
    expect(active!.extra).not.toHaveProperty("region")

    // A provider's own field is still checked while other keys ride along: 422, nothing replaced.
    const bad = await put(s.token, "llm", { secret: key(), extra: { model: "has spaces", region: "us-east-1" } })
    expect(bad).toMatchObject({ status: 422, body: { code: "VALIDATION_FAILED", field: "extra.model" } })
    expect((await rowOf(s.tenantId, "llm"))!.secret_enc).toBe(row.secret_enc)

    // A save without them forgets them.
    const plain = await put(s.token, "llm", { secret, extra: { base_url: `${fakeUrl}/v1` } })
    expect(plain).toMatchObject({ status: 200, body: { ignored_extra: [] } })
    expect((await rowOf(s.tenantId, "llm"))!.ignored_extra_enc).toBeNull()
  })

  it("never answers a value back, whatever it holds", async () => {
    const s = await byokWorkspace()
    const hidden = `whsec_${randomBytes(16).toString("hex")}`
    const nested = `nested-${randomBytes(8).toString("hex")}`
    const r = await put(s.token, "stt", {
      secret: key(),
      extra: { api_base_url: fakeUrl, webhook_secret: hidden, "account.options": { token: nested, retries: 3 } },
    })
    expect(r.status).toBe(200)
    expect(r.body.ignored_extra).toEqual(["webhook_secret", "account.options"])
    expect(r.body.credential.extra).toEqual({ api_base_url: fakeUrl })
    expect(r.text).not.toContain(hidden)
    expect(r.text).not.toContain(nested)
    const status = await api(srv).call("GET", "/onboarding/status", { token: s.token })
    const statusText = await status.text()
    expect(statusText).not.toContain(hidden)
    expect(statusText).not.toContain(nested)
    const row = (await rowOf(s.tenantId, "stt"))!
    expect(JSON.stringify(row)).not.toContain(hidden)
    expect(
      JSON.parse(crypto.decrypt(row.ignored_extra_enc!, { tenantId: s.tenantId, provider: "stt/ignored_extra" })),
    ).toEqual({ webhook_secret: hidden, "account.options": { token: nested, retries: 3 } })
  })

  it("are bounded: too many, badly named or too large is 422 on extra, and nothing is stored", async () => {
    const s = await byokWorkspace()
    const many = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, "v"]))
    const secretValue = `value-${randomBytes(8).toString("hex")}`
    const cases: Array<[string, Json]> = [
      ["17 keys", many(17)],
      ["10,000 keys", many(10_000)],
      ["a value over 4 KiB", { notes: "x".repeat(4100) }],
      ["4 KiB over several keys", { a: "x".repeat(1500), b: "y".repeat(1500), c: "z".repeat(1500) }],
      ["a deep object", { blob: { items: Array.from({ length: 2000 }, (_, i) => i) } }],
      ["a name with a space", { "bad key": secretValue }],
      ["an empty name", { "": secretValue }],
      ["a name of 65 characters", { ["n".repeat(65)]: secretValue }],
    ]
    for (const [what, extra] of cases) {
      const r = await put(s.token, "stt", { secret: key(), extra: { api_base_url: fakeUrl, ...extra } })
      expect(r, what).toMatchObject({ status: 422, body: { code: "VALIDATION_FAILED", field: "extra" } })
      expect(r.text, what).not.toContain(secretValue)
    }
    expect(await rowOf(s.tenantId, "stt")).toBeUndefined()

    // At the bounds it is accepted: 16 keys, 64-character names, 4096 bytes as JSON.
    const sixteen = await put(s.token, "stt", { secret: key(), extra: many(16) })
    expect(sixteen).toMatchObject({ status: 200, body: { saved: true } })
    expect(sixteen.body.ignored_extra).toHaveLength(16)
    const name = "n".repeat(64)
    // {"<64>":"<v>"} is 64 + 7 bytes of JSON around the value.
    const full = await put(s.token, "stt", { secret: key(), extra: { [name]: "v".repeat(4096 - 71) } })
    expect(full).toMatchObject({ status: 200, body: { ignored_extra: [name] } })
  })
})
