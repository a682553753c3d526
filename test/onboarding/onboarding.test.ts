// Onboarding through the real server: the catalogue, every row of the spec's onboarding table,
// live validation against a local fake provider (telco_a account endpoint, OpenAI-style /models,
// /v1/account, the speech vendors' /v1/projects and /v1/user), encryption at rest, 503 without a master key,
// scopes, tenant isolation, and the secret never showing in a response, a database row or a log line.
import { randomBytes } from "node:crypto"
import { createServer, type IncomingMessage, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  activeCredential,
  Credentials,
  CredentialsLive,
  makeCredentialCrypto,
} from "../../src/onboarding/Credentials.js"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

const MASTER_KEY = randomBytes(32).toString("base64")
const crypto = makeCredentialCrypto(MASTER_KEY)

const hex = (bytes: number) => randomBytes(bytes).toString("hex")
const SID = `AC${hex(16)}`
const FLAKY_SID = `AC${hex(16)}`
const TOKEN = hex(16)
const BAD_TOKEN = hex(16)
const LLM_KEY = `sk-good-${hex(12)}`
const BAD_LLM_KEY = `sk-bad-${hex(12)}`
const SPEECH_KEY = `spk_${hex(12)}`
const SIM_KEY = `sim-${hex(12)}`
const SECRETS = [TOKEN, BAD_TOKEN, LLM_KEY, BAD_LLM_KEY, SPEECH_KEY, SIM_KEY]

// ---------------------------------------------------------------------------------------------
// A fake provider: telco_a's account endpoint (Basic sid:token), an OpenAI-compatible /models and
// a /v1/account (bearer). Refusals echo the presented secret, as some real APIs do.

interface Seen {
  readonly path: string
  readonly authorization: string | undefined
}

interface FakeProvider {
  readonly url: string
  readonly seen: Seen[]
  close(): Promise<void>
}

async function startFakeProvider(): Promise<FakeProvider> {
  const seen: Seen[] = []
  const send = (
    res: import("node:http").ServerResponse,
    status: number,
    body: unknown,
    headers: Record<string, string> = {},
  ) => {
    res.writeHead(status, { "content-type": "application/json", ...headers })
    res.end(JSON.stringify(body))
  }
  const bearer = (req: IncomingMessage) => /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1]
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "").split("?")[0]!
    seen.push({ path, authorization: req.headers.authorization })
    const account = /^\/2010-04-01\/Accounts\/([^/]+)\.json$/.exec(path)
    if (account) {
      if (account[1] === FLAKY_SID) return send(res, 503, { message: "try later" })
      const [user, pass] = Buffer.from((req.headers.authorization ?? "").replace(/^Basic /, ""), "base64")
        .toString()
        .split(":")
      if (user === account[1] && pass === TOKEN) return send(res, 200, { sid: account[1], status: "active" })
      return send(res, 401, { code: 20003, message: `Authenticate: bad token ${pass}` })
    }
    if (path === "/v1/models") {
      if (bearer(req) === LLM_KEY) return send(res, 200, { object: "list", data: [{ id: "gpt-4o-mini" }] })
      return send(res, 401, {
        error: { message: `Incorrect API key provided: ${bearer(req)}`, code: "invalid_api_key" },
      })
    }
    if (path === "/v1/account") {
      if (bearer(req) === SPEECH_KEY) return send(res, 200, { id: "acct_1" })
      return send(res, 403, { error: `key ${bearer(req)} is not allowed` })
    }
    // The speech vendors' own account endpoints: Deepgram's (Authorization: Token) and ElevenLabs' (xi-api-key).
    if (path === "/v1/projects") {
      if (req.headers.authorization === `Token ${SPEECH_KEY}`) return send(res, 200, { projects: [] })
      return send(res, 403, { err_msg: `key ${req.headers.authorization} is not allowed` })
    }
    if (path === "/v1/user") {
      if (req.headers["xi-api-key"] === SPEECH_KEY) return send(res, 200, { user_id: "u_1" })
      return send(res, 401, { detail: { status: "invalid_api_key", message: `bad key ${req.headers["xi-api-key"]}` } })
    }
    if (path.startsWith("/redir/")) return send(res, 302, {}, { location: path.slice("/redir".length) })
    send(res, 404, { error: "not found" })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  }
}

// ---------------------------------------------------------------------------------------------

let srv: TestServer
let fake: FakeProvider
let a: ReturnType<typeof api>
/** Every response body any test received from the server. */
const bodies: string[] = []

beforeAll(async () => {
  fake = await startFakeProvider()
  // The fake providers listen on 127.0.0.1: a private address, refused unless allowed.
  srv = await startTestServer({ env: { CREDENTIALS_MASTER_KEY: MASTER_KEY, ALLOW_PRIVATE_PROVIDER_URLS: "true" } })
  a = api(srv)
})
afterAll(async () => {
  await srv?.stop()
  await fake?.close()
})

interface Res {
  readonly status: number
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly body: any
}

