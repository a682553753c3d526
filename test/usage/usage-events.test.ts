// POST /api/internal/usage-events: batches stored once per event id, priced kinds charged through
// the ledger exactly once (also under concurrent copies of one batch), never into overdraft;
// unknown kinds recorded and not charged; the 1,000 cap, tenant checks and the system key.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { TRIAL_CREDIT_MINOR, USAGE_PRICES } from "../../src/billing/pricing.js"
import { api, type Session, SYSTEM_KEY } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

let srv: TestServer
let a: ReturnType<typeof api>
beforeAll(async () => {
  srv = await sharedTestServer({ env: { SYSTEM_KEY } })
  a = api(srv)
})
afterAll(async () => srv?.stop())

let seq = 0
const ev = (tenantId: number, over: Json = {}): Json => ({
  event_id: `ev-${process.pid}-${++seq}`,
  tenant_id: tenantId,
  kind: "sms",
  quantity: 1,
  unit: "message",
  at: "2026-11-24T10:00:00Z",
  ...over,
})

async function post(tenantId: number | undefined, events: Json[], key: string | null = SYSTEM_KEY) {
  const res = await fetch(`${srv.url}/api/internal/usage-events`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(key !== null && { "x-system-key": key }),
      ...(tenantId !== undefined && { "x-tenant-id": String(tenantId) }),
    },
    body: JSON.stringify({ events }),
  })
  return { status: res.status, body: (await res.json()) as Json }
}

const balance = async (tenantId: number) =>
  (await srv.sql<[{ b: number }]>`select balance_minor as b from wallets where tenant_id = ${tenantId}`)[0].b
const usageEntries = (tenantId: number) =>
  srv.sql<Array<{ amount_minor: number }>>`
    select amount_minor from ledger_entries where tenant_id = ${tenantId} and kind = 'usage' order by id`

