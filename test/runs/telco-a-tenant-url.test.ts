// telco_a callbacks at the spec's URLs, /api/telco_a/status?tenant_id=<id> and
// /voice/telco_a/incoming?tenant_id=<id>, by POST or GET: the workspace named in the URL gives the
// token the signature is checked with; a correctly signed callback about a call Parley does not
// know is acknowledged (200) and recorded; the 401 says whether the tenant or the signature failed.
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { signTelcoA } from "../../src/providers/telephony/telco-a.signature.js"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { freePort } from "../support/nginx.js"

type Json = Record<string, any>

let srv: TestServer
let base: string
let tenant: Session
let token: string
let other: Session
let otherToken: string

async function byok(): Promise<{ s: Session; token: string }> {
  const s = await api(srv).signup({ country: "US" })
  expect((await api(srv).call("PUT", "/onboarding/mode", { token: s.token, body: { mode: "byok" } })).status).toBe(200)
  const t = randomBytes(16).toString("hex")
  const saved = await api(srv).call("PUT", "/onboarding/credentials/telco_a", {
    token: s.token,
    body: { primary_id: `AC${randomBytes(16).toString("hex")}`, secret: t },
  })
  expect(saved.status).toBe(200)
  return { s, token: t }
}

beforeAll(async () => {
  const port = await freePort()
  base = `http://127.0.0.1:${port}`
  srv = await startTestServer({
    env: { PORT: String(port), PUBLIC_BASE_URL: base, CREDENTIALS_MASTER_KEY: randomBytes(32).toString("base64") },
  })
  ;({ s: tenant, token } = await byok())
  ;({ s: other, token: otherToken } = await byok())
})
afterAll(async () => srv?.stop())

const post = (path: string, params: Record<string, string>, signature: string | null) =>
  fetch(base + path, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      ...(signature !== null && { "X-telco_a-Signature": signature }),
    },
    body: new URLSearchParams(params).toString(),
  })
const get = (pathAndQuery: string, signature: string | null) =>
  fetch(base + pathAndQuery, { headers: signature === null ? {} : { "X-telco_a-Signature": signature } })

const unmatched = (sid: string) =>
  srv.sql<Json[]>`
    select tenant_id, kind, method, call_status, duration_seconds from telco_unmatched_callbacks
    where provider_call_id = ${sid}`