async function call(
  method: string,
  path: string,
  token: string | undefined,
  body?: unknown,
  server: TestServer = srv,
): Promise<Res> {
  const res = await api(server).call(method, path, {
    ...(token !== undefined && { token }),
    ...(body !== undefined && { body }),
  })
  const text = await res.text()
  bodies.push(text)
  return { status: res.status, body: text === "" ? undefined : JSON.parse(text) }
}

const status = (s: Session) => call("GET", "/onboarding/status", s.token)
const setMode = (s: Session, mode: string) => call("PUT", "/onboarding/mode", s.token, { mode })
const put = (token: string, provider: string, body: unknown) =>
  call("PUT", `/onboarding/credentials/${provider}`, token, body)

const verifyEmail = (s: Session) =>
  srv.sql`update users set email_verified = true, email_verified_at = now() where id = ${s.userId}`
const subscribeByok = (s: Session) => srv.sql`update tenants set plan_tier = 'byok' where id = ${s.tenantId}`

/** A byok tenant with every credential validated, the subscription active and the email verified. */
async function readyByokTenant(): Promise<Session> {
  const s = await a.signup()
  expect((await setMode(s, "byok")).status).toBe(200)
  expect(
    (await put(s.token, "llm", { secret: LLM_KEY, extra: { base_url: `${fake.url}/v1`, model: "gpt-4o-mini" } })).body
      .validated,
  ).toBe(true)
  expect(
    (
      await put(s.token, "telco_a", {
        primary_id: SID,
        secret: TOKEN,
        extra: { api_base_url: fake.url, caller_id: "+14155550100" },
      })
    ).body.validated,
  ).toBe(true)
  expect(
    (await put(s.token, "tts", { secret: SPEECH_KEY, extra: { api_base_url: fake.url, voice_map: { amelia: "v_1" } } }))
      .body.validated,
  ).toBe(true)
  expect((await put(s.token, "stt", { secret: SPEECH_KEY, extra: { api_base_url: fake.url } })).body.validated).toBe(
    true,
  )
  await subscribeByok(s)
  await verifyEmail(s)
  return s
}

const rowOf = async (tenantId: number, provider: string) =>
  (
    await srv.sql<
      Record<string, unknown>[]
    >`select * from provider_credentials where tenant_id = ${tenantId} and provider = ${provider}`
  )[0]

// ---------------------------------------------------------------------------------------------

describe("GET /onboarding/providers", () => {
  it("is public and lists the five providers with their credential field schemas", async () => {
    const r = await call("GET", "/onboarding/providers", undefined)
    expect(r.status).toBe(200)
    const providers = r.body.providers as Array<any>
    expect(providers.map((p) => p.id)).toEqual(["llm", "telco_a", "telco_b", "tts", "stt"])
    expect(new Set(providers.map((p) => p.kind))).toEqual(
      new Set(["language_model", "telephony", "speech_synthesis", "speech_recognition"]),
    )
    for (const p of providers) {
      expect(p).toMatchObject({
        name: expect.any(String),
        description: expect.any(String),
        validation: expect.any(String),
      })
      expect(["required", "one_of_kind"]).toContain(p.byok_requirement)
      const secrets = p.fields.filter((f: any) => f.secret)
      expect(
        secrets.map((f: any) => f.name),
        p.id,
      ).toEqual(["secret"])
      for (const f of p.fields) {
        expect(f).toMatchObject({
          name: expect.stringMatching(/^(primary_id|secret|extra\.[a-z_]+)$/),
          label: expect.any(String),
          required: expect.any(Boolean),
          secret: expect.any(Boolean),
        })
        if (f.pattern !== undefined) expect(() => new RegExp(f.pattern)).not.toThrow()
      }
    }
    const telcoA = providers.find((p) => p.id === "telco_a")
    const sid = telcoA.fields.find((f: any) => f.name === "primary_id")
    expect(sid).toMatchObject({ required: true, secret: false })
    expect(new RegExp(sid.pattern).test(SID)).toBe(true)
    expect(new RegExp(sid.pattern).test("AC123")).toBe(false)
    expect(new RegExp(telcoA.fields.find((f: any) => f.name === "secret").pattern).test(TOKEN)).toBe(true)
    expect(telcoA.fields.map((f: any) => f.name)).toEqual([
      "primary_id",
      "secret",
      "extra.api_base_url",
      "extra.caller_id",
    ])
    expect(providers.find((p) => p.id === "llm").fields.map((f: any) => f.name)).toEqual([
      "secret",
      "extra.base_url",
      "extra.model",
      "primary_id",
    ])
    expect(providers.find((p) => p.id === "tts").fields.map((f: any) => f.name)).toContain("extra.voice_map")
    expect((await call("GET", "/v1/onboarding/providers", undefined)).status).toBe(200)
  })
})

