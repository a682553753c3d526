// Billing through the real server: the wallet view, history and precheck; every row of the
// payment-intent state table on the stub gateway; the real gateway adapters against local fake
// gateways that send signed webhooks back; signature failures; exactly-once credit under 50
// concurrent deliveries; top-up bounds; autocharge; and the usage API the call runtime uses.

import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Auth } from "../../src/auth/Auth.js"
import {
  AUTOCHARGE_MAX_MINOR,
  BYOK_FEE_MINOR,
  RATE_PER_MINUTE_MINOR,
  TOPUP_PRESETS_MINOR,
  TRIAL_CREDIT_MINOR,
} from "../../src/billing/pricing.js"
import { addMonth, renewDueSubscriptions } from "../../src/billing/subscription.service.js"
import { reserveCall, settleCall } from "../../src/billing/usage.service.js"
import { precheck } from "../../src/billing/wallet.service.js"
import type { AppServices } from "../../src/main/app.layer.js"
import { signGeneric } from "../../src/providers/payments/signatures.js"
import { api, type Session } from "../support/clients.js"
import { type FakeGwCard, type FakeGwUpi, startFakeGateways } from "../support/fake-gateways.js"
import { startTestServer, type TestServer } from "../support/harness.js"

const errorOf = async (res: Response) => ({
  status: res.status,
  ...((await res.json()) as { code: string; field?: string }),
})
const run = <A, E>(srv: TestServer, eff: Effect.Effect<A, E, AppServices>) => srv.running.runtime.runPromise(eff)

async function balanceOf(srv: TestServer, tenantId: number): Promise<number> {
  const [w] = await srv.sql<
    [{ balance_minor: number }]
  >`select balance_minor from wallets where tenant_id = ${tenantId}`
  return w.balance_minor
}

async function ledgerAgrees(srv: TestServer, tenantId: number) {
  const [{ sum }] = await srv.sql<
    [{ sum: number }]
  >`select coalesce(sum(amount_minor), 0)::bigint as sum from ledger_entries where tenant_id = ${tenantId}`
  expect(await balanceOf(srv, tenantId)).toBe(sum)
}

