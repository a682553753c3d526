// A hang-up that telco_a does not take, against the local fake telco: the adapter retries it
// (a 500 then a 200 goes through); one answered 500 every time ends the leg here but leaves the call
// row marked (hangup_state pending, with the carrier's call id), logged with the call's context and
// counted in /metrics; the sweep (runtime/actors/hangups.ts) tries it again, reports it while it stays up,
// hangs it up once the carrier takes it, and gives up past its limit.
import { randomBytes } from "node:crypto"
import pino from "pino"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { reportingHangups, sweepHangups } from "../../runtime/actors/hangups.js"
import { makeTelcoATelephony } from "../../src/providers/telephony/telco-a.telephony.js"
import type { CallLeg, CarrierEvent, TelephonyProvider } from "../../src/providers/telephony/telephony.interface.js"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { type FakeTelco, type FakeTelcoAccount, startFakeTelco } from "../support/fake-telco.js"
import { fakeOutboundCalls } from "../support/fake-telco-calls.js"
import { startTestServer, stopSharedServers, type TestServer } from "../support/harness.js"
import { freePort } from "../support/nginx.js"

// No shared server runs beside this suite: it reads the process's metrics, which would count theirs too.
beforeAll(stopSharedServers)

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const TOKEN = "metrics-token-for-hangups"

let srv: TestServer
let fake: FakeTelco
let a: ReturnType<typeof api>
let account: FakeTelcoAccount
let tenant: Session
let telco: TelephonyProvider
/** A call row of a run that went over telco_a: the context the legs below report under. */
let row: { id: number; run_id: number; tenant_id: number }
const lines: Json[] = []
const log = pino({ level: "info" }, { write: (s: string) => void lines.push(JSON.parse(s)) })