describe("authentication and scopes", () => {
  it("needs a caller; read keys read, write keys save, only admin deletes", async () => {
    expect((await call("GET", "/onboarding/status", undefined)).status).toBe(401)
    expect((await call("PUT", "/onboarding/mode", undefined, { mode: "byok" })).status).toBe(401)
    expect((await call("POST", "/onboarding/complete", undefined)).status).toBe(401)
    expect((await call("DELETE", "/onboarding/credentials/llm", undefined)).status).toBe(401)
    const s = await a.signup()
    const read = (await a.createKey(s, { name: "r", scope: "read" })).secret
    const write = (await a.createKey(s, { name: "w", scope: "write" })).secret
    const admin = (await a.createKey(s, { name: "a", scope: "admin" })).secret
    expect((await call("GET", "/onboarding/status", read)).status).toBe(200)
    expect((await call("PUT", "/onboarding/mode", read, { mode: "byok" })).body.code).toBe("INSUFFICIENT_SCOPE")
    expect((await call("PUT", "/onboarding/mode", write, { mode: "byok" })).status).toBe(200)
    expect((await put(write, "llm", { secret: SIM_KEY })).status).toBe(200)
    const denied = await call("DELETE", "/onboarding/credentials/llm", write)
    expect(denied).toMatchObject({ status: 403, body: { code: "INSUFFICIENT_SCOPE" } })
    expect(await rowOf(s.tenantId, "llm")).toBeDefined()
    expect(await call("DELETE", "/onboarding/credentials/llm", admin)).toMatchObject({
      status: 200,
      body: { deleted: true, provider: "llm" },
    })
    expect(await rowOf(s.tenantId, "llm")).toBeUndefined()
  })

  it("rejects a bad mode with 422", async () => {
    const s = await a.signup()
    expect(await setMode(s, "enterprise")).toMatchObject({
      status: 422,
      body: { code: "VALIDATION_FAILED", field: "mode" },
    })
    expect((await call("PUT", "/onboarding/mode", s.token, {})).status).toBe(422)
  })
})

describe("state table: PUT mode", () => {
  it("switches mode; saved credentials stay but are dormant in bundled mode, and active again in byok", async () => {
    const s = await a.signup()
    const fresh = await status(s)
    expect(fresh.status).toBe(200)
    expect(fresh.body).toMatchObject({ mode: "bundled", completed: false, completed_at: null })
    expect(fresh.body.providers.map((p: any) => p.provider)).toEqual(["llm", "telco_a", "telco_b", "tts", "stt"])
    for (const p of fresh.body.providers)
      expect(p).toMatchObject({ configured: false, status: "not_configured", hint: null, dormant: false })

    const byok = await setMode(s, "byok")
    expect(byok).toMatchObject({ status: 200, body: { mode: "byok", completed: false } })
    expect(
      await put(s.token, "telco_a", { primary_id: SID, secret: TOKEN, extra: { api_base_url: fake.url } }),
    ).toMatchObject({ status: 200, body: { validated: true } })
    expect(await activeCredential(srv.sql, crypto, s.tenantId, "telco_a")).toEqual({
      provider: "telco_a",
      primaryId: SID,
      secret: TOKEN,
      extra: { api_base_url: fake.url },
    })

    const bundled = await setMode(s, "bundled")
    expect(bundled.body.mode).toBe("bundled")
    const dormant = bundled.body.providers.find((p: any) => p.provider === "telco_a")
    expect(dormant).toMatchObject({
      configured: true,
      status: "validated",
      dormant: true,
      hint: `****${TOKEN.slice(-4)}`,
      primary_id: SID,
    })
    expect(await rowOf(s.tenantId, "telco_a")).toMatchObject({ status: "validated" })
    expect(await activeCredential(srv.sql, crypto, s.tenantId, "telco_a")).toBeUndefined()

    const back = await setMode(s, "byok")
    expect(back.body.providers.find((p: any) => p.provider === "telco_a")).toMatchObject({
      status: "validated",
      dormant: false,
    })
    expect((await activeCredential(srv.sql, crypto, s.tenantId, "telco_a"))?.secret).toBe(TOKEN)
  })

  it("resets completion when the mode changes, not when the same mode is set again", async () => {
    const s = await a.signup()
    await verifyEmail(s)
    expect((await call("POST", "/onboarding/complete", s.token)).body).toMatchObject({
      mode: "bundled",
      completed: true,
    })
    expect((await setMode(s, "bundled")).body.completed).toBe(true)
    expect((await setMode(s, "byok")).body).toMatchObject({ mode: "byok", completed: false, completed_at: null })
    expect((await setMode(s, "bundled")).body.completed).toBe(false)
  })
})