describe("on the stub gateway", () => {
  let srv: TestServer
  let a: ReturnType<typeof api>
  beforeAll(async () => {
    srv = await startTestServer({ env: { PAYMENT_WEBHOOK_SECRET: "generic-webhook-secret" } })
    a = api(srv)
  })
  afterAll(async () => srv?.stop())

  const topup = (s: Session, amount: number) =>
    a.call("POST", "/billing/topup", { token: s.token, body: { amount_minor: amount } })
  const stub = (external_id: string, status: string) =>
    a.call("POST", "/billing/webhooks/stub", { body: { external_id, status } })

  it("shows the wallet with every field of the spec", async () => {
    const s = await a.signup({ country: "IN" })
    const w = (await (await a.call("GET", "/billing/balance", { token: s.token })).json()) as any
    expect(w).toMatchObject({
      tenant_id: s.tenantId,
      currency: "INR",
      balance_minor: TRIAL_CREDIT_MINOR.INR,
      plan_tier: "free",
      rate_per_minute_minor: RATE_PER_MINUTE_MINOR.INR,
      minutes_remaining_at_bundled_rate: Math.floor(TRIAL_CREDIT_MINOR.INR / RATE_PER_MINUTE_MINOR.INR),
      autocharge: { enabled: false, threshold_minor: null, amount_minor: null },
      topup_presets_minor: TOPUP_PRESETS_MINOR.INR,
    })
    expect(new Date(w.trial_expires_at).getTime()).toBeGreaterThan(Date.now())
    expect((await a.call("GET", "/billing/balance")).status).toBe(401)
  })

  it("pending → succeeded: the wallet is credited once, only when the webhook confirms", async () => {
    const s = await a.signup({ country: "US" })
    const res = await topup(s, 2500)
    expect(res.status).toBe(201)
    const intent = (await res.json()) as any
    expect(intent).toMatchObject({ amount_minor: 2500, currency: "USD", status: "pending", gateway: "stub" })
    expect(intent.external_id).toMatch(/^stub_/)
    expect(intent.checkout_url).toContain(intent.external_id)
    expect(await balanceOf(srv, s.tenantId)).toBe(TRIAL_CREDIT_MINOR.USD)

    expect(await (await stub(intent.external_id, "succeeded")).json()).toEqual({ received: true, outcome: "credited" })
    expect(await balanceOf(srv, s.tenantId)).toBe(TRIAL_CREDIT_MINOR.USD + 2500)
    expect(await (await stub(intent.external_id, "succeeded")).json()).toEqual({ received: true, outcome: "duplicate" })
    // A later "failed" for a settled intent changes nothing either.
    expect(await (await stub(intent.external_id, "failed")).json()).toEqual({
      received: true,
      outcome: "already_settled",
    })
    expect(await balanceOf(srv, s.tenantId)).toBe(TRIAL_CREDIT_MINOR.USD + 2500)
    const [row] = await srv.sql`select status from payment_intents where id = ${intent.intent_id}`
    expect(row).toEqual({ status: "succeeded" })
    await ledgerAgrees(srv, s.tenantId)
  })

  it("pending → failed: no credit, and a later success does not credit either", async () => {
    const s = await a.signup()
    const intent = (await (await topup(s, 1000)).json()) as any
    expect(await (await stub(intent.external_id, "failed")).json()).toEqual({ received: true, outcome: "failed" })
    expect(await (await stub(intent.external_id, "succeeded")).json()).toEqual({
      received: true,
      outcome: "already_settled",
    })
    expect(await balanceOf(srv, s.tenantId)).toBe(TRIAL_CREDIT_MINOR.USD)
    const [row] = await srv.sql`select status from payment_intents where id = ${intent.intent_id}`
    expect(row).toEqual({ status: "failed" })
  })

  it("credits once when the same webhook arrives 50 times at once", async () => {
    const s = await a.signup()
    const intent = (await (await topup(s, 777)).json()) as any
    const outcomes = await Promise.all(
      Array.from({ length: 50 }, () =>
        stub(intent.external_id, "succeeded").then((r) => r.json() as Promise<{ outcome: string }>),
      ),
    )
    expect(outcomes.filter((o) => o.outcome === "credited")).toHaveLength(1)
    expect(outcomes.filter((o) => o.outcome === "duplicate")).toHaveLength(49)
    expect(await balanceOf(srv, s.tenantId)).toBe(TRIAL_CREDIT_MINOR.USD + 777)
    await ledgerAgrees(srv, s.tenantId)
  })

  it("acknowledges a webhook about an unknown intent without crediting anyone", async () => {
    const res = await stub("stub_nobody", "succeeded")
    expect(await res.json()).toEqual({ received: true, outcome: "unknown_intent" })
    const [ev] = await srv.sql`select outcome, intent_id from payment_events where event_id = 'stub_nobody:succeeded'`
    expect(ev).toEqual({ outcome: "unknown_intent", intent_id: null })
  })

  it("renders the return page with query values escaped", async () => {
    const res = await fetch(
      `${srv.url}/billing/return?status=success&order_id=${encodeURIComponent('<script>alert("x")</script>')}`,
    )
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toMatch(/^text\/html/)
    const html = await res.text()
    expect(html).toContain("Your payment went through")
    expect(html).not.toContain("<script>alert")
    expect(html).toContain("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;")
  })

  it("answers malformed webhooks with 400 and changes nothing", async () => {
    expect(
      (await a.call("POST", "/billing/webhooks/stub", { body: { external_id: "x", status: "maybe" } })).status,
    ).toBe(400)
    expect((await fetch(`${srv.url}/billing/webhooks/stub`, { method: "POST", body: "{nope" })).status).toBe(400)
  })

  it("keeps top-ups within 1 to 10,000,000 minor units", async () => {
    const s = await a.signup()
    for (const bad of [0, -5, 10_000_001, 1.5, "100", null])
      expect(
        await errorOf(await a.call("POST", "/billing/topup", { token: s.token, body: { amount_minor: bad } })),
        String(bad),
      ).toMatchObject({ status: 422, field: "amount_minor" })
    expect(
      await errorOf(
        await a.call("POST", "/billing/topup", {
          token: s.token,
          body: { amount_minor: 10, return_url: "javascript:alert(1)" },
        }),
      ),
    ).toMatchObject({ status: 422, field: "return_url" })
    for (const ok of [1, 10_000_000]) expect((await topup(s, ok)).status).toBe(201)
    const [{ n }] = await srv.sql<
      [{ n: number }]
    >`select count(*)::int as n from payment_intents where tenant_id = ${s.tenantId}`
    expect(n).toBe(2)
  })

  it("settles through the generic payment webhook, signed with X-SVC-Signature", async () => {
    const s = await a.signup()
    const intent = (await (await topup(s, 1200)).json()) as any
    const body = JSON.stringify({
      id: "pay_evt_1",
      external_id: intent.external_id,
      status: "succeeded",
      amount_minor: 1200,
    })
    const t = Math.floor(Date.now() / 1000)
    const send = (sig: string, raw = body) =>
      fetch(`${srv.url}/billing/webhooks/payment`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-svc-signature": sig },
        body: raw,
      })
    expect((await send(signGeneric(body, "wrong secret", t))).status).toBe(401)
    expect((await send(signGeneric(body, "generic-webhook-secret", t - 301))).status).toBe(401)
    expect((await send(signGeneric(body, "generic-webhook-secret", t), body.replace("1200", "9999"))).status).toBe(401)
    expect(await balanceOf(srv, s.tenantId)).toBe(TRIAL_CREDIT_MINOR.USD)
    const ok = await send(signGeneric(body, "generic-webhook-secret", t))
    expect(await ok.json()).toEqual({ received: true, outcome: "credited" })
    expect(await (await send(signGeneric(body, "generic-webhook-secret", t))).json()).toEqual({
      received: true,
      outcome: "duplicate",
    })
    expect(await balanceOf(srv, s.tenantId)).toBe(TRIAL_CREDIT_MINOR.USD + 1200)
  })

  it("lists history newest first within its limits, agreeing with the balance", async () => {
    const s = await a.signup()
    for (const amount of [100, 200, 300])
      await stub(((await (await topup(s, amount)).json()) as any).external_id, "succeeded")
    const h = (await (await a.call("GET", "/billing/history?limit=2", { token: s.token })).json()) as any
    expect(h.entries.map((e: any) => e.amount_minor)).toEqual([300, 200])
    const rest = (await (
      await a.call("GET", `/billing/history?before=${h.next_before}`, { token: s.token })
    ).json()) as any
    expect(rest.entries.map((e: any) => e.kind)).toEqual(["topup", "trial_credit"])
    expect(h.entries[0].balance_after_minor).toBe(await balanceOf(srv, s.tenantId))
    expect(await errorOf(await a.call("GET", "/billing/history?limit=201", { token: s.token }))).toMatchObject({
      status: 422,
      field: "limit",
    })
    expect(await errorOf(await a.call("GET", "/billing/history?limit=0", { token: s.token }))).toMatchObject({
      status: 422,
      field: "limit",
    })
    const other = await a.signup()
    const theirs = (await (await a.call("GET", "/billing/history", { token: other.token })).json()) as any
    expect(theirs.entries).toHaveLength(1)
  })

  it("prechecks: ok, insufficient_funds, trial_expired, account_suspended", async () => {
    const s = await a.signup()
    const check = async (q = "") =>
      (await (await a.call("GET", `/billing/precheck${q}`, { token: s.token })).json()) as any
    expect(await check()).toMatchObject({
      status: "ok",
      expected_seconds: 180,
      required_minor: Math.ceil((180 * RATE_PER_MINUTE_MINOR.USD) / 60),
    })
    expect((await check("?expected_seconds=86400")).status).toBe("insufficient_funds")
    expect((await a.call("GET", "/billing/precheck?expected_seconds=0", { token: s.token })).status).toBe(422)
    await srv.sql`update tenants set trial_expires_at = now() - interval '1 day' where id = ${s.tenantId}`
    expect((await check()).status).toBe("trial_expired")
    // A workspace that has paid keeps spending after the trial ends.
    await stub(((await (await topup(s, 500)).json()) as any).external_id, "succeeded")
    expect((await check()).status).toBe("ok")
    // A suspended workspace: the runtime's precheck before dialing says so ...
    await srv.sql`update tenants set status = 'suspended' where id = ${s.tenantId}`
    expect(await run(srv, precheck(s.tenantId, 180))).toMatchObject({ status: "account_suspended" })
    // ... and over HTTP its credentials are refused outright once the auth cache hears of it.
    await run(
      srv,
      Effect.flatMap(Auth, (auth) => Effect.promise(() => auth.invalidate({ kind: "user", userId: s.userId }))),
    )
    expect(await errorOf(await a.call("GET", "/billing/precheck", { token: s.token }))).toMatchObject({
      status: 403,
      code: "ACCOUNT_INACTIVE",
    })
  })

  describe("usage API", () => {
    it("reserves before dialing, settles connected seconds, releases the rest, idempotently", async () => {
      const s = await a.signup({ country: "US" })
      const start = await balanceOf(srv, s.tenantId)
      const held = await run(srv, reserveCall(s.tenantId, "call-1", 180))
      expect(held).toMatchObject({
        call_ref: "call-1",
        reserved_minor: Math.ceil((180 * RATE_PER_MINUTE_MINOR.USD) / 60),
      })
      expect(await srv.sql`select status from usage_reservations where call_ref = 'call-1'`).toEqual([
        { status: "reserved" },
      ])
      expect(await balanceOf(srv, s.tenantId)).toBe(start - held.reserved_minor)
      expect(await run(srv, reserveCall(s.tenantId, "call-1", 180))).toMatchObject({
        reserved_minor: held.reserved_minor,
      })
      expect(await balanceOf(srv, s.tenantId)).toBe(start - held.reserved_minor)
      const settled = await run(srv, settleCall("call-1", 61))
      const cost = Math.ceil((61 * RATE_PER_MINUTE_MINOR.USD) / 60)
      expect(settled).toMatchObject({ status: "settled", settled_minor: cost })
      expect(await balanceOf(srv, s.tenantId)).toBe(start - cost)
      await run(srv, settleCall("call-1", 61))
      expect(await balanceOf(srv, s.tenantId)).toBe(start - cost)
      await run(srv, reserveCall(s.tenantId, "call-2", 60))
      expect(await run(srv, settleCall("call-2", 0))).toMatchObject({ status: "released", settled_minor: 0 })
      expect(await balanceOf(srv, s.tenantId)).toBe(start - cost)
      await ledgerAgrees(srv, s.tenantId)
    })

    it("refuses to overdraw: a reservation the wallet can't pay fails and changes nothing", async () => {
      const s = await a.signup({ country: "US" })
      const start = await balanceOf(srv, s.tenantId)
      const exit = await srv.running.runtime.runPromiseExit(reserveCall(s.tenantId, "too-long", 86_400))
      expect(exit._tag).toBe("Failure")
      expect(JSON.stringify(exit)).toContain("InsufficientFunds")
      expect(await balanceOf(srv, s.tenantId)).toBe(start)
      expect(await srv.sql`select 1 from usage_reservations where call_ref = 'too-long'`).toHaveLength(0)
    })

    it("never overdraws under concurrent reservations", async () => {
      const s = await a.signup({ country: "US" })
      const start = await balanceOf(srv, s.tenantId)
      const exits = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          srv.running.runtime.runPromiseExit(reserveCall(s.tenantId, `race-${s.tenantId}-${i}`, 60)),
        ),
      )
      const ok = exits.filter((e) => e._tag === "Success").length
      const per = Math.ceil((60 * RATE_PER_MINUTE_MINOR.USD) / 60)
      expect(ok).toBe(Math.min(20, Math.floor(start / per)))
      expect(await balanceOf(srv, s.tenantId)).toBe(start - ok * per)
      await ledgerAgrees(srv, s.tenantId)
    })
  })

  describe("autocharge", () => {
    /** A stub top-up that saves its (stand-in) method, settled by the stub webhook. */
    const saveStubMethod = async (s: Session, amount = 1000) => {
      const intent = (await (
        await a.call("POST", "/billing/topup", {
          token: s.token,
          body: { amount_minor: amount, save_payment_method: true },
        })
      ).json()) as any
      expect(await (await stub(intent.external_id, "succeeded")).json()).toEqual({
        received: true,
        outcome: "credited",
      })
    }

    it("needs a saved method, and keeps amount and threshold within their caps", async () => {
      const s = await a.signup({ country: "US" })
      expect(
        await errorOf(await a.call("PUT", "/billing/autocharge", { token: s.token, body: { enabled: true } })),
      ).toMatchObject({ status: 422, field: "threshold_minor" })
      expect(
        (
          await a.call("POST", "/billing/autocharge", {
            token: s.token,
            body: { enabled: true, threshold_minor: 100, amount_minor: 0 },
          })
        ).status,
      ).toBe(422)
      expect(
        await errorOf(
          await a.call("PUT", "/billing/autocharge", {
            token: s.token,
            body: { enabled: true, threshold_minor: 100, amount_minor: 1000 },
          }),
        ),
      ).toMatchObject({
        status: 409,
        code: "PAYMENT_METHOD_REQUIRED",
      })
      await saveStubMethod(s)
      const max = AUTOCHARGE_MAX_MINOR.USD
      expect(
        await errorOf(
          await a.call("PUT", "/billing/autocharge", {
            token: s.token,
            body: { enabled: true, threshold_minor: 100, amount_minor: max + 1 },
          }),
        ),
      ).toMatchObject({ status: 422, code: "VALIDATION_FAILED", field: "amount_minor" })
      expect(
        await errorOf(
          await a.call("PUT", "/billing/autocharge", {
            token: s.token,
            body: { enabled: true, threshold_minor: max + 1, amount_minor: 1000 },
          }),
        ),
      ).toMatchObject({ status: 422, field: "threshold_minor" })
      expect(
        await errorOf(
          await a.call("PUT", "/billing/autocharge", {
            token: s.token,
            body: { enabled: true, threshold_minor: 100, amount_minor: 999 },
          }),
        ),
      ).toMatchObject({ status: 422, field: "amount_minor" })
      const ok = await a.call("POST", "/billing/autocharge", {
        token: s.token,
        body: { enabled: true, threshold_minor: 100, amount_minor: 1000 },
      })
      expect(await ok.json()).toEqual({ autocharge: { enabled: true, threshold_minor: 100, amount_minor: 1000 } })
      const w = (await (await a.call("GET", "/billing/balance", { token: s.token })).json()) as any
      expect(w.autocharge).toEqual({ enabled: true, threshold_minor: 100, amount_minor: 1000 })
      const methods = (await (await a.call("GET", "/billing/payment-methods", { token: s.token })).json()) as any
      expect(methods.payment_methods).toMatchObject([{ gateway: "stub", status: "active" }])
    })

    it("tops up once, from the stub's saved method, when debits take the balance under the threshold", async () => {
      const s = await a.signup({ country: "US" }) // balance 300
      await saveStubMethod(s) // balance 1300
      await a.call("PUT", "/billing/autocharge", {
        token: s.token,
        body: { enabled: true, threshold_minor: 1295, amount_minor: 1000 },
      })
      await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          srv.running.runtime.runPromiseExit(reserveCall(s.tenantId, `ac-${s.tenantId}-${i}`, 60)),
        ),
      )
      const settled = async () =>
        srv.sql<
          Array<{ status: string; amount_minor: number }>
        >`select status, amount_minor from payment_intents where tenant_id = ${s.tenantId} and purpose = 'autocharge'`
      await expect.poll(settled, { timeout: 5000 }).toEqual([{ status: "succeeded", amount_minor: 1000 }])
      await ledgerAgrees(srv, s.tenantId)
    })
  })
})