describe("a batch", () => {
  let s: Session
  beforeAll(async () => {
    s = await a.signup({ country: "US", verify: false })
  })

  it("is stored and charged once; a replay answers duplicates and changes nothing", async () => {
    const before = await balance(s.tenantId)
    const events = [
      ev(s.tenantId, { attributes: { to: "+12025550100" } }),
      ev(s.tenantId, { quantity: 3 }),
      ev(s.tenantId, { kind: "llm_tokens", quantity: 1500, unit: "token" }),
    ]
    const first = await post(s.tenantId, events)
    expect(first.status).toBe(201)
    // sms: 1 + 3 messages at $0.01; 1,500 tokens at $0.01 per 1,000, rounded up per event: 2.
    expect(first.body).toEqual({ accepted: 3, duplicates: 0, charged_minor: 6, currency: "USD", unbilled: 0 })
    expect(await balance(s.tenantId)).toBe(before - 6)
    const again = await post(s.tenantId, events)
    expect(again.status).toBe(201)
    expect(again.body).toMatchObject({ accepted: 0, duplicates: 3, charged_minor: 0 })
    expect(await balance(s.tenantId)).toBe(before - 6)
    const rows = await srv.sql<Json[]>`
      select event_id, kind, quantity::float8 as quantity, unit, attributes, billing_status, charged_minor,
        ledger_entry_id is not null as on_ledger
      from usage_events where tenant_id = ${s.tenantId} order by event_id`
    expect(rows).toHaveLength(3)
    expect(rows.map((r) => [r.billing_status, r.charged_minor, r.on_ledger]).sort()).toEqual(
      [
        ["charged", 1, true],
        ["charged", 2, true],
        ["charged", 3, true],
      ].sort(),
    )
    expect(rows.find((r) => r.event_id === events[0]!.event_id)?.attributes).toEqual({ to: "+12025550100" })
  })

  it("counts an event id repeated inside one batch as a duplicate", async () => {
    const e = ev(s.tenantId)
    const r = await post(s.tenantId, [e, { ...e, quantity: 99 }])
    expect(r.body).toMatchObject({ accepted: 1, duplicates: 1, charged_minor: 1 })
  })

  it("records unknown kinds without charging them", async () => {
    const before = await balance(s.tenantId)
    const entries = (await usageEntries(s.tenantId)).length
    const e = ev(s.tenantId, { kind: "api_calls", quantity: 1000, unit: "request" })
    const r = await post(s.tenantId, [e])
    expect(r.body).toEqual({ accepted: 1, duplicates: 0, charged_minor: 0, currency: "USD", unbilled: 0 })
    expect(await balance(s.tenantId)).toBe(before)
    expect(await usageEntries(s.tenantId)).toHaveLength(entries)
    const [row] = await srv.sql<Json[]>`
      select billing_status, billing_reason, charged_minor, ledger_entry_id from usage_events
      where tenant_id = ${s.tenantId} and event_id = ${e.event_id}`
    expect(row).toEqual({ billing_status: "unpriced", billing_reason: null, charged_minor: 0, ledger_entry_id: null })
  })

  it("accepts 1,000 events and refuses 1,001 (422, nothing stored)", async () => {
    const batch = Array.from({ length: 1000 }, () => ev(s.tenantId, { kind: "page_views", unit: "view" }))
    expect((await post(s.tenantId, batch)).body).toMatchObject({ accepted: 1000, duplicates: 0 })
    const over = Array.from({ length: 1001 }, () => ev(s.tenantId, { kind: "page_views", unit: "view" }))
    const r = await post(s.tenantId, over)
    expect(r.status).toBe(422)
    expect(r.body).toMatchObject({ code: "VALIDATION_FAILED" })
    const [{ n }] = await srv.sql<[{ n: number }]>`
      select count(*)::int as n from usage_events where event_id = ${over[0]!.event_id}`
    expect(n).toBe(0)
    expect((await post(s.tenantId, [])).status).toBe(422)
  })

  it("refuses bad events with 422", async () => {
    for (const bad of [
      { quantity: -1 },
      { kind: "SMS!" },
      { at: "yesterday" },
      { event_id: "" },
      { unit: "" },
      { attributes: { big: "x".repeat(5000) } },
    ]) {
      const r = await post(s.tenantId, [ev(s.tenantId, bad)])
      expect(r.status, JSON.stringify(bad).slice(0, 60)).toBe(422)
    }
  })
})