describe("state table: PUT credentials", () => {
  it("is refused while the tenant is in bundled mode (switch to byok first)", async () => {
    const s = await a.signup()
    const r = await put(s.token, "telco_a", { primary_id: SID, secret: TOKEN })
    expect(r).toMatchObject({ status: 409, body: { code: "MODE_IS_BUNDLED" } })
    expect(await rowOf(s.tenantId, "telco_a")).toBeUndefined()
  })

  it("stores a credential live validation rejects, with status failed and the reason", async () => {
    const s = await a.signup()
    await setMode(s, "byok")
    const before = fake.seen.length
    const r = await put(s.token, "telco_a", { primary_id: SID, secret: BAD_TOKEN, extra: { api_base_url: fake.url } })
    expect(r.status).toBe(200)
    expect(r.body).toMatchObject({
      saved: true,
      validated: false,
      credential: {
        provider: "telco_a",
        status: "failed",
        primary_id: SID,
        hint: `****${BAD_TOKEN.slice(-4)}`,
        validated_at: null,
      },
    })
    expect(r.body.error).toMatch(/rejected the credentials \(HTTP 401\)/)
    // The refusal was not retried.
    expect(fake.seen.slice(before).map((x) => x.path)).toEqual([`/2010-04-01/Accounts/${SID}.json`])
    const row = await rowOf(s.tenantId, "telco_a")
    expect(row).toMatchObject({ status: "failed", validation_method: "live", validated_at: null })
    expect(row!["validation_error"]).toMatch(/401/)
    const st = await status(s)
    expect(st.body.providers.find((p: any) => p.provider === "telco_a")).toMatchObject({
      status: "failed",
      error: expect.stringMatching(/401/),
    })
    expect(st.body.checklist.find((c: any) => c.item === "telephony_credential")).toMatchObject({
      done: false,
      detail: expect.stringMatching(/failed validation/),
    })
    expect(await activeCredential(srv.sql, crypto, s.tenantId, "telco_a")).toBeUndefined()
  })

  it("validates telco_a against the account endpoint with HTTP Basic sid:token", async () => {
    const s = await a.signup()
    await setMode(s, "byok")
    const before = fake.seen.length
    const r = await put(s.token, "telco_a", {
      primary_id: SID,
      secret: TOKEN,
      extra: { api_base_url: `${fake.url}/`, caller_id: "+14155550100" },
    })
    expect(r.body).toMatchObject({
      saved: true,
      validated: true,
      credential: {
        status: "validated",
        validation_method: "live",
        extra: { api_base_url: fake.url, caller_id: "+14155550100" },
      },
    })
    expect(r.body).not.toHaveProperty("error")
    expect(new Date(r.body.credential.validated_at).getTime()).toBeGreaterThan(Date.now() - 60_000)
    expect(fake.seen.slice(before)).toEqual([
      {
        path: `/2010-04-01/Accounts/${SID}.json`,
        authorization: `Basic ${Buffer.from(`${SID}:${TOKEN}`).toString("base64")}`,
      },
    ])
  })

  it("validates the language model with GET {base_url}/models and a bearer key", async () => {
    const s = await a.signup()
    await setMode(s, "byok")
    const bad = await put(s.token, "llm", { secret: BAD_LLM_KEY, extra: { base_url: `${fake.url}/v1` } })
    expect(bad.body).toMatchObject({ validated: false, credential: { status: "failed" } })
    const before = fake.seen.length
    const good = await put(s.token, "llm", {
      secret: LLM_KEY,
      extra: { base_url: `${fake.url}/v1`, model: "gpt-4o-mini" },
    })
    expect(good.body).toMatchObject({
      validated: true,
      credential: { status: "validated", extra: { base_url: `${fake.url}/v1`, model: "gpt-4o-mini" } },
    })
    expect(fake.seen.slice(before)).toEqual([{ path: "/v1/models", authorization: `Bearer ${LLM_KEY}` }])
  })

  it("validates telco_b at GET {api_base_url}/v1/account, tts and stt at their vendors' own endpoints", async () => {
    const s = await a.signup()
    await setMode(s, "byok")
    expect(
      (await put(s.token, "telco_b", { primary_id: "acct_123", secret: SPEECH_KEY, extra: { api_base_url: fake.url } }))
        .body.credential.status,
    ).toBe("validated")
    expect(
      (
        await put(s.token, "tts", {
          secret: SPEECH_KEY,
          extra: { api_base_url: fake.url, voice_map: { amelia: "v_1", rohan: "v_2" } },
        })
      ).body.credential,
    ).toMatchObject({
      status: "validated",
      extra: { voice_map: { amelia: "v_1", rohan: "v_2" } },
    })
    const stt = await put(s.token, "stt", { secret: BAD_LLM_KEY, extra: { api_base_url: fake.url } })
    expect(stt.body).toMatchObject({ validated: false, credential: { status: "failed" } })
    expect(stt.body.error).toMatch(/HTTP 403/)
    expect(stt.body.error).not.toContain(BAD_LLM_KEY)
    const goodStt = await put(s.token, "stt", { secret: SPEECH_KEY, extra: { api_base_url: fake.url } })
    expect(goodStt.body.credential.status).toBe("validated")
    const badTts = await put(s.token, "tts", { secret: BAD_LLM_KEY, extra: { api_base_url: fake.url } })
    expect(badTts.body).toMatchObject({ validated: false, credential: { status: "failed" } })
    expect(badTts.body.error).toMatch(/HTTP 401/)
    expect(badTts.body.error).not.toContain(BAD_LLM_KEY)
    // Each asked the vendor's own endpoint, the key as that vendor takes it.
    expect(fake.seen.map((x) => x.path)).toEqual(expect.arrayContaining(["/v1/projects", "/v1/user"]))
  })

  it("validates only the format when there is no endpoint to call (the simulators)", async () => {
    const s = await a.signup()
    await setMode(s, "byok")
    const before = fake.seen.length
    for (const [provider, body] of [
      ["llm", { secret: SIM_KEY }],
      ["telco_a", { primary_id: SID, secret: BAD_TOKEN }],
      ["telco_b", { primary_id: "acct_1", secret: SIM_KEY }],
      ["tts", { secret: SIM_KEY }],
      ["stt", { secret: SIM_KEY }],
    ] as const) {
      const r = await put(s.token, provider, body)
      expect(r.body, provider).toMatchObject({
        saved: true,
        validated: true,
        credential: { status: "validated", validation_method: "format" },
      })
    }
    expect(fake.seen.length).toBe(before)
  })

  it("stores a credential the provider could not judge as unvalidated, after exactly one retry", async () => {
    const s = await a.signup()
    await setMode(s, "byok")
    const before = fake.seen.length
    const r = await put(s.token, "telco_a", { primary_id: FLAKY_SID, secret: TOKEN, extra: { api_base_url: fake.url } })
    expect(r.body).toMatchObject({ saved: true, validated: false, credential: { status: "unvalidated" } })
    expect(r.body.error).toMatch(/HTTP 503/)
    expect(fake.seen.slice(before).map((x) => x.path)).toEqual([
      `/2010-04-01/Accounts/${FLAKY_SID}.json`,
      `/2010-04-01/Accounts/${FLAKY_SID}.json`,
    ])
    // Unreachable: a closed port.
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve))
    const port = (closed.address() as AddressInfo).port
    await new Promise((resolve) => closed.close(resolve))
    const down = await put(s.token, "stt", { secret: SPEECH_KEY, extra: { api_base_url: `http://127.0.0.1:${port}` } })
    expect(down.body).toMatchObject({ validated: false, credential: { status: "unvalidated" } })
    expect(down.body.error).toMatch(/unreachable/)
    // A redirect is not followed (it would carry the key elsewhere) and is no verdict.
    const redirected = await put(s.token, "tts", { secret: SPEECH_KEY, extra: { api_base_url: `${fake.url}/redir` } })
    expect(redirected.body).toMatchObject({ validated: false, credential: { status: "unvalidated" } })
    expect(redirected.body.error).toMatch(/HTTP 302/)
  })

  it("replaces on a second save: re-encrypted with a fresh nonce, created_at kept", async () => {
    const s = await a.signup()
    await setMode(s, "byok")
    await put(s.token, "telco_a", { primary_id: SID, secret: BAD_TOKEN, extra: { api_base_url: fake.url } })
    const first = (await rowOf(s.tenantId, "telco_a"))!
    const again = await put(s.token, "telco_a", { primary_id: SID, secret: TOKEN, extra: { api_base_url: fake.url } })
    expect(again.body.credential.status).toBe("validated")
    const second = (await rowOf(s.tenantId, "telco_a"))!
    expect(second["id"]).toBe(first["id"])
    expect(second["created_at"]).toEqual(first["created_at"])
    expect(second["secret_enc"]).not.toBe(first["secret_enc"])
    expect(second).toMatchObject({ status: "validated", validation_error: null })
    // The same secret saved twice still gets a new nonce.
    await put(s.token, "telco_a", { primary_id: SID, secret: TOKEN, extra: { api_base_url: fake.url } })
    const third = (await rowOf(s.tenantId, "telco_a"))!
    expect(third["secret_enc"]).not.toBe(second["secret_enc"])
    expect(crypto.decrypt(third["secret_enc"] as string, { tenantId: s.tenantId, provider: "telco_a" })).toBe(TOKEN)
    expect(
      (await srv.sql`select count(*)::int as n from provider_credentials where tenant_id = ${s.tenantId}`)[0]!["n"],
    ).toBe(1)
  })

  it("checks fields against the catalogue (422), unknown providers are 404", async () => {
    const s = await a.signup()
    await setMode(s, "byok")
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ["telco_a", { secret: TOKEN }, "primary_id"],
      ["telco_a", { primary_id: "AC123", secret: TOKEN }, "primary_id"],
      ["telco_a", { primary_id: SID, secret: `${TOKEN}zz` }, "secret"],
      ["telco_a", { primary_id: SID, secret: TOKEN, extra: { caller_id: "4155550100" } }, "extra.caller_id"],
      [
        "telco_a",
        { primary_id: SID, secret: TOKEN, extra: { api_base_url: "ftp://example.com" } },
        "extra.api_base_url",
      ],
      [
        "telco_a",
        { primary_id: SID, secret: TOKEN, extra: { api_base_url: `http://user:${TOKEN}@example.com` } },
        "extra.api_base_url",
      ],
      // The organisation id goes into a header: no spaces or control characters.
      ["llm", { primary_id: "org with spaces", secret: LLM_KEY }, "primary_id"],
      ["llm", { secret: "short" }, "secret"],
      ["llm", { secret: "has spaces in it" }, "secret"],
      ["tts", { secret: SPEECH_KEY, extra: { voice_map: { amelia: 7 } } }, "extra.voice_map"],
      ["tts", { secret: SPEECH_KEY, extra: { voice_map: ["v_1"] } }, "extra.voice_map"],
      ["stt", {}, "secret"],
      ["stt", { secret: "   " }, "secret"],
      ["stt", { secret: SPEECH_KEY, extra: "x" }, "extra"],
    ]
    for (const [provider, body, field] of cases) {
      const r = await put(s.token, provider, body)
      expect(r, `${provider} ${JSON.stringify(body)}`).toMatchObject({
        status: 422,
        body: { code: "VALIDATION_FAILED", field },
      })
    }
    expect(await rowOf(s.tenantId, "telco_a")).toBeUndefined()
    expect(await put(s.token, "telco_c", { secret: TOKEN })).toMatchObject({ status: 404, body: { code: "NOT_FOUND" } })
    expect(await call("DELETE", "/onboarding/credentials/telco_c", s.token)).toMatchObject({ status: 404 })
  })

  it("refuses a provider URL on a loopback or private address unless the deployment allows them", async () => {
    const strict = await startTestServer({ env: { CREDENTIALS_MASTER_KEY: MASTER_KEY } })
    try {
      const s = await api(strict).signup()
      expect((await call("PUT", "/onboarding/mode", s.token, { mode: "byok" }, strict)).status).toBe(200)
      for (const url of [
        "http://127.0.0.1:9/",
        "http://10.1.2.3",
        "http://169.254.169.254/latest",
        "http://[::1]:8080",
        "http://localhost:5432",
      ]) {
        const r = await call(
          "PUT",
          "/onboarding/credentials/telco_a",
          s.token,
          { primary_id: SID, secret: TOKEN, extra: { api_base_url: url } },
          strict,
        )
        expect({ url, status: r.status, field: r.body.field }).toEqual({
          url,
          status: 422,
          field: "extra.api_base_url",
        })
      }
      const llm = await call(
        "PUT",
        "/onboarding/credentials/llm",
        s.token,
        { secret: "sk-test-0123456789abcdef", extra: { base_url: "http://192.168.1.5/v1" } },
        strict,
      )
      expect(llm).toMatchObject({ status: 422, body: { field: "extra.base_url" } })
      expect(await strict.sql`select * from provider_credentials`).toEqual([])
    } finally {
      await strict.stop()
    }
  })

  it("answers 503 ENCRYPTION_UNAVAILABLE and stores nothing when the master key is unset", async () => {
    const keyless = await startTestServer()
    try {
      const s = await api(keyless).signup()
      expect((await call("PUT", "/onboarding/mode", s.token, { mode: "byok" }, keyless)).status).toBe(200)
      const r = await call(
        "PUT",
        "/onboarding/credentials/telco_a",
        s.token,
        { primary_id: SID, secret: TOKEN },
        keyless,
      )
      expect(r).toMatchObject({ status: 503, body: { code: "ENCRYPTION_UNAVAILABLE" } })
      expect(await keyless.sql`select * from provider_credentials`).toEqual([])
      expect((await call("GET", "/onboarding/status", s.token, undefined, keyless)).status).toBe(200)
    } finally {
      await keyless.stop()
    }
  })
})