describe("telco_a status callbacks at ?tenant_id=", () => {
  it("acknowledges and records a POST signed with the named workspace's token for a call we do not know", async () => {
    const path = `/api/telco_a/status?tenant_id=${tenant.tenantId}`
    const sid = `CA${randomBytes(16).toString("hex")}`
    const params = { CallSid: sid, CallStatus: "completed", CallDuration: "42", To: "+12025550100" }
    const res = await post(path, params, signTelcoA(token, base + path, params))
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ received: true })
    expect(await unmatched(sid)).toEqual([
      { tenant_id: tenant.tenantId, kind: "status", method: "POST", call_status: "completed", duration_seconds: 42 },
    ])
  })

  it("takes GET, its fields in the URL, which alone is signed", async () => {
    const sid = `CA${randomBytes(16).toString("hex")}`
    const path = `/api/telco_a/status?tenant_id=${tenant.tenantId}&CallSid=${sid}&CallStatus=busy`
    const res = await get(path, signTelcoA(token, base + path))
    expect(res.status).toBe(200)
    expect(await unmatched(sid)).toEqual([
      { tenant_id: tenant.tenantId, kind: "status", method: "GET", call_status: "busy", duration_seconds: null },
    ])
    // The same URL with a field changed is not what was signed.
    const forged = await get(path.replace("busy", "completed"), signTelcoA(token, base + path))
    expect(forged.status).toBe(401)
  })

  it("refuses, saying why: the signature (wrong, another workspace's, altered, missing) or the tenant", async () => {
    const path = `/api/telco_a/status?tenant_id=${tenant.tenantId}`
    const sid = `CA${randomBytes(16).toString("hex")}`
    const params = { CallSid: sid, CallStatus: "completed" }
    const refusals: Array<[Response, string, RegExp]> = [
      [await post(path, params, signTelcoA("0".repeat(32), base + path, params)), "INVALID_SIGNATURE", /signature/],
      [await post(path, params, signTelcoA(otherToken, base + path, params)), "INVALID_SIGNATURE", /signature/],
      [
        await post(path, { ...params, CallStatus: "busy" }, signTelcoA(token, base + path, params)),
        "INVALID_SIGNATURE",
        /signature/,
      ],
      [await post(path, params, null), "INVALID_SIGNATURE", /signature.*missing/],
    ]
    for (const bad of ["999999999999", "abc", "-1", "0"]) {
      const p = `/api/telco_a/status?tenant_id=${bad}`
      refusals.push([await post(p, params, signTelcoA(token, base + p, params)), "UNAUTHENTICATED", /tenant/])
    }
    for (const [res, code, message] of refusals) {
      expect(res.status).toBe(401)
      const body = (await res.json()) as Json
      expect(body.code).toBe(code)
      expect(body.error).toMatch(message)
    }
    expect(await unmatched(sid)).toEqual([])
    // The other workspace's own URL with its own token is fine.
    const theirs = `/api/telco_a/status?tenant_id=${other.tenantId}`
    expect((await post(theirs, params, signTelcoA(otherToken, base + theirs, params))).status).toBe(200)
  })

  it("a workspace with no telco_a token to check against is a signature failure that says so", async () => {
    const plain = await api(srv).signup()
    const path = `/api/telco_a/status?tenant_id=${plain.tenantId}`
    const params = { CallSid: "CA1", CallStatus: "completed" }
    const res = await post(path, params, signTelcoA(token, base + path, params))
    expect(res.status).toBe(401)
    expect(await res.json()).toMatchObject({ code: "INVALID_SIGNATURE", error: expect.stringMatching(/no telco_a/) })
  })

  it("a call_id of another workspace under this tenant_id is a call this workspace does not have", async () => {
    const [row] = await srv.sql<[{ id: number }?]>`select id from calls where tenant_id <> ${tenant.tenantId} limit 1`
    const callId = row?.id ?? 987654321
    const path = `/api/telco_a/status?tenant_id=${tenant.tenantId}&call_id=${callId}`
    const sid = `CA${randomBytes(16).toString("hex")}`
    const params = { CallSid: sid, CallStatus: "completed" }
    expect((await post(path, params, signTelcoA(token, base + path, params))).status).toBe(200)
    expect(await unmatched(sid)).toHaveLength(1)
    // Parley's own form without a tenant: an unknown call id names no workspace.
    const own = `/api/telco_a/status?call_id=987654321`
    const res = await post(own, params, signTelcoA(token, base + own, params))
    expect(res.status).toBe(401)
    expect(await res.json()).toMatchObject({ code: "UNAUTHENTICATED", error: expect.stringMatching(/tenant/) })
  })
})

describe("telco_a voice webhooks at ?tenant_id=", () => {
  it("answers a signed call we do not know with a hang-up (200, TwiML) by POST or GET, and records it", async () => {
    const path = `/voice/telco_a/incoming?tenant_id=${tenant.tenantId}`
    const sid = `CA${randomBytes(16).toString("hex")}`
    const params = { CallSid: sid, From: "+12125550999", To: "+14155550123", CallStatus: "ringing" }
    const res = await post(path, params, signTelcoA(token, base + path, params))
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toMatch(/xml/)
    expect(await res.text()).toMatch(/<Hangup\/>/)
    const sid2 = `CA${randomBytes(16).toString("hex")}`
    const q = `${path}&CallSid=${sid2}&CallStatus=ringing`
    const got = await get(q, signTelcoA(token, base + q))
    expect(got.status).toBe(200)
    expect(await got.text()).toMatch(/<Hangup\/>/)
    expect(await unmatched(sid)).toEqual([
      { tenant_id: tenant.tenantId, kind: "voice", method: "POST", call_status: "ringing", duration_seconds: null },
    ])
    expect((await unmatched(sid2))[0]).toMatchObject({ kind: "voice", method: "GET" })
    // No caller or callee number is kept for an unknown call.
    const [kept] = await srv.sql<[Json]>`select * from telco_unmatched_callbacks where provider_call_id = ${sid}`
    expect(JSON.stringify(kept)).not.toMatch(/2125550999|4155550123/)
    const unsigned = await get(q, null)
    expect(unsigned.status).toBe(401)
  })
})