describe("exactly-once charging", () => {
  it("charges each event once when the same batch arrives five times at once", async () => {
    const s = await a.signup({ country: "US", verify: false })
    const before = await balance(s.tenantId)
    const batch = Array.from({ length: 40 }, () => ev(s.tenantId))
    const results = await Promise.all(Array.from({ length: 5 }, () => post(s.tenantId, batch)))
    expect(results.map((r) => r.status)).toEqual([201, 201, 201, 201, 201])
    expect(results.reduce((n, r) => n + r.body.accepted, 0)).toBe(40)
    expect(results.reduce((n, r) => n + r.body.duplicates, 0)).toBe(160)
    expect(results.reduce((n, r) => n + r.body.charged_minor, 0)).toBe(40)
    expect(await balance(s.tenantId)).toBe(before - 40)
    const entries = await usageEntries(s.tenantId)
    expect(entries.reduce((n, e) => n + Number(e.amount_minor), 0)).toBe(-40)
    const [{ n, charged }] = await srv.sql<[{ n: number; charged: number }]>`
      select count(*)::int as n, sum(charged_minor)::int as charged from usage_events where tenant_id = ${s.tenantId}`
    expect({ n, charged }).toEqual({ n: 40, charged: 40 })
  })

  it("charges once when overlapping batches arrive at once in different orders", async () => {
    const s = await a.signup({ country: "US", verify: false })
    const before = await balance(s.tenantId)
    const all = Array.from({ length: 30 }, () => ev(s.tenantId, { quantity: 2 }))
    const batches = [all, [...all].reverse(), all.slice(10, 25), [...all.slice(20), ...all.slice(0, 5)]]
    const results = await Promise.all(batches.map((b) => post(s.tenantId, b)))
    expect(results.map((r) => r.status)).toEqual([201, 201, 201, 201])
    expect(results.reduce((n, r) => n + r.body.accepted, 0)).toBe(30)
    expect(results.reduce((n, r) => n + r.body.charged_minor, 0)).toBe(60)
    expect(await balance(s.tenantId)).toBe(before - 60)
  })

  it("never overdraws: what the balance cannot pay is stored as unbilled (insufficient_funds)", async () => {
    const s = await a.signup({ country: "US", verify: false })
    const credit = TRIAL_CREDIT_MINOR.USD
    const perSms = USAGE_PRICES.sms!.minor.USD
    const big = ev(s.tenantId, { quantity: Math.floor(credit / perSms) - 10 })
    const tooBig = ev(s.tenantId, { quantity: 20 })
    const small = ev(s.tenantId, { quantity: 5 })
    const wrongUnit = ev(s.tenantId, { unit: "segment" })
    const r = await post(s.tenantId, [big, tooBig, small, wrongUnit])
    expect(r.status).toBe(201)
    expect(r.body).toMatchObject({ accepted: 4, charged_minor: credit - 10 * perSms + 5 * perSms, unbilled: 2 })
    expect(await balance(s.tenantId)).toBe(5 * perSms)
    const rows = await srv.sql<Json[]>`
      select event_id, billing_status, billing_reason from usage_events where tenant_id = ${s.tenantId}`
    const by = new Map(rows.map((x) => [x.event_id, [x.billing_status, x.billing_reason]]))
    expect(by.get(big.event_id)).toEqual(["charged", null])
    expect(by.get(tooBig.event_id)).toEqual(["unbilled", "insufficient_funds"])
    expect(by.get(small.event_id)).toEqual(["charged", null])
    expect(by.get(wrongUnit.event_id)).toEqual(["unbilled", "unit_mismatch"])
    // A replay of an unbilled event stays a duplicate: it is not charged later.
    expect((await post(s.tenantId, [tooBig])).body).toMatchObject({ accepted: 0, duplicates: 1, charged_minor: 0 })
  })
})

describe("who may post", () => {
  let s: Session
  let other: Session
  beforeAll(async () => {
    s = await a.signup({ verify: false })
    other = await a.signup({ verify: false })
  })

  it("every event's tenant_id must equal X-Tenant-Id (422, nothing stored)", async () => {
    const mine = ev(s.tenantId)
    const r = await post(s.tenantId, [mine, ev(other.tenantId)])
    expect(r.status).toBe(422)
    expect(r.body).toMatchObject({ code: "VALIDATION_FAILED" })
    expect(JSON.stringify(r.body)).toContain("events[1].tenant_id")
    const [{ n }] = await srv.sql<[{ n: number }]>`
      select count(*)::int as n from usage_events where event_id = ${mine.event_id}`
    expect(n).toBe(0)
  })

  it("X-Tenant-Id is required (422); an unknown workspace is 404", async () => {
    expect((await post(undefined, [ev(s.tenantId)])).status).toBe(422)
    const r = await post(987654321, [ev(987654321)])
    expect(r.status).toBe(404)
    expect(r.body).toMatchObject({ code: "NOT_FOUND" })
  })

  it("requires the system key (401 without it or with a wrong one)", async () => {
    const e = ev(s.tenantId)
    expect((await post(s.tenantId, [e], null)).status).toBe(401)
    expect((await post(s.tenantId, [e], "not-the-key")).status).toBe(401)
    const user = await fetch(`${srv.url}/api/internal/usage-events`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${s.token}` },
      body: JSON.stringify({ events: [e] }),
    })
    expect(user.status).toBe(401)
    const [{ n }] = await srv.sql<[{ n: number }]>`
      select count(*)::int as n from usage_events where event_id = ${e.event_id}`
    expect(n).toBe(0)
  })
})