describe("state table: DELETE credentials", () => {
  it("deletes (admin) and flips onboarding back to incomplete; 404 when none is saved", async () => {
    const s = await readyByokTenant()
    const done = await call("POST", "/onboarding/complete", s.token)
    expect(done).toMatchObject({ status: 200, body: { completed: true, ready: true, missing: [] } })
    // telco_b is not what completion rests on, but deleting any credential resets it.
    await put(s.token, "telco_b", { primary_id: "acct_9", secret: SPEECH_KEY, extra: { api_base_url: fake.url } })
    expect((await status(s)).body.completed).toBe(true)
    expect(await call("DELETE", "/onboarding/credentials/telco_b", s.token)).toMatchObject({
      status: 200,
      body: { deleted: true },
    })
    expect((await status(s)).body).toMatchObject({ completed: false, completed_at: null, ready: true })
    expect(await call("POST", "/onboarding/complete", s.token)).toMatchObject({
      status: 200,
      body: { completed: true },
    })
    expect(await call("DELETE", "/onboarding/credentials/telco_a", s.token)).toMatchObject({ status: 200 })
    const after = await status(s)
    expect(after.body).toMatchObject({ completed: false, ready: false, missing: ["telephony_credential"] })
    expect(after.body.providers.find((p: any) => p.provider === "telco_a")).toMatchObject({
      configured: false,
      status: "not_configured",
    })
    expect(await call("DELETE", "/onboarding/credentials/telco_a", s.token)).toMatchObject({
      status: 404,
      body: { code: "NOT_FOUND" },
    })
  })

  it("a save that fails validation also resets completion", async () => {
    const s = await readyByokTenant()
    expect((await call("POST", "/onboarding/complete", s.token)).status).toBe(200)
    await put(s.token, "llm", { secret: BAD_LLM_KEY, extra: { base_url: `${fake.url}/v1` } })
    expect((await status(s)).body).toMatchObject({ completed: false, missing: ["llm_credential"] })
  })
})