describe("the byok subscription", () => {
  let srv: TestServer
  let a: ReturnType<typeof api>
  beforeAll(async () => {
    srv = await startTestServer()
    a = api(srv)
  })
  afterAll(async () => srv?.stop())

  const entries = async (tenantId: number) =>
    srv.sql<Array<{ kind: string; amount_minor: number }>>`select kind, amount_minor from ledger_entries
      where tenant_id = ${tenantId} and kind in ('mandate_payment', 'platform_fee') order by id`

  it("is authorised through its mandate link, charged at once and then monthly, until cancelled", async () => {
    const s = await a.signup({ country: "IN" })
    const before = await balanceOf(srv, s.tenantId)
    expect((await (await a.call("GET", "/billing/subscription", { token: s.token })).json()) as any).toMatchObject({
      subscription: null,
      fee_minor: BYOK_FEE_MINOR.INR,
      currency: "INR",
    })

    const created = await a.call("POST", "/billing/subscription", { token: s.token })
    expect(created.status).toBe(201)
    const sub = (await created.json()) as any
    expect(sub).toMatchObject({
      status: "pending_authorisation",
      plan: "byok",
      amount_minor: BYOK_FEE_MINOR.INR,
      currency: "INR",
      current_period_end: null,
    })
    expect(sub.short_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/billing\/return\?status=mandate_pending&order_id=sub_/)
    const again = await a.call("POST", "/billing/subscription", { token: s.token })
    expect(again.status).toBe(200)
    expect(((await again.json()) as any).id).toBe(sub.id)
    expect(await entries(s.tenantId)).toEqual([])

    const externalId = new URL(sub.short_url).searchParams.get("order_id")!
    const auth = await a.call("POST", "/billing/webhooks/stub", {
      body: { external_id: externalId, status: "succeeded" },
    })
    expect(await auth.json()).toEqual({ received: true, outcome: "subscription_activated" })
    const active = (await (await a.call("GET", "/billing/subscription", { token: s.token })).json()) as any
    expect(active.subscription.status).toBe("active")
    expect(active.plan_tier).toBe("byok")
    const start = new Date(active.subscription.current_period_start)
    expect(new Date(active.subscription.current_period_end).getTime()).toBe(addMonth(start).getTime())
    expect(await entries(s.tenantId)).toEqual([
      { kind: "mandate_payment", amount_minor: BYOK_FEE_MINOR.INR },
      { kind: "platform_fee", amount_minor: -BYOK_FEE_MINOR.INR },
    ])
    expect(await balanceOf(srv, s.tenantId)).toBe(before)
    expect((await a.call("POST", "/billing/subscription", { token: s.token })).status).toBe(409)

    // A month later, renewal charges the next period exactly once, however often it runs.
    await srv.sql`update subscriptions set current_period_end = now() - interval '1 minute' where id = ${sub.id}`
    expect(await run(srv, renewDueSubscriptions)).toBeGreaterThanOrEqual(1)
    await run(srv, renewDueSubscriptions)
    const [{ n }] = await srv.sql<
      [{ n: number }]
    >`select count(*)::int as n from subscription_charges where subscription_id = ${sub.id}`
    expect(n).toBe(2)
    expect((await entries(s.tenantId)).filter((e) => e.kind === "platform_fee")).toHaveLength(2)
    await ledgerAgrees(srv, s.tenantId)

    const cancelled = await a.call("POST", "/billing/subscription/cancel", { token: s.token })
    expect(((await cancelled.json()) as any).status).toBe("cancelled")
    await srv.sql`update subscriptions set current_period_end = now() - interval '1 minute' where id = ${sub.id}`
    await run(srv, renewDueSubscriptions)
    const [{ m }] = await srv.sql<
      [{ m: number }]
    >`select count(*)::int as m from subscription_charges where subscription_id = ${sub.id}`
    expect(m).toBe(2)
    expect((await a.call("POST", "/billing/subscription/cancel", { token: s.token })).status).toBe(404)
    expect((await (await a.call("GET", "/billing/subscription", { token: s.token })).json()) as any).toMatchObject({
      subscription: null,
      plan_tier: "free",
    })
  })

  it("creates one subscription when several requests race", async () => {
    const s = await a.signup()
    const responses = await Promise.all(
      Array.from({ length: 6 }, () => a.call("POST", "/billing/subscription", { token: s.token })),
    )
    expect(responses.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 201])
    const ids = new Set(await Promise.all(responses.map(async (r) => ((await r.json()) as { id: number }).id)))
    expect(ids.size).toBe(1)
    const [{ n }] = await srv.sql<
      [{ n: number }]
    >`select count(*)::int as n from subscriptions where tenant_id = ${s.tenantId}`
    expect(n).toBe(1)
  })

  it("counts months by the calendar", () => {
    expect(addMonth(new Date("2027-01-31T10:00:00Z")).toISOString()).toBe("2027-02-28T10:00:00.000Z")
    expect(addMonth(new Date("2028-01-31T10:00:00Z")).toISOString()).toBe("2028-02-29T10:00:00.000Z")
    expect(addMonth(new Date("2027-12-15T00:00:00Z")).toISOString()).toBe("2028-01-15T00:00:00.000Z")
  })
})

