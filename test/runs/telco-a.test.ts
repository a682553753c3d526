// telco_a end to end: a byok workspace saves its telco_a credential, and a whole run goes over the
// real protocol path to a fake telco (calls created with callback URLs; signed status callbacks
// and voice webhooks driving the call actors; TwiML answers); webhook signatures are accepted
// only from the tenant's own token; a call to a provisioned number is answered by its workflow's
// persona and recorded.
import { createHmac, randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Session } from "../support/clients.js"
import { type FakeTelco, type FakeTelcoAccount, signTelcoA, startFakeTelco } from "../support/fake-telco.js"
import { type FakeCall, fakeOutboundCalls } from "../support/fake-telco-calls.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { freePort } from "../support/nginx.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

let srv: TestServer
let fake: FakeTelco
let calls: Map<string, FakeCall>
let a: ReturnType<typeof api>
let tenant: Session
let account: FakeTelcoAccount

const call = async (method: string, path: string, s: { token: string }, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

async function byokTenant(acct: FakeTelcoAccount): Promise<Session> {
  const s = await a.signup({ country: "US" })
  expect((await call("PUT", "/onboarding/mode", s, { mode: "byok" })).status).toBe(200)
  const saved = await call("PUT", "/onboarding/credentials/telco_a", s, {
    primary_id: acct.sid,
    secret: acct.token,
    extra: { api_base_url: fake.url, caller_id: "+14155550000" },
  })
  expect(saved.body).toMatchObject({ saved: true, validated: true })
  return s
}

beforeAll(async () => {
  fake = await startFakeTelco()
  calls = fakeOutboundCalls(fake)
  const port = await freePort()
  srv = await startTestServer({
    env: {
      PORT: String(port),
      PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
      CREDENTIALS_MASTER_KEY: randomBytes(32).toString("base64"),
      ALLOW_PRIVATE_PROVIDER_URLS: "true",
      SIM_TIME_SCALE: "0.01",
      CALLING_HOURS: "any",
      DIALER_CPS_PER_CARRIER: "100",
      DIALER_CPS_PER_TENANT: "100",
      DIALER_RETRY_BACKOFF_MS: "20000",
      RUN_CLAIM_INTERVAL_MS: "200",
      // telco_a turn by turn (<Say>/<Gather>); test/runs/telco-a-media.test.ts has its calls heard as audio.
      MEDIA_STREAMS: "none",
    },
  })
  a = api(srv)
  account = fake.addAccount()
  tenant = await byokTenant(account)
})
afterAll(async () => {
  await srv?.stop()
  await fake?.close()
})

describe("a run over telco_a", () => {
  it("places every call through the tenant's account and completes with the callee's outcomes", async () => {
    const phones = [
      "+12025550402",
      "+12025550413",
      "+12025550424",
      "+12025550435",
      "+12025550446",
      "+12025550450",
      "+12025550461",
    ]
    const w = (await call("POST", "/api/workflows", tenant, { nl_prompt: "Invite members to renew their plan." })).body
    await call("POST", `/api/workflows/${w.id}/audience`, tenant, { rows: phones.map((phone) => ({ phone })) })
    await call("PUT", `/api/workflows/${w.id}/compliance`, tenant, { consent_attestation_text: "Opted in." })
    // Only the carrier is the workspace's own (the model is the platform's): the calls go out on its
    // telco_a account but are paid at the bundled rate (src/billing/call-terms.ts), so fund the wallet.
    const intent = (await call("POST", "/billing/topup", tenant, { amount_minor: 1_000_000 })).body
    expect(
      (
        await a.call("POST", "/billing/webhooks/stub", {
          body: { external_id: intent.external_id, status: "succeeded" },
        })
      ).status,
    ).toBe(200)
    const run = await call("POST", `/api/workflows/${w.id}/run`, tenant)
    expect(run.status).toBe(201)

    let done: Json | undefined
    for (let i = 0; i < 300 && done === undefined; i++) {
      const r = ((await call("GET", `/api/workflows/${w.id}/runs`, tenant)).body.runs as Json[])[0]!
      if (r.status === "completed") done = r
      else await new Promise((res) => setTimeout(res, 100))
    }
    expect(done).toMatchObject({ targets_total: 7, targets_dialed: 7 })

    // The provider was asked for each call on the tenant's own account, with our callback URLs.
    const created = fake.requests.filter((r) => r.method === "POST" && r.resource === "/Calls.json")
    expect(created.length).toBeGreaterThanOrEqual(7)
    for (const r of created) {
      expect(r.accountSid).toBe(account.sid)
      expect(r.form).toMatchObject({ From: "+14155550000", Method: "POST", StatusCallbackMethod: "POST" })
      expect(r.form.Url).toMatch(new RegExp(`^${srv.url}/voice/telco_a/incoming\\?call_id=\\d+$`))
      expect(r.form.StatusCallback).toMatch(new RegExp(`^${srv.url}/api/telco_a/status\\?call_id=\\d+$`))
    }
    for (const c of calls.values()) expect(c.status).not.toMatch(/^error/)

    const outcomes = await srv.sql<{ phone_e164: string; outcome: string; attempts: number }[]>`
      select phone_e164, outcome, attempts from run_targets where run_id = ${run.body.run_id} order by phone_e164`
    const byDigit = Object.fromEntries(outcomes.map((o) => [o.phone_e164.at(-1), o]))
    expect(byDigit["0"]).toMatchObject({ outcome: "no_answer", attempts: 3 })
    expect(byDigit["1"]).toMatchObject({ outcome: "busy", attempts: 3 })
    expect(byDigit["2"]!.outcome).toMatch(/^voicemail/)
    for (const d of ["3", "4", "5"]) expect(byDigit[d]!.outcome).toBe("agreed")
    expect(byDigit["6"]!.outcome).toBe("declined")
    const providers = await srv.sql<
      { provider: string }[]
    >`select distinct provider from calls where run_id = ${run.body.run_id}`
    expect(providers).toEqual([{ provider: "telco_a" }])

    // What the callee heard came from our TwiML: the disclosure and opening line first. On a loaded
    // machine a first attempt can end unanswered (its ring timed out before the fake's answer was
    // handled) and be retried: the last call to the number is the one that agreed.
    const agreeing = [...calls.values()].filter((c) => c.to === "+12025550413").at(-1)!
    expect(agreeing.heard.length).toBeGreaterThan(1)
    expect(agreeing.said[0]).toBe("Yes, that sounds good.")
    const turns = await srv.sql<{ speaker: string; text: string }[]>`
      select t.speaker, t.text
      from turns t
      where t.call_id = (select max(id) from calls where phone_e164 = '+12025550413' and run_id = ${run.body.run_id})
      order by t.turn_index`
    expect(turns.map((t) => t.speaker).slice(0, 2)).toEqual(["agent", "callee"])
    expect(turns[1]!.text).toBe("Yes, that sounds good.")
    // Not every paid leg is the workspace's own: each call held its reservation at the bundled rate.
    const reservations =
      await srv.sql`select 1 from ledger_entries where tenant_id = ${tenant.tenantId} and kind = 'call_reservation'`
    expect(reservations.length).toBeGreaterThanOrEqual(7)
  })
})

describe("webhook signatures", () => {
  it(
    "accepts the tenant's own signature and refuses a wrong token, " +
      "an altered parameter, another tenant's token or none",
    async () => {
      const [c] = await srv.sql<
        [{ id: number }]
      >`select id from calls where tenant_id = ${tenant.tenantId} order by id limit 1`
      const url = `${srv.url}/api/telco_a/status?call_id=${c.id}`
      const params = { CallSid: "CA0000", CallStatus: "completed", To: "+12025550413" }
      const send = (signature: string | null, body: Record<string, string> = params) =>
        fetch(url, {
          method: "POST",
          headers: {
            "content-type": "application/x-www-form-urlencoded",
            ...(signature !== null && { "X-telco_a-Signature": signature }),
          },
          body: new URLSearchParams(body).toString(),
        })
      expect((await send(signTelcoA(account.token, url, params))).status).toBe(200)
      expect((await send(signTelcoA("0".repeat(32), url, params))).status).toBe(401)
      expect((await send(signTelcoA(account.token, url, params), { ...params, CallStatus: "busy" })).status).toBe(401)
      expect((await send(signTelcoA(account.token, `${url}&x=1`, params))).status).toBe(401)
      expect((await send(null)).status).toBe(401)
      const otherAccount = fake.addAccount()
      await byokTenant(otherAccount)
      const res = await send(signTelcoA(otherAccount.token, url, params))
      expect(res.status).toBe(401)
      expect(await res.json()).toMatchObject({ code: "INVALID_SIGNATURE" })
    },
  )
})

describe("a call to a provisioned number", () => {
  it("is answered in the persona of the number's workflow and recorded", async () => {
    const w = (
      await call("POST", "/api/workflows", tenant, {
        nl_prompt: "Answer questions about our gym membership.",
        persona_override: "kai",
      })
    ).body
    const provisioned = await call("POST", "/numbers/provision", tenant, {
      country: "US",
      area_code: "415",
      workflow_id: w.id,
    })
    expect(provisioned.status).toBe(201)
    const number = provisioned.body.number as Json
    const owned = fake.ownedByPhone(number.phone_e164)!
    expect(owned.voice_url).toMatch(/\/voice\/telco_a\/incoming/)
    const params = {
      CallSid: `CA${randomBytes(8).toString("hex")}`,
      From: "+12125550999",
      To: number.phone_e164,
      CallStatus: "ringing",
      Direction: "inbound",
    }
    const res = await fake.callback(owned.voice_url, params, { token: account.token })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toMatch(/xml/)
    const doc = await res.text()
    expect(doc).toMatch(/<Say>[^<]*Kai[^<]*<\/Say><Hangup\/>/)
    const [row] = await srv.sql<
      [{ from_e164: string; workflow_id: number; tenant_id: number }]
    >`select from_e164, workflow_id, tenant_id from inbound_calls where provider_call_id = ${params.CallSid}`
    expect(row).toEqual({ from_e164: "+12125550999", workflow_id: w.id, tenant_id: tenant.tenantId })
    const timeline = await call("GET", `/api/timeline?phone=${encodeURIComponent("+12125550999")}`, tenant)
    expect(timeline.body.events[0]).toMatchObject({
      kind: "call",
      direction: "inbound",
      workflow_id: w.id,
      payload: { provider_call_id: params.CallSid },
    })
    const forged = await fake.callback(owned.voice_url, { ...params, CallSid: "CA-forged" }, { token: "f".repeat(32) })
    expect(forged.status).toBe(401)
  })
})

describe("telco_b's voice webhook", () => {
  it(
    "answers a call to our number with the persona's greeting " +
      "when signed with the workspace's telco_b key, else 401",
    async () => {
      const key = `tb_${randomBytes(16).toString("hex")}`
      const saved = await call("PUT", "/onboarding/credentials/telco_b", tenant, {
        primary_id: "acct-4711",
        secret: key,
      })
      expect(saved.body).toMatchObject({ saved: true, validated: true })
      const w = (
        await call("POST", "/api/workflows", tenant, {
          nl_prompt: "Answer questions about our yoga classes.",
          persona_override: "leo",
        })
      ).body
      const number = (
        await call("POST", "/numbers/provision", tenant, { country: "US", area_code: "212", workflow_id: w.id })
      ).body.number as Json
      const body = JSON.stringify({
        uuid: `tb-${randomBytes(6).toString("hex")}`,
        from: "13125550100",
        to: number.phone_e164.slice(1),
      })
      const send = (signature: string | null, raw = body) =>
        fetch(`${srv.url}/voice/telco_b/incoming`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            ...(signature !== null && { "X-telco_b-Signature": signature }),
          },
          body: raw,
        })
      const sign = (k: string, raw = body) => createHmac("sha256", k).update(raw).digest("hex")

      const ok = await send(sign(key))
      expect(ok.status).toBe(200)
      const actions = (await ok.json()) as Json[]
      expect(actions).toHaveLength(1)
      expect(actions[0]).toMatchObject({ action: "talk" })
      expect(actions[0]!.text).toMatch(/Leo/)
      const [row] = await srv.sql<
        [{ provider: string; workflow_id: number }]
      >`select provider, workflow_id from inbound_calls where provider_call_id = ${JSON.parse(body).uuid}`
      expect(row).toEqual({ provider: "telco_b", workflow_id: w.id })

      expect((await send(sign("someone-elses-key"))).status).toBe(401)
      expect((await send(sign(key), body.replace("13125550100", "13125550199"))).status).toBe(401)
      expect((await send(null)).status).toBe(401)
    },
  )
})