describe("state table: POST complete", () => {
  it("byok, not ready: 409 ONBOARDING_INCOMPLETE listing what is missing", async () => {
    const s = await a.signup({ verify: false })
    await setMode(s, "byok")
    const r = await call("POST", "/onboarding/complete", s.token)
    expect(r).toMatchObject({ status: 409, body: { code: "ONBOARDING_INCOMPLETE" } })
    expect(r.body.missing).toEqual([
      "email_verified",
      "byok_subscription",
      "llm_credential",
      "telephony_credential",
      "tts_credential",
      "stt_credential",
    ])
    const st = await status(s)
    expect(st.body.missing).toEqual(r.body.missing)
    expect(st.body.checklist.map((c: any) => c.item)).toEqual(r.body.missing)
    for (const c of st.body.checklist) expect(c).toMatchObject({ done: false, detail: expect.any(String) })

    await verifyEmail(s)
    await put(s.token, "telco_b", { primary_id: "acct_1", secret: SIM_KEY })
    expect((await call("POST", "/onboarding/complete", s.token)).body.missing).toEqual([
      "byok_subscription",
      "llm_credential",
      "tts_credential",
      "stt_credential",
    ])
    expect((await status(s)).body).toMatchObject({ completed: false, completed_at: null })
  })

  it("byok, ready: onboarding marked done (and completing again keeps the time)", async () => {
    const s = await readyByokTenant()
    const st = await status(s)
    expect(st.body).toMatchObject({ mode: "byok", ready: true, completed: false, missing: [] })
    for (const c of st.body.checklist) expect(c.done, c.item).toBe(true)
    const r = await call("POST", "/onboarding/complete", s.token)
    expect(r).toMatchObject({ status: 200, body: { mode: "byok", completed: true, ready: true } })
    expect(new Date(r.body.completed_at).getTime()).toBeGreaterThan(Date.now() - 60_000)
    const [t] = await srv.sql`select onboarding_completed_at from tenants where id = ${s.tenantId}`
    expect((t!["onboarding_completed_at"] as Date).toISOString()).toBe(r.body.completed_at)
    expect((await call("POST", "/onboarding/complete", s.token)).body.completed_at).toBe(r.body.completed_at)
  })

  it("bundled: needs the owner's email verified and a funded wallet (the trial credit counts)", async () => {
    const s = await a.signup({ verify: false })
    const r = await call("POST", "/onboarding/complete", s.token)
    expect(r).toMatchObject({ status: 409, body: { code: "ONBOARDING_INCOMPLETE", missing: ["email_verified"] } })
    await srv.sql`update wallets set balance_minor = 0 where tenant_id = ${s.tenantId}`
    expect((await call("POST", "/onboarding/complete", s.token)).body.missing).toEqual([
      "email_verified",
      "wallet_funded",
    ])
    await srv.sql`update wallets set balance_minor = 500 where tenant_id = ${s.tenantId}`
    await verifyEmail(s)
    expect(await call("POST", "/onboarding/complete", s.token)).toMatchObject({
      status: 200,
      body: {
        mode: "bundled",
        completed: true,
        checklist: [
          { item: "email_verified", done: true },
          { item: "wallet_funded", done: true },
        ],
      },
    })
  })
})

