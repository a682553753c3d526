// Autocharge against the fake gateways over HTTP: a method saved by a top-up, off-session charges
// that credit only once the gateway confirms (synchronously or by webhook), declines that credit
// nothing and turn autocharge off after three; plus the stub's opt-in, currency checks on every
// webhook, and the UPI checkout page rendered from the stored intent.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { TRIAL_CREDIT_MINOR } from "../../src/billing/pricing.js"
import { reserveCall } from "../../src/billing/usage.service.js"
import { readOutbox } from "../../src/providers/mail/outbox.mail.js"
import { signGeneric } from "../../src/providers/payments/signatures.js"
import { api, type Session } from "../support/clients.js"
import { type FakeGwCard, type FakeGwUpi, startFakeGateways } from "../support/fake-gateways.js"
import { startTestServer, type TestServer } from "../support/harness.js"

const errorOf = async (res: Response) => ({
  status: res.status,
  ...((await res.json()) as { code: string; field?: string }),
})

describe("autocharge on the real gateway adapters, against local fake gateways", () => {
  let srv: TestServer
  let a: ReturnType<typeof api>
  let card: FakeGwCard
  let upi: FakeGwUpi
  let gatewayEnv: Record<string, string>
  let cardHook = ""
  let upiHook = ""
  beforeAll(async () => {
    ;({ card, upi, env: gatewayEnv } = await startFakeGateways())
    srv = await startTestServer({
      env: {
        // The harness runs PAYMENTS=stub; real gateways configured must still keep the stub off.
        ...gatewayEnv,
        PAYMENT_WEBHOOK_SECRET: "generic-secret",
      },
    })
    a = api(srv)
    cardHook = `${srv.url}/billing/webhooks/gw_card`
    upiHook = `${srv.url}/billing/webhooks/gw_upi`
    card.setWebhookUrl(cardHook)
    upi.setWebhookUrl(upiHook)
  })
  afterAll(async () => {
    // Nothing anywhere in this deployment may have created or credited a stub intent.
    if (srv !== undefined) {
      const [{ n }] = await srv.sql<
        [{ n: number }]
      >`select count(*)::int as n from payment_intents where gateway = 'stub'`
      expect(n).toBe(0)
    }
    await srv?.stop()
    await card?.close()
    await upi?.close()
  })

  const balanceOf = async (tenantId: number) => {
    const [w] = await srv.sql<
      [{ balance_minor: number }]
    >`select balance_minor from wallets where tenant_id = ${tenantId}`
    return Number(w.balance_minor)
  }
  const wallet = async (tenantId: number) => {
    const [w] = await srv.sql<[{ autocharge_enabled: boolean; autocharge_failures: number }]>`
      select autocharge_enabled, autocharge_failures from wallets where tenant_id = ${tenantId}`
    return w
  }
  const autocharges = (tenantId: number) =>
    srv.sql<Array<{ id: number; status: string; amount_minor: number; external_id: string; gateway: string }>>`
      select id, status, amount_minor, external_id, gateway from payment_intents
      where tenant_id = ${tenantId} and purpose = 'autocharge' order by id`
  const reserve = (s: Session, ref: string, seconds = 60) =>
    srv.running.runtime.runPromise(reserveCall(s.tenantId, `${ref}-${s.tenantId}`, seconds))
  const enable = (s: Session, threshold: number, amount: number) =>
    a.call("PUT", "/billing/autocharge", {
      token: s.token,
      body: { enabled: true, threshold_minor: threshold, amount_minor: amount },
    })

  /** A USD top-up of 1000 that saves the card, paid at the fake: the balance becomes 1300. */
  async function saveCard(s: Session) {
    const res = await a.call("POST", "/billing/topup", {
      token: s.token,
      body: { amount_minor: 1000, save_payment_method: true },
    })
    expect(res.status).toBe(201)
    const intent = (await res.json()) as { external_id: string }
    const paid = await card.pay(cardHook, intent.external_id, { brand: "visa", last4: "4242" })
    expect(JSON.parse(paid.session.body)).toEqual({ received: true, outcome: "credited" })
    expect(paid.paymentIntent.status).toBe(200)
    expect(await balanceOf(s.tenantId)).toBe(TRIAL_CREDIT_MINOR.USD + 1000)
    return paid.method!
  }

  it("refuses to enable autocharge without a saved method, changing nothing", async () => {
    const s = await a.signup({ country: "US" })
    for (const method of ["PUT", "POST"] as const) {
      const res = await a.call(method, "/billing/autocharge", {
        token: s.token,
        body: { enabled: true, threshold_minor: 500, amount_minor: 2000 },
      })
      expect(await errorOf(res)).toMatchObject({ status: 409, code: "PAYMENT_METHOD_REQUIRED" })
    }
    const w = (await (await a.call("GET", "/billing/balance", { token: s.token })).json()) as any
    expect(w.autocharge).toEqual({ enabled: false, threshold_minor: null, amount_minor: null })
    // A checkout that did not ask to save the card saves nothing.
    const plain = (await (
      await a.call("POST", "/billing/topup", { token: s.token, body: { amount_minor: 1000 } })
    ).json()) as any
    expect(new URLSearchParams(card.requests.at(-1)!.body).get("payment_intent_data[setup_future_usage]")).toBeNull()
    await card.pay(cardHook, plain.external_id)
    expect(
      ((await (await a.call("GET", "/billing/payment-methods", { token: s.token })).json()) as any).payment_methods,
    ).toEqual([])
    expect((await enable(s, 500, 2000)).status).toBe(409)
  })

  it(
    "saves the card at checkout, charges it off-session, " + "and credits only once the gateway answers succeeded",
    async () => {
      const s = await a.signup({ country: "US" })
      const method = await saveCard(s)
      const checkout = new URLSearchParams(
        card.requests.find((r) => r.path === "/v1/checkout/sessions" && r.body.includes("setup_future_usage"))!.body,
      )
      expect(checkout.get("payment_intent_data[setup_future_usage]")).toBe("off_session")
      expect(checkout.get("customer_creation")).toBe("always")
      const listed = ((await (await a.call("GET", "/billing/payment-methods", { token: s.token })).json()) as any)
        .payment_methods
      expect(listed).toMatchObject([{ gateway: "gw_card", display_hint: "visa •••• 4242", status: "active" }])

      expect((await enable(s, 1295, 2000)).status).toBe(200)
      card.delayNext(400) // the gateway takes its time: the reservation must not wait for it
      const held = await reserve(s, "sync", 60)
      expect(held.reserved_minor).toBe(10)
      const [pending] = await autocharges(s.tenantId)
      expect(pending).toMatchObject({ status: "pending", amount_minor: 2000, gateway: "gw_card" })
      expect(await balanceOf(s.tenantId)).toBe(1290)

      await expect.poll(async () => (await autocharges(s.tenantId))[0]?.status, { timeout: 5000 }).toBe("succeeded")
      expect(await balanceOf(s.tenantId)).toBe(1290 + 2000)
      const charge = card.requests.find((r) => r.path === "/v1/payment_intents")!
      const form = new URLSearchParams(charge.body)
      expect(Object.fromEntries(form)).toMatchObject({
        amount: "2000",
        currency: "usd",
        customer: method.customer,
        payment_method: method.id,
        off_session: "true",
        confirm: "true",
        "metadata[intent_id]": String(pending!.id),
      })
      expect(charge.headers["idempotency-key"]).toBe(`autocharge-${pending!.id}`)
      const [done] = await autocharges(s.tenantId)
      expect(done!.external_id).toMatch(/^pi_/)
      // The gateway's own webhook for that charge arriving later changes nothing.
      const late = await card.deliverIntent(cardHook, done!.external_id)
      expect(JSON.parse(late.body).outcome).toBe("already_settled")
      expect(await balanceOf(s.tenantId)).toBe(1290 + 2000)
      expect((await wallet(s.tenantId)).autocharge_failures).toBe(0)
    },
  )

  it("async: the charge answers processing, and the signed payment_intent.succeeded webhook credits it", async () => {
    const s = await a.signup({ country: "US" })
    await saveCard(s)
    expect((await enable(s, 1295, 2000)).status).toBe(200)
    card.setAsync(true, 400)
    try {
      await reserve(s, "async", 60)
      // Answered processing: nothing credited until the webhook comes.
      await expect
        .poll(
          async () =>
            card.paymentIntents.size > 0 &&
            [...card.paymentIntents.values()].some((p) => p.metadata["tenant_id"] === String(s.tenantId)),
          { timeout: 3000 },
        )
        .toBe(true)
      expect((await autocharges(s.tenantId))[0]?.status).toBe("pending")
      expect(await balanceOf(s.tenantId)).toBe(1290)
      await expect.poll(async () => (await autocharges(s.tenantId))[0]?.status, { timeout: 5000 }).toBe("succeeded")
      expect(await balanceOf(s.tenantId)).toBe(1290 + 2000)
      const delivery = card.asyncDeliveries.find(
        (d) => JSON.parse(d.payload).data.object.metadata.tenant_id === String(s.tenantId),
      )!
      expect(JSON.parse(delivery.body)).toEqual({ received: true, outcome: "credited" })
    } finally {
      card.setAsync(false)
    }
  })

  it("declined charges credit nothing; three in a row turn autocharge off and mail the admins", async () => {
    const s = await a.signup({ country: "US" })
    await saveCard(s)
    expect((await enable(s, 1295, 2000)).status).toBe(200)
    card.declineNext(3)
    for (let i = 1; i <= 3; i++) {
      await reserve(s, `decline${i}`, 60)
      await expect
        .poll(async () => (await autocharges(s.tenantId)).filter((x) => x.status === "failed").length, {
          timeout: 5000,
        })
        .toBe(i)
      expect(await balanceOf(s.tenantId)).toBe(1300 - 10 * i)
      expect(await wallet(s.tenantId)).toEqual({ autocharge_enabled: i < 3, autocharge_failures: i })
    }
    // The mail goes out after the commit the poll above saw: wait for it, then make sure it is one.
    const mails = () =>
      readOutbox(srv.config.outboxFile).filter((m) => m.to === s.email && m.kind === "autocharge_disabled")
    await expect.poll(() => mails().length, { timeout: 5000 }).toBe(1)
    // Off now: another debit under the threshold charges nothing.
    await reserve(s, "after", 60)
    expect(await autocharges(s.tenantId)).toHaveLength(3)
    expect(
      card.requests.filter(
        (r) =>
          r.path === "/v1/payment_intents" &&
          new URLSearchParams(r.body).get("metadata[tenant_id]") === String(s.tenantId),
      ),
    ).toHaveLength(3)
    // Enabling again needs nothing new (the card is still saved) and clears the count.
    expect((await enable(s, 1000, 2000)).status).toBe(200)
    expect(await wallet(s.tenantId)).toEqual({ autocharge_enabled: true, autocharge_failures: 0 })
  })

  it("removing the saved card needs admin scope and turns autocharge off", async () => {
    const s = await a.signup({ country: "US" })
    await saveCard(s)
    expect((await enable(s, 500, 2000)).status).toBe(200)
    const [m] = ((await (await a.call("GET", "/billing/payment-methods", { token: s.token })).json()) as any)
      .payment_methods
    const writeKey = (await a.createKey(s, { name: "writer", scope: "write" })).secret
    expect((await a.call("DELETE", `/billing/payment-methods/${m.id}`, { token: writeKey })).status).toBe(403)
    const other = await a.signup({ country: "US" })
    expect((await a.call("DELETE", `/billing/payment-methods/${m.id}`, { token: other.token })).status).toBe(404)
    const res = await a.call("DELETE", `/billing/payment-methods/${m.id}`, { token: s.token })
    expect(await res.json()).toEqual({ id: m.id, status: "removed", autocharge_disabled: true })
    expect((await wallet(s.tenantId)).autocharge_enabled).toBe(false)
    expect((await a.call("DELETE", `/billing/payment-methods/${m.id}`, { token: s.token })).status).toBe(404)
  })

  it("gw_upi: saves a recurring token at checkout and charges it (captured credits, failed does not)", async () => {
    const s = await a.signup({ country: "IN" })
    const start = TRIAL_CREDIT_MINOR.INR
    const intent = (await (
      await a.call("POST", "/billing/topup", {
        token: s.token,
        body: { amount_minor: 50_000, save_payment_method: true },
      })
    ).json()) as any
    const order = upi.orders.get(intent.external_id)!
    expect(order.customer_id).toMatch(/^cust_/)
    expect(order.wants_token).toBe(true)
    expect(JSON.parse((await upi.deliver(upiHook, intent.external_id)).body)).toEqual({
      received: true,
      outcome: "credited",
    })
    const listed = ((await (await a.call("GET", "/billing/payment-methods", { token: s.token })).json()) as any)
      .payment_methods
    expect(listed).toMatchObject([{ gateway: "gw_upi", display_hint: "pa•••@okbank" }])
    const funded = start + 50_000
    expect((await enable(s, funded - 1, 60_000)).status).toBe(200)

    await reserve(s, "upi1", 60) // 700 paise
    await expect.poll(async () => (await autocharges(s.tenantId))[0]?.status, { timeout: 5000 }).toBe("succeeded")
    expect(await balanceOf(s.tenantId)).toBe(funded - 700 + 60_000)
    const rec = upi.requests.find((r) => r.path === "/v1/payments/create/recurring")!
    const body = JSON.parse(rec.body)
    expect(body).toMatchObject({ amount: 60_000, currency: "INR", customer_id: order.customer_id, recurring: "1" })
    expect(upi.tokens.has(body.token)).toBe(true)

    upi.declineNext(1)
    await a.call("PUT", "/billing/autocharge", {
      token: s.token,
      body: { enabled: true, threshold_minor: funded + 60_000, amount_minor: 60_000 },
    })
    await reserve(s, "upi2", 60)
    await expect
      .poll(async () => (await autocharges(s.tenantId)).map((x) => x.status), { timeout: 5000 })
      .toEqual(["succeeded", "failed"])
    expect(await balanceOf(s.tenantId)).toBe(funded - 1400 + 60_000)
    expect((await wallet(s.tenantId)).autocharge_failures).toBe(1)
  })

  it(
    "credits nothing when a webhook's currency differs from the intent's, " + "or a crediting event states no amount",
    async () => {
      const us = await a.signup({ country: "US" })
      const cardIntent = (await (
        await a.call("POST", "/billing/topup", { token: us.token, body: { amount_minor: 2000 } })
      ).json()) as any
      const wrongCurrency = await card.deliver(cardHook, cardIntent.external_id, { object: { currency: "inr" } })
      expect(JSON.parse(wrongCurrency.body)).toEqual({ received: true, outcome: "currency_mismatch" })
      const noAmount = await card.deliver(cardHook, cardIntent.external_id, { object: { amount_total: null } })
      expect(JSON.parse(noAmount.body)).toEqual({ received: true, outcome: "amount_mismatch" })
      const viaIntent = await card.deliver(cardHook, cardIntent.external_id, {
        type: "payment_intent.succeeded",
        object: { payment_intent: cardIntent.external_id, amount_received: 2000, currency: "eur" },
      })
      expect(JSON.parse(viaIntent.body).outcome).toBe("currency_mismatch")
      expect(await balanceOf(us.tenantId)).toBe(TRIAL_CREDIT_MINOR.USD)

      const inr = await a.signup({ country: "IN" })
      const upiIntent = (await (
        await a.call("POST", "/billing/topup", { token: inr.token, body: { amount_minor: 50_000 } })
      ).json()) as any
      expect(
        JSON.parse((await upi.deliver(upiHook, upiIntent.external_id, { entity: { currency: "USD" } })).body).outcome,
      ).toBe("currency_mismatch")
      expect(
        JSON.parse((await upi.deliver(upiHook, upiIntent.external_id, { entity: { amount: undefined } })).body).outcome,
      ).toBe("amount_mismatch")

      const generic = JSON.stringify({
        id: "evt_generic_1",
        external_id: upiIntent.external_id,
        status: "succeeded",
        amount_minor: 50_000,
        currency: "USD",
      })
      const res = await fetch(`${srv.url}/billing/webhooks/payment`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-svc-signature": signGeneric(generic, "generic-secret", Math.floor(Date.now() / 1000)),
        },
        body: generic,
      })
      expect(await res.json()).toEqual({ received: true, outcome: "currency_mismatch" })
      expect(await balanceOf(inr.tenantId)).toBe(TRIAL_CREDIT_MINOR.INR)

      // The right currency, in any case, still credits.
      expect(JSON.parse((await card.deliver(cardHook, cardIntent.external_id)).body).outcome).toBe("credited")
      expect(JSON.parse((await upi.deliver(upiHook, upiIntent.external_id)).body).outcome).toBe("credited")
    },
  )

  it("renders the gw_upi checkout page from the stored intent: forged amount ignored, forged key refused", async () => {
    const s = await a.signup({ country: "IN" })
    const intent = (await (
      await a.call("POST", "/billing/topup", { token: s.token, body: { amount_minor: 50_000 } })
    ).json()) as any
    const url = new URL(intent.checkout_url)
    expect(url.pathname).toBe("/billing/gw_upi/checkout")
    expect(url.searchParams.get("order_id")).toBe(intent.external_id)
    expect(url.searchParams.get("intent")).toBe(String(intent.intent_id))
    expect(url.searchParams.has("amount")).toBe(false)
    expect(url.searchParams.has("key_id")).toBe(false)

    const forged = await fetch(`${intent.checkout_url}&amount=100&currency=INR`)
    expect(forged.status).toBe(200)
    const html = await forged.text()
    expect(html).toContain('"key":"key_upi"')
    expect(html).toContain('"amount":50000')
    expect(html).toContain("500.00")
    expect(html).not.toContain('"amount":100,')
    expect(await errorOf(await fetch(`${intent.checkout_url}&key_id=rzp_evil`))).toMatchObject({
      status: 422,
      code: "VALIDATION_FAILED",
      field: "key_id",
    })

    // Another order id or an unknown intent: no page.
    expect(
      (await fetch(`${srv.url}/billing/gw_upi/checkout?intent=${intent.intent_id}&order_id=order_forged`)).status,
    ).toBe(404)
    expect(
      (await fetch(`${srv.url}/billing/gw_upi/checkout?intent=999999&order_id=${intent.external_id}`)).status,
    ).toBe(404)
  })

  it("takes the spec's query: order_id and key_id, amount?, currency (issue 32); refusals are 4xx", async () => {
    const s = await a.signup({ country: "IN" })
    const intent = (await (
      await a.call("POST", "/billing/topup", { token: s.token, body: { amount_minor: 50_000 } })
    ).json()) as any
    const checkout = (query: string) => fetch(`${srv.url}/billing/gw_upi/checkout?${query}`)
    const order = `order_id=${intent.external_id}`

    for (const query of [`${order}&key_id=key_upi`, `${order}&key_id=key_upi&amount=50000&currency=INR`]) {
      const res = await checkout(query)
      expect(res.status).toBe(200)
      expect(res.headers.get("content-type")).toMatch(/^text\/html/)
      const html = await res.text()
      expect(html).toContain('"key":"key_upi"')
      expect(html).toContain(`"order_id":"${intent.external_id}"`)
      expect(html).toContain('"amount":50000')
    }
    // The amount is the order's, whatever the link says.
    expect(await (await checkout(`${order}&key_id=key_upi&amount=100`)).text()).toContain('"amount":50000')

    const fails = async (query: string) => errorOf(await checkout(query))
    const invalid = (field: string) => ({ status: 422, code: "VALIDATION_FAILED", field })
    expect(await fails(`${order}&key_id=rzp_evil`)).toMatchObject(invalid("key_id"))
    expect(await fails(order)).toMatchObject(invalid("key_id"))
    expect(await fails("key_id=key_upi")).toMatchObject(invalid("order_id"))
    expect(await fails(`${order}&key_id=key_upi&amount=ten`)).toMatchObject(invalid("amount"))
    const unknown = await fails("order_id=order_unknown&key_id=key_upi")
    expect(unknown).toMatchObject({ status: 404, code: "NOT_FOUND" })
    expect(typeof (unknown as { error?: unknown }).error).toBe("string")

    // Only the UPI gateway's orders: a card checkout session's id is no order here.
    const us = await a.signup({ country: "US" })
    const card = (await (
      await a.call("POST", "/billing/topup", { token: us.token, body: { amount_minor: 1000 } })
    ).json()) as any
    expect(card.external_id).toBeTruthy()
    expect(await fails(`order_id=${card.external_id}&key_id=key_upi`)).toMatchObject({ status: 404, code: "NOT_FOUND" })
  })
})

describe("PAYMENTS=gateways with no gateway configured", () => {
  let srv: TestServer
  let a: ReturnType<typeof api>
  beforeAll(async () => {
    srv = await startTestServer({ env: { PAYMENTS: "gateways" } })
    a = api(srv)
  })
  afterAll(async () => srv?.stop())

  it("has no stub: its webhook is 404, top-ups refuse, autocharge cannot be enabled", async () => {
    const s = await a.signup({ country: "US" })
    expect(
      await errorOf(
        await a.call("POST", "/billing/webhooks/stub", { body: { external_id: "stub_x", status: "succeeded" } }),
      ),
    ).toMatchObject({ status: 404 })
    expect(
      await errorOf(
        await a.call("POST", "/billing/topup", {
          token: s.token,
          body: { amount_minor: 1000, save_payment_method: true },
        }),
      ),
    ).toMatchObject({
      status: 502,
      code: "GATEWAY_UNAVAILABLE",
    })
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
    const [{ n }] = await srv.sql<[{ n: number }]>`select count(*)::int as n from payment_intents`
    expect(n).toBe(0)
  })
})