describe("telco_b's voice webhook by GET (issue 32)", () => {
  it(
    "answers a GET with the fields in its query, signed over the raw query string, at the spec's ?tenant_id=; " +
      "any other key, query, tenant or no signature is 401",
    async () => {
      const owner = await byokTenant(fake.addAccount())
      const other = await a.signup({ country: "US" })
      const key = `tb_${randomBytes(16).toString("hex")}`
      const saved = await call("PUT", "/onboarding/credentials/telco_b", owner, { primary_id: "acct-32", secret: key })
      expect(saved.body).toMatchObject({ saved: true, validated: true })
      const w = (
        await call("POST", "/api/workflows", owner, { nl_prompt: "Answer questions.", persona_override: "leo" })
      ).body
      const number = (
        await call("POST", "/numbers/provision", owner, { country: "US", area_code: "212", workflow_id: w.id })
      ).body.number as Json
      const uuid = `tb-get-${randomBytes(6).toString("hex")}`
      const fields = `uuid=${uuid}&from=13125550100&to=${number.phone_e164.slice(1)}`
      const query = `tenant_id=${owner.tenantId}&${fields}`
      const sign = (k: string, raw: string) => createHmac("sha256", k).update(raw).digest("hex")
      const get = (qs: string, signature: string | null) =>
        fetch(`${srv.url}/voice/telco_b/incoming?${qs}`, {
          headers: signature === null ? {} : { "X-telco-b-Signature": signature },
        })
      const refused = async (res: Response) => ({ status: res.status, code: ((await res.json()) as Json).code })

      const ok = await get(query, sign(key, query))
      expect(ok.status).toBe(200)
      expect(ok.headers.get("content-type")).toMatch(/^application\/json/)
      const actions = (await ok.json()) as Json[]
      expect(actions).toHaveLength(1)
      expect(actions[0]).toMatchObject({ action: "talk" })
      expect(actions[0]!.text).toMatch(/Leo/)
      const [row] = await srv.sql<[{ provider: string; workflow_id: number }]>`
        select provider, workflow_id from inbound_calls where provider_call_id = ${uuid}`
      expect(row).toEqual({ provider: "telco_b", workflow_id: w.id })
      // Without tenant_id the number's workspace is the tenant, as for POST.
      const bare = fields.replace(uuid, `${uuid}-2`)
      expect((await get(bare, sign(key, bare))).status).toBe(200)

      const invalid = { status: 401, code: "INVALID_SIGNATURE" }
      expect(await refused(await get(query, sign("someone-elses-key", query)))).toEqual(invalid)
      expect(await refused(await get(query.replace("13125550100", "13125550199"), sign(key, query)))).toEqual(invalid)
      expect(await refused(await get(query, null))).toEqual(invalid)
      const elsewhere = `tenant_id=${other.tenantId}&${fields}`
      expect(await refused(await get(elsewhere, sign(key, elsewhere)))).toEqual(invalid)
      // The POST takes the spec's ?tenant_id= the same way.
      const body = JSON.stringify({ uuid: `${uuid}-post`, from: "13125550100", to: number.phone_e164.slice(1) })
      const post = (tenantId: number) =>
        fetch(`${srv.url}/voice/telco_b/incoming?tenant_id=${tenantId}`, {
          method: "POST",
          headers: { "content-type": "application/json", "X-telco-b-Signature": sign(key, body) },
          body,
        })
      expect(await refused(await post(other.tenantId))).toEqual(invalid)
      expect((await post(owner.tenantId)).status).toBe(200)

      const doc = (await (await fetch(`${srv.url}/openapi.json`)).json()) as Json
      expect(Object.keys(doc.paths["/voice/telco_b/incoming"]).sort()).toEqual(["get", "post"])
    },
  )
})