describe("tenant isolation", () => {
  it("keeps each workspace's credentials to itself; a row moved to another tenant does not decrypt", async () => {
    const alice = await readyByokTenant()
    const bob = await a.signup()
    await setMode(bob, "byok")
    const bobStatus = await status(bob)
    for (const p of bobStatus.body.providers) expect(p.configured).toBe(false)
    expect(await call("DELETE", "/onboarding/credentials/telco_a", bob.token)).toMatchObject({ status: 404 })
    expect(await activeCredential(srv.sql, crypto, bob.tenantId, "telco_a")).toBeUndefined()
    expect(await rowOf(alice.tenantId, "telco_a")).toBeDefined()

    // Bob saves his own, then someone copies Alice's ciphertext into Bob's row.
    await put(bob.token, "telco_a", { primary_id: SID, secret: BAD_TOKEN })
    const aliceRow = (await rowOf(alice.tenantId, "telco_a"))!
    await srv.sql`update provider_credentials set secret_enc = ${aliceRow["secret_enc"] as string}
      where tenant_id = ${bob.tenantId} and provider = 'telco_a'`
    await expect(activeCredential(srv.sql, crypto, bob.tenantId, "telco_a")).rejects.toThrow(/failed authentication/)
    // … or into another provider of Alice's own.
    await srv.sql`update provider_credentials set secret_enc = ${aliceRow["secret_enc"] as string}
      where tenant_id = ${alice.tenantId} and provider = 'stt'`
    await expect(activeCredential(srv.sql, crypto, alice.tenantId, "stt")).rejects.toThrow(/failed authentication/)
    expect((await activeCredential(srv.sql, crypto, alice.tenantId, "telco_a"))?.secret).toBe(TOKEN)
    // No master key, nothing to use.
    expect(await activeCredential(srv.sql, undefined, alice.tenantId, "telco_a")).toBeUndefined()
  })
})

