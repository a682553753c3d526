// Phone numbers: the telco_a adapter against the fake telco (request shapes, webhooks wired and
// unwired, retries, refusals), the sim inventory through the API (limits, shape), provision /
// list / release with the database and the wallet, the monthly rental, scopes, byok import
// (refused for bundled), the byok account seam, and tenant isolation.
import { Effect, Either } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { NUMBER_MONTHLY_MINOR } from "../../src/billing/pricing.js"
import type { AppServices } from "../../src/main/app.layer.js"
import {
  accountFor,
  importNumber,
  NumberAccounts,
  provisionNumber,
  releaseNumber,
  type TelcoAccountResolver,
} from "../../src/numbers/numbers.service.js"
import { renewDueNumbers } from "../../src/numbers/rental.service.js"
import { NumberInventoryError } from "../../src/providers/telephony/numbers.interface.js"
import { makeSimNumbers } from "../../src/providers/telephony/sim.numbers.js"
import { makeTelcoANumbers } from "../../src/providers/telephony/telco-a.numbers.js"
import { api, type Session } from "../support/clients.js"
import { type FakeTelco, type FakeTelcoAccount, startFakeTelco } from "../support/fake-telco.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

const webhooks = {
  voiceUrl: "https://parley.example/voice/telco_a/incoming?tenant_id=7",
  statusUrl: "https://parley.example/api/telco_a/status?tenant_id=7",
}

async function failure(p: Promise<unknown>): Promise<NumberInventoryError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  )
  expect(e).toBeInstanceOf(NumberInventoryError)
  return e as NumberInventoryError
}