const call = async (method: string, path: string, s: { token: string }, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

/** A sample of /metrics (0 when the series has not been written yet). */
async function metric(name: string, labels: string): Promise<number> {
  const res = await fetch(`${srv.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
  expect(res.status).toBe(200)
  const line = (await res.text()).split("\n").find((l) => l.startsWith(`${name}{${labels}} `))
  return line === undefined ? 0 : Number(line.split(" ")[1])
}
const failures = (reason: string) =>
  metric("parley_call_hangup_failures_total", `provider="telco_a",reason="${reason}"`)
const swept = () => metric("parley_call_hangups_swept_total", 'provider="telco_a"')

/** The hang-up requests the fake received for `sid`, with the status each was answered. */
const hangups = (sid: string) =>
  fake.requests
    .filter((r) => r.method === "POST" && r.resource === `/Calls/${sid}.json` && r.form.Status === "completed")
    .map((r) => r.status)

const hangupRow = async (id: number) =>
  (
    await srv.sql<[Json]>`select hangup_state, hangup_failures, hangup_error, provider_call_id
      from calls where id = ${id}`
  )[0]

/** A live leg on the fake (its call created, so it has the carrier's id), reporting under `row`. */
async function liveLeg(): Promise<{ leg: CallLeg; raw: CallLeg; events: CarrierEvent[] }> {
  const events: CarrierEvent[] = []
  const raw = telco.dial({ callId: row.id, to: "+12025550433", from: null, tenantId: row.tenant_id }, (e) =>
    events.push(e),
  )
  await expect.poll(() => raw.providerCallId, { timeout: 5000 }).not.toBe("")
  const leg = reportingHangups(
    raw,
    { callId: row.id, runId: row.run_id, tenantId: row.tenant_id, provider: "telco_a" },
    { sql: srv.sql, log },
  )
  return { leg, raw, events }
}

beforeAll(async () => {
  fake = await startFakeTelco()
  fakeOutboundCalls(fake)
  const port = await freePort()
  srv = await startTestServer({
    env: {
      ...FAST_RUNTIME_ENV,
      PORT: String(port),
      PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
      CREDENTIALS_MASTER_KEY: randomBytes(32).toString("base64"),
      ALLOW_PRIVATE_PROVIDER_URLS: "true",
      METRICS_TOKEN: TOKEN,
    },
  })
  a = api(srv)
  account = fake.addAccount()
  // A byok workspace whose run goes out on its own telco_a account: a real call row of provider telco_a.
  tenant = await a.signup({ country: "US" })
  expect((await call("PUT", "/onboarding/mode", tenant, { mode: "byok" })).status).toBe(200)
  const saved = await call("PUT", "/onboarding/credentials/telco_a", tenant, {
    primary_id: account.sid,
    secret: account.token,
    extra: { api_base_url: fake.url, caller_id: "+14155550000" },
  })
  expect(saved.body).toMatchObject({ saved: true, validated: true })
  const intent = (await call("POST", "/billing/topup", tenant, { amount_minor: 1_000_000 })).body
  await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
  const w = (await call("POST", "/api/workflows", tenant, { nl_prompt: "Invite members to renew their plan." })).body
  await call("POST", `/api/workflows/${w.id}/audience`, tenant, { rows: [{ phone: "+12025550413" }] })
  await call("PUT", `/api/workflows/${w.id}/compliance`, tenant, { consent_attestation_text: "Opted in." })
  expect((await call("POST", `/api/workflows/${w.id}/run`, tenant)).status).toBe(201)
  let status: string | undefined
  for (let i = 0; i < 300 && status !== "completed"; i++) {
    status = ((await call("GET", `/api/workflows/${w.id}/runs`, tenant)).body.runs as Json[])[0]?.status
    if (status !== "completed") await new Promise((r) => setTimeout(r, 100))
  }
  expect(status).toBe("completed")
  ;[row] = await srv.sql<[typeof row]>`
    select id, run_id, tenant_id from calls where tenant_id = ${tenant.tenantId} and provider = 'telco_a' limit 1`
  expect(row).toBeDefined()
  // The same account as the workspace's, as the host's sweep would resolve it; nobody answers its webhooks.
  telco = makeTelcoATelephony({
    account: { sid: account.sid, token: account.token, apiUrl: fake.url, callerId: "+14155550000" },
    publicBaseUrl: "http://127.0.0.1:9",
    channel: { register: () => () => {} },
  })
}, 60_000)
afterAll(async () => {
  await srv?.stop()
  await fake?.close()
})

describe("a hang-up telco_a does not take", () => {
  it("answered 500 then 200: retried, and it goes through; nothing marked or counted", async () => {
    const { leg, raw, events } = await liveLeg()
    const before = await failures("hangup")
    lines.length = 0
    fake.failNext(500, 1)
    await leg.hangup()
    expect(hangups(raw.providerCallId)).toEqual([500, 200])
    expect(events.at(-1)).toMatchObject({ type: "HANGUP", by: "agent" })
    expect(await hangupRow(row.id)).toMatchObject({ hangup_state: null, hangup_failures: 0 })
    expect(await failures("hangup")).toBe(before)
    expect(lines.filter((l) => l.level >= 40)).toEqual([])
  })

  it("answered 500 every time: the leg ends; the call is marked, logged, counted, and swept", async () => {
    const { leg, raw, events } = await liveLeg()
    const sid = raw.providerCallId
    const [hangupBefore, sweepBefore, sweptBefore] = [await failures("hangup"), await failures("sweep"), await swept()]
    lines.length = 0
    fake.failNext(500, 3)
    await leg.hangup() // never rejects: the failure is recorded instead
    expect(hangups(sid)).toEqual([500, 500, 500])
    expect(events.at(-1)).toMatchObject({ type: "HANGUP", by: "agent" })
    expect(await hangupRow(row.id)).toEqual({
      hangup_state: "pending",
      hangup_failures: 1,
      hangup_error: "http_500",
      provider_call_id: sid,
    })
    expect(lines).toEqual([
      expect.objectContaining({
        level: 50,
        call_id: row.id,
        run_id: row.run_id,
        tenant_id: row.tenant_id,
        provider: "telco_a",
        provider_call_id: sid,
        code: "http_500",
        reason: "hangup",
      }),
    ])
    expect(JSON.stringify(lines)).not.toContain(account.token)
    expect(await failures("hangup")).toBe(hangupBefore + 1)

    // The sweep a minute later: still refused, so it stays pending, is reported and counted.
    const sweep = (asOf: number, o: { giveUpAfterMs?: number } = {}) =>
      sweepHangups({ sql: srv.sql, log, telephonyFor: async () => telco }, { asOf: new Date(asOf), ...o })
    lines.length = 0
    fake.failNext(500, 3)
    await sweep(Date.now() + 60_000)
    expect(hangups(sid)).toEqual([500, 500, 500, 500, 500, 500])
    expect(await hangupRow(row.id)).toMatchObject({ hangup_state: "pending", hangup_failures: 2 })
    expect(await failures("sweep")).toBe(sweepBefore + 1)
    expect(lines).toEqual([
      expect.objectContaining({ level: 40, call_id: row.id, provider_call_id: sid, code: "http_500", failures: 2 }),
    ])
    // Not due again until its retry time: a pass before it tries nothing.
    await sweep(Date.now() + 61_000)
    expect(hangups(sid)).toHaveLength(6)

    // The next pass: the carrier takes it.
    lines.length = 0
    await sweep(Date.now() + 120_000)
    expect(hangups(sid).at(-1)).toBe(200)
    expect(await hangupRow(row.id)).toMatchObject({ hangup_state: "swept", hangup_failures: 2 })
    expect(await swept()).toBe(sweptBefore + 1)
    expect(lines).toEqual([expect.objectContaining({ level: 30, call_id: row.id, provider_call_id: sid })])
  })

  it("the sweep gives up past its limit, and says the call may have stayed up", async () => {
    const { leg, raw } = await liveLeg()
    fake.failNext(500, 3)
    await leg.hangup()
    expect(await hangupRow(row.id)).toMatchObject({ hangup_state: "pending", provider_call_id: raw.providerCallId })
    const givenUp = await failures("given_up")
    lines.length = 0
    fake.failNext(500, 3)
    await sweepHangups(
      { sql: srv.sql, log, telephonyFor: async () => telco },
      { asOf: new Date(Date.now() + 60_000), giveUpAfterMs: 0 },
    )
    expect(await hangupRow(row.id)).toMatchObject({ hangup_state: "abandoned", hangup_error: "http_500" })
    expect(await failures("given_up")).toBe(givenUp + 1)
    expect(lines).toEqual([expect.objectContaining({ level: 50, call_id: row.id, code: "http_500" })])
  })
})