describe("the runtime's view (Credentials service)", () => {
  it("hands out a byok tenant's validated credentials, decrypted, and the telco_a account for numbers", async () => {
    const s = await readyByokTenant()
    const other = await a.signup()
    const use = <A>(f: (c: Credentials["Type"]) => Promise<A>) =>
      srv.running.runtime.runPromise(
        Effect.flatMap(Credentials, (c) => Effect.promise(() => f(c))).pipe(Effect.provide(CredentialsLive)),
      )
    expect(await use(async (c) => c.crypto !== undefined)).toBe(true)
    expect(await use((c) => c.active(s.tenantId, "llm"))).toEqual({
      provider: "llm",
      primaryId: null,
      secret: LLM_KEY,
      extra: { base_url: `${fake.url}/v1`, model: "gpt-4o-mini" },
    })
    expect(await use((c) => c.telcoAAccount(s.tenantId))).toEqual({ sid: SID, token: TOKEN, apiUrl: fake.url })
    expect(await use((c) => c.active(other.tenantId, "llm"))).toBeUndefined()
    expect(await use((c) => c.telcoAAccount(other.tenantId))).toBeUndefined()
    await put(s.token, "llm", { secret: BAD_LLM_KEY, extra: { base_url: `${fake.url}/v1` } })
    expect(await use((c) => c.active(s.tenantId, "llm"))).toBeUndefined()
  })
})

describe("the secret never leaves the server", () => {
  it("is not in any response body this suite received", () => {
    expect(bodies.length).toBeGreaterThan(50)
    for (const b of bodies) for (const secret of SECRETS) expect(b.includes(secret), b.slice(0, 200)).toBe(false)
  })

  it("is stored only encrypted", async () => {
    const rows = await srv.sql`select * from provider_credentials`
    expect(rows.length).toBeGreaterThan(10)
    const dump = JSON.stringify(rows)
    for (const secret of SECRETS) {
      expect(dump.includes(secret)).toBe(false)
      expect(dump.includes(Buffer.from(secret).toString("base64"))).toBe(false)
    }
    for (const r of rows) expect(r["secret_enc"]).toMatch(/^v1:[A-Za-z0-9+/]+=*$/)
  })

  it("is not in any log line of a server that saved, validated, refused and listed credentials", async () => {
    const lines: Array<Record<string, unknown>> = []
    const remote = await startTestServer({
      env: { LOG_LEVEL: "trace", CREDENTIALS_MASTER_KEY: MASTER_KEY, ALLOW_PRIVATE_PROVIDER_URLS: "true" },
      logLines: lines,
    })
    try {
      const c = api(remote)
      const s = await c.signup()
      const go = (method: string, path: string, body?: unknown) => call(method, path, s.token, body, remote)
      expect((await go("PUT", "/onboarding/mode", { mode: "byok" })).status).toBe(200)
      expect(
        (
          await go("PUT", "/onboarding/credentials/telco_a", {
            primary_id: SID,
            secret: TOKEN,
            extra: { api_base_url: fake.url },
          })
        ).body.validated,
      ).toBe(true)
      expect(
        (
          await go("PUT", "/onboarding/credentials/telco_a", {
            primary_id: SID,
            secret: BAD_TOKEN,
            extra: { api_base_url: fake.url },
          })
        ).body.validated,
      ).toBe(false)
      expect(
        (await go("PUT", "/onboarding/credentials/llm", { secret: BAD_LLM_KEY, extra: { base_url: `${fake.url}/v1` } }))
          .body.validated,
      ).toBe(false)
      expect((await go("PUT", "/onboarding/credentials/llm", { secret: `${LLM_KEY} x` })).status).toBe(422)
      expect(
        (
          await go("PUT", "/onboarding/credentials/stt", {
            secret: SPEECH_KEY,
            extra: { api_base_url: "http://127.0.0.1:1" },
          })
        ).body.validated,
      ).toBe(false)
      expect((await go("PUT", "/onboarding/credentials/tts", { secret: SIM_KEY })).body.validated).toBe(true)
      expect((await go("GET", "/onboarding/status")).status).toBe(200)
      expect((await go("DELETE", "/onboarding/credentials/tts")).status).toBe(200)
      await expect
        .poll(() => lines.filter((l) => l["msg"] === "request" && String(l["path"]).startsWith("/onboarding")).length)
        .toBeGreaterThanOrEqual(9)
      expect(
        lines.filter((l) => l["msg"] === "provider credential saved").map((l) => [l["provider"], l["status"]]),
      ).toEqual([
        ["telco_a", "validated"],
        ["telco_a", "failed"],
        ["llm", "failed"],
        ["stt", "unvalidated"],
        ["tts", "validated"],
      ])
    } finally {
      await remote.stop()
    }
    // Everything the server logged from its start to its stop, shut-down lines included.
    const everything = JSON.stringify(lines)
    for (const secret of SECRETS) expect(everything.includes(secret), secret).toBe(false)
    expect(everything.includes(MASTER_KEY)).toBe(false)
  }, 60_000)
})