async function body<T>(res: Response, status = 200): Promise<T> {
  const b = await res.json()
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${JSON.stringify(b)}`)
  return b as T
}

const errorOf = async (res: Response) => ({
  status: res.status,
  ...((await res.json()) as { code: string; field?: string }),
})

interface NumberBody {
  id: number
  phone_e164: string
  country: string
  source: string
  provider: string
  provider_number_id: string
  account: string
  status: string
  monthly_cost_minor: number
  currency: string
  workflow_id: number | null
  voice_url: string
  status_url: string
  next_charge_at: string | null
  released_at: string | null
}

// ---------------------------------------------------------------------------------------------

describe("telco_a numbers adapter (fake telco)", () => {
  let fake: FakeTelco
  let acct: FakeTelcoAccount
  beforeAll(async () => {
    fake = await startFakeTelco()
    acct = fake.addAccount()
  })
  afterAll(async () => fake?.close())
  const client = (a: FakeTelcoAccount = acct, timeoutMs?: number) =>
    makeTelcoANumbers(
      { apiUrl: `${fake.url}/`, accountSid: a.sid, authToken: a.token },
      timeoutMs === undefined ? {} : { timeoutMs },
    )

  it("searches local numbers with AreaCode and PageSize, Basic sid:token, and maps the offers", async () => {
    fake.reset()
    const found = await client().search({ country: "us", areaCode: "212", limit: 3 })
    expect(found).toHaveLength(3)
    expect(found[0]).toEqual({
      phone_e164: "+12125550200",
      country: "US",
      region: "NY",
      locality: "New York",
      capabilities: { voice: true, sms: true },
    })
    expect(found.every((n) => n.phone_e164.startsWith("+1212"))).toBe(true)
    const [req] = fake.requests
    expect(req!.method).toBe("GET")
    expect(req!.resource).toBe("/AvailablePhoneNumbers/US/Local.json")
    expect(req!.path.startsWith(`/2010-04-01/Accounts/${acct.sid}/`)).toBe(true)
    expect(req!.query).toEqual({ PageSize: "3", AreaCode: "212" })
    expect(req!.headers.authorization).toBe(`Basic ${Buffer.from(`${acct.sid}:${acct.token}`).toString("base64")}`)
  })

  it("answers an empty list for a country telco_a sells nothing in", async () => {
    expect(await client().search({ country: "ZZ", limit: 5 })).toEqual([])
  })

  it("buys a number with the voice and status webhooks set, form-encoded", async () => {
    fake.reset()
    const { providerNumberId } = await client().provision({ phoneE164: "+14155550201", ...webhooks })
    expect(providerNumberId).toMatch(/^PN/)
    const [req] = fake.requests
    expect(req!.method).toBe("POST")
    expect(req!.resource).toBe("/IncomingPhoneNumbers.json")
    expect(req!.headers["content-type"]).toContain("application/x-www-form-urlencoded")
    expect(req!.form).toEqual({
      PhoneNumber: "+14155550201",
      VoiceUrl: webhooks.voiceUrl,
      VoiceMethod: "POST",
      StatusCallback: webhooks.statusUrl,
      StatusCallbackMethod: "POST",
    })
    expect(fake.numbers.get(providerNumberId)).toMatchObject({
      account_sid: acct.sid,
      phone_number: "+14155550201",
      voice_url: webhooks.voiceUrl,
      status_callback: webhooks.statusUrl,
    })
    // Sold: no longer offered.
    expect(
      (await client().search({ country: "US", areaCode: "415", limit: 50 })).map((n) => n.phone_e164),
    ).not.toContain("+14155550201")
  })

  it("refuses a number that is not for sale as not_available, without retrying", async () => {
    fake.reset()
    const e = await failure(client().provision({ phoneE164: "+14155559999", ...webhooks }))
    expect(e.reason).toBe("not_available")
    expect(e.retryable).toBe(false)
    // The purchase, then the look-up of whether the account owns it already.
    expect(fake.requests.map((r) => `${r.method} ${r.resource}`)).toEqual([
      "POST /IncomingPhoneNumbers.json",
      "GET /IncomingPhoneNumbers.json",
    ])
  })

  it("retries 5xx and takes over the number when a timed-out purchase went through", async () => {
    fake.reset()
    fake.failNext(503, 2)
    const first = await client().provision({ phoneE164: "+14155550202", ...webhooks })
    expect(fake.requests.filter((r) => r.method === "POST")).toHaveLength(3)
    expect(fake.numbers.get(first.providerNumberId)?.phone_number).toBe("+14155550202")

    fake.reset()
    fake.delayNext(1_500)
    const second = await client(acct, 300).provision({ phoneE164: "+14155550203", ...webhooks })
    const owned = fake.ownedByPhone("+14155550203")!
    expect(second.providerNumberId).toBe(owned.sid)
    expect(owned.voice_url).toBe(webhooks.voiceUrl)
  })

  it("reports refused credentials as unauthorised and never puts the token in a message", async () => {
    const e = await failure(client({ sid: acct.sid, token: "wrong-token-value" }).search({ country: "US", limit: 1 }))
    expect(e.reason).toBe("unauthorised")
    expect(e.message).not.toContain("wrong-token-value")
    fake.failNext(500, 3, { body: { code: 20500, message: `boom ${acct.token}` } })
    const boom = await failure(client().search({ country: "US", limit: 1 }))
    expect(boom.retryable).toBe(true)
    expect(boom.message).not.toContain(acct.token)
  })

  it("registers an owned number (look-up, then its webhooks set) and refuses one the account lacks", async () => {
    const owner = fake.addAccount()
    const own = fake.own(owner.sid, "+13125550100", { voice_url: "https://old.example/voice" })
    fake.reset()
    const { providerNumberId } = await client(owner).registerOwned({ phoneE164: "+13125550100", ...webhooks })
    expect(providerNumberId).toBe(own.sid)
    expect(fake.requests.map((r) => `${r.method} ${r.resource}`)).toEqual([
      "GET /IncomingPhoneNumbers.json",
      `POST /IncomingPhoneNumbers/${own.sid}.json`,
    ])
    expect(fake.requests[0]!.query).toEqual({ PhoneNumber: "+13125550100" })
    expect(fake.requests[1]!.form).toMatchObject({
      VoiceUrl: webhooks.voiceUrl,
      VoiceMethod: "POST",
      StatusCallback: webhooks.statusUrl,
      StatusCallbackMethod: "POST",
    })
    expect(own.voice_url).toBe(webhooks.voiceUrl)
    // Another account's number is not this account's to register.
    expect((await failure(client().registerOwned({ phoneE164: "+13125550100", ...webhooks }))).reason).toBe("not_owned")
  })

  it("releases a bought number with DELETE, unwires a kept one, and takes an unknown sid as released", async () => {
    const { providerNumberId } = await client().provision({ phoneE164: "+14155550204", ...webhooks })
    fake.reset()
    await client().release(providerNumberId)
    expect(fake.requests.map((r) => `${r.method} ${r.resource}`)).toEqual([
      `DELETE /IncomingPhoneNumbers/${providerNumberId}.json`,
    ])
    expect(fake.numbers.has(providerNumberId)).toBe(false)
    expect(fake.released.map((n) => n.sid)).toContain(providerNumberId)

    const owner = fake.addAccount()
    const own = fake.own(owner.sid, "+13125550101", {
      voice_url: webhooks.voiceUrl,
      status_callback: webhooks.statusUrl,
    })
    await client(owner).release(own.sid, { keep: true })
    expect(fake.numbers.get(own.sid)).toMatchObject({ account_sid: owner.sid, voice_url: "", status_callback: "" })

    await expect(client().release(providerNumberId)).resolves.toBeUndefined()
  })
})

describe("sim inventory", () => {
  it("is deterministic per country and area code and respects the limit", async () => {
    const sim = makeSimNumbers()
    const us = await sim.search({ country: "US", areaCode: "646", limit: 4 })
    expect(us.map((n) => n.phone_e164)).toEqual(["+16465550100", "+16465550101", "+16465550102", "+16465550103"])
    expect(await sim.search({ country: "US", areaCode: "646", limit: 4 })).toEqual(us)
    const india = await sim.search({ country: "IN", limit: 50 })
    expect(india).toHaveLength(50)
    expect(india.every((n) => n.phone_e164.startsWith("+91") && n.country === "IN")).toBe(true)
    expect(await sim.search({ country: "US", areaCode: "99", limit: 5 })).toEqual([])
    expect(await sim.search({ country: "QQ", limit: 5 })).toEqual([])
  })
})

// ---------------------------------------------------------------------------------------------

describe("numbers API on the sim inventory", () => {
  let srv: TestServer
  let a: ReturnType<typeof api>
  const run = <A, E>(eff: Effect.Effect<A, E, AppServices>) => srv.running.runtime.runPromise(eff)
  beforeAll(async () => {
    srv = await sharedTestServer()
    a = api(srv)
  })
  afterAll(async () => srv?.stop())

  const search = (s: Session | string, b: unknown) =>
    a.call("POST", "/numbers/search", { token: typeof s === "string" ? s : s.token, body: b })
  const provision = (s: Session | string, b?: unknown) =>
    a.call("POST", "/numbers/provision", {
      token: typeof s === "string" ? s : s.token,
      ...(b !== undefined && { body: b }),
    })
  const list = (s: Session | string) => a.call("GET", "/numbers", { token: typeof s === "string" ? s : s.token })
  const balance = async (tenantId: number) =>
    (await srv.sql<[{ b: number }]>`select balance_minor as b from wallets where tenant_id = ${tenantId}`)[0].b
  const rentals = (tenantId: number) => srv.sql<Array<{ amount_minor: number; idempotency_key: string }>>`
    select amount_minor, idempotency_key from ledger_entries
    where tenant_id = ${tenantId} and kind = 'number_rental' order by id`

  it("validates country (2–4 letters), area_code and limit (1–50) with 422", async () => {
    const s = await a.signup({ country: "US" })
    for (const [b, field] of [
      [{ country: "US", limit: 0 }, "limit"],
      [{ country: "US", limit: 51 }, "limit"],
      [{ country: "US", limit: 2.5 }, "limit"],
      [{ country: "US", limit: "10" }, "limit"],
      [{ country: "US" }, "limit"],
      [{ country: "U", limit: 5 }, "country"],
      [{ country: "USAXX", limit: 5 }, "country"],
      [{ limit: 5 }, "country"],
      [{ country: "US", area_code: "4a5", limit: 5 }, "area_code"],
    ] as const) {
      const e = await errorOf(await search(s, b))
      expect(e, JSON.stringify(b)).toMatchObject({ status: 422, code: "VALIDATION_FAILED", field })
    }
    expect((await search(s, { country: "US", limit: 1 })).status).toBe(200)
    expect((await search(s, { country: "US", limit: 50 })).status).toBe(200)
  })

  it("answers the inventory with its shape and the monthly price", async () => {
    const s = await a.signup({ country: "US" })
    const r = await body<{ provider: string; currency: string; numbers: Array<Record<string, unknown>> }>(
      await search(s, { country: "us", area_code: "212", limit: 5 }),
    )
    expect(r.provider).toBe("sim")
    expect(r.currency).toBe("USD")
    expect(r.numbers).toHaveLength(5)
    expect(r.numbers[0]).toEqual({
      phone_e164: "+12125550100",
      country: "US",
      capabilities: { voice: true, sms: true },
      monthly_cost_minor: NUMBER_MONTHLY_MINOR.USD,
    })
    expect(r.numbers.every((n) => String(n.phone_e164).startsWith("+1212555"))).toBe(true)
    const inr = await a.signup({ country: "IN" })
    const ri = await body<{ currency: string; numbers: Array<{ phone_e164: string; monthly_cost_minor: number }> }>(
      await search(inr, { country: "IN", limit: 50 }),
    )
    expect(ri.numbers).toHaveLength(50)
    expect(ri.numbers[0]!.monthly_cost_minor).toBe(NUMBER_MONTHLY_MINOR.INR)
    expect(ri.currency).toBe("INR")
  })

  it("provisions, lists and releases: DB state, webhooks, the first month charged once, rental stopped", async () => {
    const s = await a.signup({ country: "US" })
    const before = await balance(s.tenantId)
    const { numbers: offers } = await body<{ numbers: Array<{ phone_e164: string }> }>(
      await search(s, { country: "US", area_code: "917", limit: 2 }),
    )
    const phone = offers[0]!.phone_e164
    const created = await body<{ number: NumberBody; charged_minor: number }>(
      await provision(s, { phone_number: phone }),
      201,
    )
    expect(created.charged_minor).toBe(NUMBER_MONTHLY_MINOR.USD)
    const n = created.number
    expect(n).toMatchObject({
      phone_e164: phone,
      country: "US",
      source: "provisioned",
      provider: "sim",
      account: "platform",
      status: "active",
      monthly_cost_minor: 115,
      currency: "USD",
      workflow_id: null,
      released_at: null,
    })
    expect(n.provider_number_id).toMatch(/^PNsim/)
    expect(n.voice_url).toBe(`${srv.url}/voice/telco_a/incoming?tenant_id=${s.tenantId}`)
    expect(n.status_url).toBe(`${srv.url}/api/telco_a/status?tenant_id=${s.tenantId}`)
    expect(n.next_charge_at).not.toBeNull()

    const [row] = await srv.sql<
      [
        {
          tenant_id: number
          status: string
          source: string
          provider: string
          provider_number_id: string
          monthly_cost_minor: number
        },
      ]
    >`
      select tenant_id, status, source, provider, provider_number_id, monthly_cost_minor
      from phone_numbers where id = ${n.id}`
    expect(row).toEqual({
      tenant_id: s.tenantId,
      status: "active",
      source: "provisioned",
      provider: "sim",
      provider_number_id: n.provider_number_id,
      monthly_cost_minor: 115,
    })
    expect(await balance(s.tenantId)).toBe(before - 115)
    expect(await rentals(s.tenantId)).toHaveLength(1)

    const listed = await body<{ numbers: NumberBody[] }>(await list(s))
    expect(listed.numbers.map((x) => x.id)).toEqual([n.id])
    // A number held is no longer offered, to anyone.
    const other = await a.signup({ country: "US" })
    const again = await body<{ numbers: Array<{ phone_e164: string }> }>(
      await search(other, { country: "US", area_code: "917", limit: 2 }),
    )
    expect(again.numbers.map((x) => x.phone_e164)).not.toContain(phone)
    expect(again.numbers).toHaveLength(2)
    // ... nor can it be provisioned by another workspace while active.
    expect(await errorOf(await provision(other, { phone_number: phone }))).toMatchObject({
      status: 409,
      code: "NUMBER_UNAVAILABLE",
    })

    // A month later the renewal charges the next month once, however often it runs.
    await srv.sql`update phone_numbers
      set current_period_end = now() - interval '1 minute', rent_due_at = now() - interval '1 minute'
      where id = ${n.id}`
    expect(await run(renewDueNumbers)).toBeGreaterThanOrEqual(1)
    await run(renewDueNumbers)
    expect(await rentals(s.tenantId)).toHaveLength(2)
    expect(await balance(s.tenantId)).toBe(before - 230)

    // Release (admin): released, and the rental stops.
    const key = await a.createKey(s, { name: "admin", scope: "admin" })
    const released = await body<{ released: true; number: NumberBody }>(
      await a.call("DELETE", `/numbers/${n.id}`, { token: key.secret }),
    )
    expect(released.number).toMatchObject({ id: n.id, status: "released", next_charge_at: null })
    expect(released.number.released_at).not.toBeNull()
    const [after] = await srv.sql<
      [{ status: string; released_at: Date | null; rent_due_at: Date | null }]
    >`select status, released_at, rent_due_at from phone_numbers where id = ${n.id}`
    expect(after.status).toBe("released")
    expect(after.released_at).not.toBeNull()
    await srv.sql`update phone_numbers
      set current_period_end = now() - interval '1 minute', rent_due_at = now() - interval '1 minute'
      where id = ${n.id}`
    await run(renewDueNumbers)
    expect(await rentals(s.tenantId)).toHaveLength(2)

    // Released numbers can be bought again, by anyone.
    expect((await provision(other, { phone_number: phone })).status).toBe(201)
  })

  it("release is idempotent on both paths and admin-only", async () => {
    const s = await a.signup({ country: "US" })
    const { number } = await body<{ number: NumberBody }>(await provision(s, { country: "US", area_code: "312" }), 201)
    expect(number.phone_e164.startsWith("+1312555")).toBe(true)
    const write = await a.createKey(s, { name: "w", scope: "write" })
    const read = await a.createKey(s, { name: "r", scope: "read" })
    const admin = await a.createKey(s, { name: "a", scope: "admin" })
    expect(await errorOf(await a.call("DELETE", `/numbers/${number.id}`, { token: write.secret }))).toMatchObject({
      status: 403,
    })
    expect(await errorOf(await a.call("POST", `/numbers/${number.id}/release`, { token: write.secret }))).toMatchObject(
      { status: 403 },
    )
    // read keys list, write keys search and provision.
    expect((await list(read.secret)).status).toBe(200)
    expect((await search(read.secret, { country: "US", limit: 1 })).status).toBe(403)
    expect((await search(write.secret, { country: "US", limit: 1 })).status).toBe(200)
    expect((await a.call("GET", "/numbers", {})).status).toBe(401)

    const first = await body<{ number: NumberBody }>(
      await a.call("POST", `/numbers/${number.id}/release`, { token: admin.secret }),
    )
    const second = await body<{ number: NumberBody }>(
      await a.call("DELETE", `/numbers/${number.id}`, { token: admin.secret }),
    )
    const third = await body<{ number: NumberBody }>(
      await a.call("POST", `/v1/numbers/${number.id}/release`, { token: s.token }),
    )
    expect(second.number).toEqual(first.number)
    expect(third.number).toEqual(first.number)
    const [{ n }] = await srv.sql<
      [{ n: number }]
    >`select count(*)::int as n from phone_numbers where tenant_id = ${s.tenantId}`
    expect(n).toBe(1)
  })

  it("provisions the first free offer when no number is given, and refuses what the wallet cannot pay", async () => {
    const s = await a.signup({ country: "US" })
    const one = await body<{ number: NumberBody }>(await provision(s), 201)
    const two = await body<{ number: NumberBody }>(await provision(s, {}), 201)
    expect(one.number.phone_e164).toMatch(/^\+141555501\d\d$/)
    expect(two.number.phone_e164).not.toBe(one.number.phone_e164)

    // INR: the trial credit does not cover a month; nothing is bought or kept.
    const inr = await a.signup({ country: "IN" })
    const before = await balance(inr.tenantId)
    expect(before).toBeLessThan(NUMBER_MONTHLY_MINOR.INR)
    expect(await errorOf(await provision(inr))).toMatchObject({ status: 402, code: "INSUFFICIENT_FUNDS" })
    const [{ c }] = await srv.sql<
      [{ c: number }]
    >`select count(*)::int as c from phone_numbers where tenant_id = ${inr.tenantId}`
    expect(c).toBe(0)
    expect(await balance(inr.tenantId)).toBe(before)
  })

  it("answers 422 for a bad phone number and 404 for another workspace's workflow", async () => {
    const s = await a.signup({ country: "US" })
    expect(await errorOf(await provision(s, { phone_number: "12" }))).toMatchObject({
      status: 422,
      field: "phone_number",
    })
    expect(await errorOf(await provision(s, { workflow_id: 0 }))).toMatchObject({ status: 422, field: "workflow_id" })
    const other = await a.signup({ country: "US" })
    const [wf] = await srv.sql<[{ id: number }]>`
      insert into workflows (tenant_id, name, persona, nl_prompt)
      values (${other.tenantId}, 'theirs', 'amelia', 'p') returning id`
    expect(await errorOf(await provision(s, { workflow_id: wf.id }))).toMatchObject({ status: 404, code: "NOT_FOUND" })
    const [mine] = await srv.sql<[{ id: number }]>`
      insert into workflows (tenant_id, name, persona, nl_prompt)
      values (${s.tenantId}, 'mine', 'amelia', 'p') returning id`
    const { number } = await body<{ number: NumberBody }>(await provision(s, { workflow_id: mine.id }), 201)
    expect(number.workflow_id).toBe(mine.id)
  })

  it("refuses import for bundled workspaces, and for byok ones without a telco_a credential", async () => {
    const s = await a.signup({ country: "US" })
    expect(
      await errorOf(
        await a.call("POST", "/numbers/import", { token: s.token, body: { phone_number: "+13125550142" } }),
      ),
    ).toMatchObject({ status: 409, code: "BYOK_REQUIRED" })
    expect(await errorOf(await a.call("POST", "/numbers/import", { token: s.token, body: {} }))).toMatchObject({
      status: 422,
      field: "phone_number",
    })
    await srv.sql`update tenants set onboarding_mode = 'byok' where id = ${s.tenantId}`
    expect(
      await errorOf(
        await a.call("POST", "/numbers/import", { token: s.token, body: { phone_number: "(312) 555-0142" } }),
      ),
    ).toMatchObject({ status: 409, code: "CREDENTIAL_MISSING" })
    const [{ n }] = await srv.sql<
      [{ n: number }]
    >`select count(*)::int as n from phone_numbers where tenant_id = ${s.tenantId}`
    expect(n).toBe(0)
  })

  it("keeps workspaces apart: another tenant's number is 404 and never listed", async () => {
    const owner = await a.signup({ country: "US" })
    const stranger = await a.signup({ country: "US" })
    const { number } = await body<{ number: NumberBody }>(await provision(owner), 201)
    expect((await body<{ numbers: NumberBody[] }>(await list(stranger))).numbers).toEqual([])
    expect(await errorOf(await a.call("DELETE", `/numbers/${number.id}`, { token: stranger.token }))).toMatchObject({
      status: 404,
      code: "NOT_FOUND",
    })
    expect(
      await errorOf(await a.call("POST", `/numbers/${number.id}/release`, { token: stranger.token })),
    ).toMatchObject({ status: 404, code: "NOT_FOUND" })
    expect(await errorOf(await a.call("DELETE", `/numbers/99999999`, { token: owner.token }))).toMatchObject({
      status: 404,
    })
    const [row] = await srv.sql<[{ status: string }]>`select status from phone_numbers where id = ${number.id}`
    expect(row.status).toBe("active")
  })
})

// ---------------------------------------------------------------------------------------------

describe("numbers on telco_a accounts (fake telco)", () => {
  let srv: TestServer
  let fake: FakeTelco
  let platform: FakeTelcoAccount
  let a: ReturnType<typeof api>
  const BASE = "https://parley.example"
  const run = <A, E>(eff: Effect.Effect<A, E, AppServices>, byok?: TelcoAccountResolver) =>
    srv.running.runtime.runPromise(
      Effect.either(byok === undefined ? eff : Effect.provideService(eff, NumberAccounts, { byokTelcoA: byok })),
    )
  beforeAll(async () => {
    fake = await startFakeTelco()
    platform = fake.addAccount()
    srv = await sharedTestServer({
      env: {
        TELCO_A_API_URL: fake.url,
        TELCO_A_ACCOUNT_SID: platform.sid,
        TELCO_A_AUTH_TOKEN: platform.token,
        PUBLIC_BASE_URL: BASE,
      },
    })
    a = api(srv)
  })
  afterAll(async () => {
    await srv?.stop()
    await fake?.close()
  })

  it(
    "bundled: searches and buys on the platform account with the webhooks wired, " + "and release gives it back",
    async () => {
      const s = await a.signup({ country: "US" })
      const found = await body<{ provider: string; numbers: Array<{ phone_e164: string; locality?: string }> }>(
        await a.call("POST", "/numbers/search", {
          token: s.token,
          body: { country: "US", area_code: "415", limit: 3 },
        }),
      )
      expect(found.provider).toBe("telco_a")
      expect(found.numbers.map((n) => n.phone_e164)).toEqual(["+14155550200", "+14155550201", "+14155550202"])
      expect(found.numbers[0]!.locality).toBe("San Francisco")

      fake.reset()
      const { number } = await body<{ number: NumberBody }>(
        await a.call("POST", "/numbers/provision", { token: s.token, body: { phone_number: "+14155550201" } }),
        201,
      )
      const buy = fake.requests.find((r) => r.method === "POST" && r.resource === "/IncomingPhoneNumbers.json")!
      expect(buy.accountSid).toBe(platform.sid)
      expect(buy.form).toEqual({
        PhoneNumber: "+14155550201",
        VoiceUrl: `${BASE}/voice/telco_a/incoming?tenant_id=${s.tenantId}`,
        VoiceMethod: "POST",
        StatusCallback: `${BASE}/api/telco_a/status?tenant_id=${s.tenantId}`,
        StatusCallbackMethod: "POST",
      })
      const owned = fake.ownedByPhone("+14155550201")!
      expect(number).toMatchObject({
        provider: "telco_a",
        account: "platform",
        source: "provisioned",
        status: "active",
        provider_number_id: owned.sid,
        monthly_cost_minor: 115,
      })
      expect(owned.voice_url).toBe(`${BASE}/voice/telco_a/incoming?tenant_id=${s.tenantId}`)

      fake.reset()
      const rel = await body<{ number: NumberBody }>(
        await a.call("DELETE", `/numbers/${number.id}`, { token: s.token }),
      )
      expect(rel.number.status).toBe("released")
      expect(fake.requests.map((r) => `${r.method} ${r.resource}`)).toEqual([
        `DELETE /IncomingPhoneNumbers/${owned.sid}.json`,
      ])
      expect(fake.numbers.has(owned.sid)).toBe(false)
      // Idempotent: no second call to the provider.
      fake.reset()
      expect((await a.call("POST", `/numbers/${number.id}/release`, { token: s.token })).status).toBe(200)
      expect(fake.requests).toHaveLength(0)
    },
  )

  it("maps provider failures: not for sale → 409, telco down → 502 with nothing kept or charged", async () => {
    const s = await a.signup({ country: "US" })
    const before = (
      await srv.sql<[{ b: number }]>`select balance_minor as b from wallets where tenant_id = ${s.tenantId}`
    )[0].b
    expect(
      await errorOf(
        await a.call("POST", "/numbers/provision", { token: s.token, body: { phone_number: "+14155559876" } }),
      ),
    ).toMatchObject({ status: 409, code: "NUMBER_UNAVAILABLE" })
    fake.failNext(503, 3)
    expect(
      await errorOf(
        await a.call("POST", "/numbers/provision", { token: s.token, body: { phone_number: "+12125550205" } }),
      ),
    ).toMatchObject({ status: 502, code: "GATEWAY_UNAVAILABLE" })
    const [{ c }] = await srv.sql<
      [{ c: number }]
    >`select count(*)::int as c from phone_numbers where tenant_id = ${s.tenantId}`
    expect(c).toBe(0)
    expect(
      (await srv.sql<[{ b: number }]>`select balance_minor as b from wallets where tenant_id = ${s.tenantId}`)[0].b,
    ).toBe(before)
  })

  it(
    "byok: the injected resolver picks the workspace's own account; " + "import registers and release only unwires",
    async () => {
      const s = await a.signup({ country: "US" })
      await srv.sql`update tenants set onboarding_mode = 'byok' where id = ${s.tenantId}`
      const own = fake.addAccount()
      const mine = fake.own(own.sid, "+16175550100")
      const resolver: TelcoAccountResolver = async (tenantId) =>
        tenantId === s.tenantId ? { sid: own.sid, token: own.token, apiUrl: fake.url } : undefined

      const account = await run(accountFor({ id: s.tenantId, onboarding_mode: "byok" }), resolver)
      expect(Either.isRight(account) && account.right).toMatchObject({ owner: "tenant", ref: own.sid })
      const missing = await run(accountFor({ id: s.tenantId + 1000, onboarding_mode: "byok" }), resolver)
      expect(Either.isLeft(missing) && missing.left).toMatchObject({ _tag: "Conflict", code: "CREDENTIAL_MISSING" })
      // Bundled workspaces keep the platform account whatever the resolver says.
      const bundled = await run(accountFor({ id: s.tenantId, onboarding_mode: "bundled" }), resolver)
      expect(Either.isRight(bundled) && bundled.right).toMatchObject({ owner: "platform", ref: platform.sid })

      fake.reset()
      const imported = await run(
        importNumber(s.tenantId, { phoneNumber: "+16175550100", workflowId: undefined }, BASE),
        resolver,
      )
      if (Either.isLeft(imported)) throw new Error(JSON.stringify(imported.left))
      expect(imported.right.number).toMatchObject({
        source: "imported",
        provider: "telco_a",
        account: "tenant",
        provider_number_id: mine.sid,
        monthly_cost_minor: 0,
      })
      expect(fake.requests.every((r) => r.accountSid === own.sid)).toBe(true)
      expect(mine.voice_url).toBe(`${BASE}/voice/telco_a/incoming?tenant_id=${s.tenantId}`)
      expect(mine.status_callback).toBe(`${BASE}/api/telco_a/status?tenant_id=${s.tenantId}`)

      // Provisioning in byok buys on the workspace's account, and Parley charges nothing.
      const bought = await run(
        provisionNumber(
          s.tenantId,
          { phoneNumber: "+12125550210", country: undefined, areaCode: undefined, workflowId: undefined },
          BASE,
        ),
        resolver,
      )
      if (Either.isLeft(bought)) throw new Error(JSON.stringify(bought.left))
      expect(bought.right.charged_minor).toBe(0)
      expect(fake.ownedByPhone("+12125550210")?.account_sid).toBe(own.sid)

      fake.reset()
      const released = await run(releaseNumber(s.tenantId, imported.right.number.id), resolver)
      expect(Either.isRight(released) && released.right.number.status).toBe("released")
      expect(fake.requests.map((r) => `${r.method} ${r.resource}`)).toEqual([
        `POST /IncomingPhoneNumbers/${mine.sid}.json`,
      ])
      // Still the owner's number, with nothing of ours wired to it.
      expect(fake.numbers.get(mine.sid)).toMatchObject({ account_sid: own.sid, voice_url: "", status_callback: "" })

      // A refused stored credential is the workspace's to fix (409), not a gateway outage.
      const stale: TelcoAccountResolver = async () => ({ sid: own.sid, token: "stale-token", apiUrl: fake.url })
      const refused = await run(
        importNumber(s.tenantId, { phoneNumber: "+16175550100", workflowId: undefined }, BASE),
        stale,
      )
      expect(Either.isLeft(refused) && refused.left).toMatchObject({ _tag: "Conflict", code: "CREDENTIAL_REJECTED" })
    },
  )
})
