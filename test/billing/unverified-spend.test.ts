// Issue 33, hole 3: a workspace whose owner has not verified their email spends nothing and uses none
// of Parley's own provider accounts, whoever asks (session or API key) and whichever provider answers
// (here the simulators): number rentals, numbers wired on the platform's carrier account, outreach
// calls billed to the wallet, voice cloning, and previews past the address's anonymous budget are all
// refused as a run's start is (409 WORKFLOW_NOT_READY, missing [email_verified]) with nothing changed,
// and succeed once the email is verified. Top-ups stay open: they only add money after a payment.
import { Effect, Either } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { AppServices } from "../../src/main/app.layer.js"
import { importNumber, NumberAccounts } from "../../src/numbers/numbers.service.js"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { postClone, wav } from "../voices/fixtures.js"

const SYSTEM_KEY = "system-key-for-unverified-spend-tests"
const ANON_PREVIEWS = 2

let srv: TestServer
let a: ReturnType<typeof api>

beforeAll(async () => {
  srv = await startTestServer({
    env: { ...FAST_RUNTIME_ENV, SYSTEM_KEY, PREVIEWS_ANON_PER_IP_HOUR: String(ANON_PREVIEWS) },
  })
  a = api(srv)
})
afterAll(async () => srv?.stop())

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const send = async (method: string, path: string, token: string | undefined, body?: unknown) => {
  const res = await a.call(method, path, { ...(token !== undefined && { token }), ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

const unverified = (): Promise<Session> => a.signup({ country: "US", verify: false })

/** What a refused request must leave as it was: the wallet and its ledger, numbers, runs, calls, voices. */
async function footprint(tenantId: number) {
  const [row] = await srv.sql<[Json]>`
    select
      (select balance_minor from wallets where tenant_id = ${tenantId})::bigint as balance_minor,
      (select count(*) from ledger_entries where tenant_id = ${tenantId})::int as ledger_entries,
      (select count(*) from phone_numbers where tenant_id = ${tenantId})::int as numbers,
      (select count(*) from runs where tenant_id = ${tenantId})::int as runs,
      (select count(*) from calls where tenant_id = ${tenantId})::int as calls,
      (select count(*) from voice_avatars where tenant_id = ${tenantId})::int as voices`
  return row
}

const REFUSAL = { code: "WORKFLOW_NOT_READY", missing: ["email_verified"] }

describe("POST /numbers/provision", () => {
  it("refuses an unverified workspace (session or API key) and charges nothing; verified, it rents", async () => {
    const s = await unverified()
    const key = await a.createKey(s, { name: "numbers", scope: "write" })
    const before = await footprint(s.tenantId)
    expect(Number(before.balance_minor)).toBeGreaterThan(0)
    for (const token of [s.token, s.token, key.secret]) {
      const r = await send("POST", "/numbers/provision", token, { country: "US" })
      expect(r.status).toBe(409)
      expect(r.body).toMatchObject(REFUSAL)
      expect(r.body.error).toMatch(/verify/)
    }
    expect(await footprint(s.tenantId)).toEqual(before)

    await a.verifyEmail(s.email)
    const ok = await send("POST", "/numbers/provision", key.secret, { country: "US" })
    expect(ok.status).toBe(201)
    expect(ok.body.charged_minor).toBeGreaterThan(0)
    const after = await footprint(s.tenantId)
    expect(after).toMatchObject({ numbers: 1, ledger_entries: before.ledger_entries + 1 })
    expect(Number(after.balance_minor)).toBe(Number(before.balance_minor) - ok.body.charged_minor)
  })
})

describe("importing a number onto the platform's carrier account (no byok credential store)", () => {
  const importOnPlatform = (tenantId: number, phoneNumber: string) =>
    srv.running.runtime.runPromise(
      Effect.either(
        importNumber(tenantId, { phoneNumber, workflowId: undefined }, srv.url).pipe(
          Effect.provideService(NumberAccounts, {}),
        ) as Effect.Effect<{ number: { account: string } }, unknown, AppServices>,
      ),
    )

  it("refuses an unverified byok workspace and wires nothing; verified, it imports", async () => {
    const s = await unverified()
    await srv.sql`update tenants set onboarding_mode = 'byok' where id = ${s.tenantId}`
    const before = await footprint(s.tenantId)
    const refused = await importOnPlatform(s.tenantId, "+13125550177")
    expect(Either.isLeft(refused) && refused.left).toMatchObject({ _tag: "Conflict", code: REFUSAL.code })
    expect(Either.isLeft(refused) && (refused.left as Json).details).toEqual({ missing: ["email_verified"] })
    expect(await footprint(s.tenantId)).toEqual(before)

    await a.verifyEmail(s.email)
    const done = await importOnPlatform(s.tenantId, "+13125550177")
    expect(Either.isRight(done) && done.right.number).toMatchObject({ account: "platform" })
    expect(await footprint(s.tenantId)).toMatchObject({ numbers: 1, ledger_entries: before.ledger_entries })
  })
})

describe("POST /api/internal/outreach/call", () => {
  const outreach = async (tenantId: number, body: Json) => {
    const res = await fetch(`${srv.url}/api/internal/outreach/call`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-system-key": SYSTEM_KEY, "x-tenant-id": String(tenantId) },
      body: JSON.stringify(body),
    })
    return { status: res.status, body: (await res.json()) as Json }
  }

  it("refuses to bill an unverified workspace's trial credit for a call; verified, it queues the call", async () => {
    const s = await unverified()
    const wf = await send("POST", "/api/workflows", s.token, {
      nl_prompt: "Win back lapsed members with a discount of up to $20; book callbacks; escalate when asked.",
    })
    expect(wf.status).toBe(201)
    const attest = await send("PUT", `/api/workflows/${wf.body.id}/compliance`, s.token, {
      consent_attestation_text: "Opted in.",
    })
    expect(attest.status).toBe(200)
    const before = await footprint(s.tenantId)
    const r = await outreach(s.tenantId, { phone: "+12025550105", workflow_id: wf.body.id })
    expect(r.status).toBe(409)
    expect(r.body).toMatchObject(REFUSAL)
    await new Promise((res) => setTimeout(res, 300))
    expect(await footprint(s.tenantId)).toEqual(before)

    await a.verifyEmail(s.email)
    const ok = await outreach(s.tenantId, { phone: "+12025550105", workflow_id: wf.body.id })
    expect(ok.status).toBe(202)
    expect((await footprint(s.tenantId)).runs).toBe(before.runs + 1)
  })
})

describe("POST /api/voice-avatars/clone", () => {
  it("refuses an unverified workspace before reading the sample; verified, it clones", async () => {
    const s = await unverified()
    const sample = { bytes: wav({ hz: 120, seconds: 6 }), filename: "me.wav", type: "audio/wav" }
    const before = await footprint(s.tenantId)
    const refused = await postClone(srv.url, s.token, { name: "Mine", sample })
    expect(refused.status).toBe(409)
    expect(await refused.json()).toMatchObject(REFUSAL)
    expect(await footprint(s.tenantId)).toEqual(before)

    await a.verifyEmail(s.email)
    const ok = await postClone(srv.url, s.token, { name: "Mine", sample })
    expect(ok.status, await ok.clone().text()).toBe(201)
    expect((await footprint(s.tenantId)).voices).toBe(1)
  })
})

describe("POST /api/workflows/preview-opening", () => {
  let n = 0
  const line = () => `Hello from Harbourside Energy, line ${++n} of ${process.pid}-${Date.now()}.`
  const preview = (text: string, token?: string) =>
    send("POST", "/api/workflows/preview-opening", token, { text, persona: "amelia" })
  const clips = async () => (await srv.sql<[{ n: number }]>`select count(*)::int as n from speech_clips`)[0].n

  it("holds an unverified workspace to the address's anonymous budget, then refuses; verified, its own", async () => {
    const s = await unverified()
    await srv.sql`delete from rate_counters where key like 'preview:%'`
    for (let i = 0; i < ANON_PREVIEWS; i++) expect((await preview(line(), s.token)).status).toBe(200)
    // It spent the address's budget: a stranger there is now refused too.
    expect((await preview(line())).status).toBe(429)
    const stored = await clips()
    const refused = await preview(line(), s.token)
    expect(refused.status).toBe(409)
    expect(refused.body).toMatchObject(REFUSAL)
    expect(await clips()).toBe(stored)
    expect(await footprint(s.tenantId)).toMatchObject({ ledger_entries: 1 })

    await a.verifyEmail(s.email)
    expect((await preview(line(), s.token)).status).toBe(200)
    expect(await clips()).toBe(stored + 1)
    // The address's budget is still spent: the verified workspace is counted on its own.
    expect((await preview(line())).status).toBe(429)
  })
})

describe("top-ups", () => {
  it("stay open to an unverified workspace: they only add money after a confirmed payment", async () => {
    const s = await unverified()
    const before = await footprint(s.tenantId)
    const intent = await send("POST", "/billing/topup", s.token, { amount_minor: 50_000 })
    expect(intent.status).toBe(201)
    const settle = await a.call("POST", "/billing/webhooks/stub", {
      body: { external_id: intent.body.external_id, status: "succeeded" },
    })
    expect(settle.status).toBeLessThan(300)
    const after = await footprint(s.tenantId)
    expect(Number(after.balance_minor)).toBe(Number(before.balance_minor) + 50_000)
  })
})