describe("on the real gateway adapters, against local fake gateways", () => {
  let srv: TestServer
  let a: ReturnType<typeof api>
  let card: FakeGwCard
  let upi: FakeGwUpi
  let gatewayEnv: Record<string, string>
  beforeAll(async () => {
    ;({ card, upi, env: gatewayEnv } = await startFakeGateways())
    srv = await startTestServer({ env: gatewayEnv })
    a = api(srv)
  })
  afterAll(async () => {
    await srv?.stop()
    await card?.close()
    await upi?.close()
  })

  it("USD: a checkout session at gw_card, credited by its signed checkout.session.completed", async () => {
    const s = await a.signup({ country: "US" })
    const intent = (await (
      await a.call("POST", "/billing/topup", { token: s.token, body: { amount_minor: 2000 } })
    ).json()) as any
    expect(intent).toMatchObject({ gateway: "gw_card", status: "pending", amount_minor: 2000, currency: "USD" })
    expect(card.sessions.get(intent.external_id)).toMatchObject({ amount_total: 2000 })
    expect(intent.checkout_url).toBe(card.sessions.get(intent.external_id)!.url)

    const hook = `${srv.url}/billing/webhooks/gw_card`
    for (const bad of [
      { secret: "whsec_wrong" },
      { timestamp: Math.floor(Date.now() / 1000) - 600 },
      { signature: null },
      { signature: "t=1,v1=deadbeef" },
    ])
      expect((await card.deliver(hook, intent.external_id, bad)).status).toBe(401)
    expect(await balanceOf(srv, s.tenantId)).toBe(TRIAL_CREDIT_MINOR.USD)

    const ok = await card.deliver(hook, intent.external_id)
    expect(ok.status).toBe(200)
    expect(JSON.parse(ok.body)).toEqual({ received: true, outcome: "credited" })
    const again = await card.deliver(hook, intent.external_id, { eventId: ok.eventId })
    expect(JSON.parse(again.body).outcome).toBe("duplicate")
    // A different event about the same payment does not credit twice.
    const other = await card.deliver(hook, intent.external_id, {
      type: "payment_intent.succeeded",
      object: { payment_intent: intent.external_id, amount_received: 2000 },
    })
    expect(JSON.parse(other.body).outcome).toBe("already_settled")
    expect(await balanceOf(srv, s.tenantId)).toBe(TRIAL_CREDIT_MINOR.USD + 2000)
  })

  it("INR: an order at gw_upi and our hosted checkout page, credited by its signed payment.captured", async () => {
    const s = await a.signup({ country: "IN" })
    const intent = (await (
      await a.call("POST", "/billing/topup", { token: s.token, body: { amount_minor: 50_000 } })
    ).json()) as any
    expect(intent).toMatchObject({ gateway: "gw_upi", currency: "INR" })
    expect(upi.orders.get(intent.external_id)).toMatchObject({ amount: 50_000 })
    const page = await fetch(intent.checkout_url)
    expect(page.status).toBe(200)
    expect(page.headers.get("content-type")).toMatch(/text\/html/)
    expect(await page.text()).toContain(intent.external_id)

    const hook = `${srv.url}/billing/webhooks/gw_upi`
    expect((await upi.deliver(hook, intent.external_id, { secret: "nope" })).status).toBe(401)
    // signed, but the amount is wrong
    expect((await upi.deliver(hook, intent.external_id, { entity: { amount: 1 } })).status).toBe(200)
    expect(await balanceOf(srv, s.tenantId)).toBe(TRIAL_CREDIT_MINOR.INR)
    const ok = await upi.deliver(hook, intent.external_id)
    expect(JSON.parse(ok.body)).toEqual({ received: true, outcome: "credited" })
    expect(await balanceOf(srv, s.tenantId)).toBe(TRIAL_CREDIT_MINOR.INR + 50_000)
  })

  it("turns the unsigned stub gateway off once real gateways are configured", async () => {
    // PAYMENTS=stub (the harness default) does not matter: a real gateway is configured.
    expect(
      await errorOf(
        await a.call("POST", "/billing/webhooks/stub", { body: { external_id: "stub_x", status: "succeeded" } }),
      ),
    ).toMatchObject({ status: 404 })
    const health = (await (await fetch(`${srv.url}/healthz`)).json()) as any
    expect(health.providers.payments).toEqual({ provider: "gw_card+gw_upi", mode: "live", configured: true })
  })

  it("answers 502 and records a failed intent when the gateway is down, without crediting", async () => {
    const s = await a.signup({ country: "US" })
    card.failNext(500, 5)
    const res = await a.call("POST", "/billing/topup", { token: s.token, body: { amount_minor: 900 } })
    expect(await errorOf(res)).toMatchObject({ status: 502, code: "GATEWAY_UNAVAILABLE" })
    const rows = await srv.sql`select status from payment_intents where tenant_id = ${s.tenantId}`
    expect(rows).toEqual([{ status: "failed" }])
  })
})
