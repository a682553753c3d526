// The payment gateways: webhook signature checks (accept/reject matrix), the card and UPI adapters
// against local fake gateways (request shape, retries, refusals, timeouts), and gateway selection.
import { createHash, createHmac } from "node:crypto"
import { createServer, type IncomingHttpHeaders, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect, Layer } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { loadConfig } from "../../src/platform/config.js"
import { makePayments, Payments, PaymentsLive } from "../../src/providers/Payments.js"
import { makeGwCardGateway } from "../../src/providers/payments/gw-card.payments.js"
import { makeGwUpiGateway } from "../../src/providers/payments/gw-upi.payments.js"
import { type CheckoutRequest, PaymentGatewayError } from "../../src/providers/payments/payments.interface.js"
import {
  signGeneric,
  signGwCard,
  signGwUpi,
  verifyGenericSignature,
  verifyGwCardSignature,
  verifyGwUpiSignature,
} from "../../src/providers/payments/signatures.js"
import { makeStubGateway } from "../../src/providers/payments/stub.payments.js"
import { type FakeGwCard, type FakeGwUpi, startFakeGwCard, startFakeGwUpi } from "../support/fake-gateways.js"

const NOW = 1_750_000_000
const body = Buffer.from('{"id":"evt_1","type":"checkout.session.completed","data":{"object":{"id":"cs_1"}}}')
const hmacHex = (secret: string, data: string | Buffer): string =>
  createHmac("sha256", secret).update(data).digest("hex")

async function caught(p: Promise<unknown>): Promise<PaymentGatewayError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  )
  expect(e).toBeInstanceOf(PaymentGatewayError)
  return e as PaymentGatewayError
}

// The gw_card scheme and the generic one are the same; every case runs against both.
describe.each([
  { name: "gw_card", verify: verifyGwCardSignature, sign: signGwCard },
  { name: "generic (X-SVC-Signature)", verify: verifyGenericSignature, sign: signGeneric },
])("$name signature", ({ verify, sign }) => {
  const secret = "whsec_test_0123456789abcdef"
  const v1 = (t: number, s = secret, raw: Buffer = body) => hmacHex(s, Buffer.concat([Buffer.from(`${t}.`), raw]))

  it("signs as t=<unix>,v1=<hex HMAC(secret, t.body)> and accepts its own signature", () => {
    const header = sign(body, secret, NOW)
    expect(header).toBe(`t=${NOW},v1=${v1(NOW)}`)
    expect(verify(body, header, secret, NOW)).toBe(true)
  })

  it("refuses the wrong secret, and a secret with its prefix stripped", () => {
    expect(verify(body, sign(body, "whsec_other", NOW), secret, NOW)).toBe(false)
    // The whole secret string is the key: the part after "whsec_" is a different key.
    expect(verify(body, sign(body, "test_0123456789abcdef", NOW), secret, NOW)).toBe(false)
    expect(verify(body, sign(body, secret, NOW), "test_0123456789abcdef", NOW)).toBe(false)
  })

  it("refuses an altered body, even by one byte or trailing whitespace", () => {
    const header = sign(body, secret, NOW)
    const flipped = Buffer.from(body)
    flipped[5] = flipped[5]! ^ 1
    expect(verify(flipped, header, secret, NOW)).toBe(false)
    expect(verify(Buffer.concat([body, Buffer.from("\n")]), header, secret, NOW)).toBe(false)
    expect(verify(Buffer.alloc(0), header, secret, NOW)).toBe(false)
  })

  it("binds the timestamp: a v1 moved to another t is refused", () => {
    expect(verify(body, `t=${NOW + 1},v1=${v1(NOW)}`, secret, NOW)).toBe(false)
  })

  it("refuses timestamps more than 300 s away, either way, and accepts the edges", () => {
    expect(verify(body, sign(body, secret, NOW - 300), secret, NOW)).toBe(true)
    expect(verify(body, sign(body, secret, NOW + 300), secret, NOW)).toBe(true)
    expect(verify(body, sign(body, secret, NOW - 301), secret, NOW)).toBe(false)
    expect(verify(body, sign(body, secret, NOW + 301), secret, NOW)).toBe(false)
    expect(verify(body, sign(body, secret, NOW - 86_400), secret, NOW)).toBe(false)
    // A custom tolerance.
    expect(verify(body, sign(body, secret, NOW - 30), secret, NOW, 10)).toBe(false)
    expect(verify(body, sign(body, secret, NOW - 30), secret, NOW, 60)).toBe(true)
  })

  it("accepts when any of several v1 entries matches (secret rotation), in any position", () => {
    const right = v1(NOW)
    const wrong = v1(NOW, "whsec_old")
    expect(verify(body, `t=${NOW},v1=${wrong},v1=${right}`, secret, NOW)).toBe(true)
    expect(verify(body, `t=${NOW},v1=${right},v1=${wrong}`, secret, NOW)).toBe(true)
    expect(verify(body, `v1=${wrong},t=${NOW},v1=${"0".repeat(64)},v1=${right}`, secret, NOW)).toBe(true)
    // The old secret verifies the same header too: that is what rotation means.
    expect(verify(body, `t=${NOW},v1=${wrong},v1=${right}`, "whsec_old", NOW)).toBe(true)
    expect(verify(body, `t=${NOW},v1=${wrong},v1=${"f".repeat(64)}`, secret, NOW)).toBe(false)
  })

  it("ignores v0 and unknown schemes: a correct MAC under v0 alone is refused", () => {
    expect(verify(body, `t=${NOW},v0=${v1(NOW)}`, secret, NOW)).toBe(false)
    expect(verify(body, `t=${NOW},v2=${v1(NOW)}`, secret, NOW)).toBe(false)
    expect(verify(body, `t=${NOW},v0=garbage,v1=${v1(NOW)},x=1`, secret, NOW)).toBe(true)
  })

  it("accepts upper-case hex (the same MAC) and tolerates spaces after commas", () => {
    expect(verify(body, `t=${NOW},v1=${v1(NOW).toUpperCase()}`, secret, NOW)).toBe(true)
    expect(verify(body, `t=${NOW}, v1=${v1(NOW)}`, secret, NOW)).toBe(true)
  })

  it("refuses missing, empty and garbage headers without throwing", () => {
    const right = v1(NOW)
    const bad: Array<string | undefined> = [
      undefined,
      "",
      ",",
      "garbage",
      "t=,v1=",
      right,
      `v1=${right}`, // no timestamp
      `t=${NOW}`, // no signature
      `t=abc,v1=${right}`,
      `t=-${NOW},v1=${right}`,
      `t=${NOW}.5,v1=${right}`,
      `t=${NOW},t=${NOW},v1=${right}`, // ambiguous timestamp
      `t=${NOW},v1=${right.slice(0, 63)}`, // one hex digit short
      `t=${NOW},v1=${right}00`, // one byte long
      `t=${NOW},v1=${right.slice(0, 62)}zz`, // not hex
      `t=${NOW},v1=${"é".repeat(32)}`,
      `t=${NOW};v1=${right}`,
      `t=99999999999999999999999,v1=${right}`,
    ]
    for (const header of bad) expect(verify(body, header, secret, NOW), String(header)).toBe(false)
    // Wrong types from untyped callers: false, not an exception.
    expect(verify(body, 42 as unknown as string, secret, NOW)).toBe(false)
    expect(verify(undefined as unknown as Buffer, sign(body, secret, NOW), secret, NOW)).toBe(false)
    expect(verify(body, sign(body, secret, NOW), secret, Number.NaN)).toBe(false)
  })

  it("refuses everything with an empty secret, even a header signed with it", () => {
    expect(verify(body, sign(body, "", NOW), "", NOW)).toBe(false)
  })

  it("signs the raw bytes, not a UTF-8 decoding of them", () => {
    const binary = Buffer.from([0x7b, 0xff, 0xfe, 0x80, 0x7d])
    const header = sign(binary, secret, NOW)
    expect(verify(binary, header, secret, NOW)).toBe(true)
    // The lossy decoding turns the invalid bytes into U+FFFD: a different body.
    expect(verify(Buffer.from(binary.toString("utf8")), header, secret, NOW)).toBe(false)
  })
})

describe("gw_upi signature", () => {
  const secret = "upi_webhook_secret_42"
  const raw = Buffer.from(
    '{"event":"payment.captured","payload":{"payment":{"entity":{"id":"pay_1","order_id":"order_1"}}}}',
  )

  it("is the hex HMAC-SHA256 of the raw body", () => {
    const sig = signGwUpi(raw, secret)
    expect(sig).toBe(hmacHex(secret, raw))
    expect(verifyGwUpiSignature(raw, sig, secret)).toBe(true)
    expect(verifyGwUpiSignature(raw, sig.toUpperCase(), secret)).toBe(true)
    expect(verifyGwUpiSignature(raw, ` ${sig} `, secret)).toBe(true)
  })

  it("refuses the wrong secret, an altered body and malformed headers", () => {
    const sig = signGwUpi(raw, secret)
    expect(verifyGwUpiSignature(raw, signGwUpi(raw, "other"), secret)).toBe(false)
    expect(verifyGwUpiSignature(Buffer.concat([raw, Buffer.from(" ")]), sig, secret)).toBe(false)
    for (const header of [
      undefined,
      "",
      "garbage",
      sig.slice(1),
      `${sig}0`,
      `sha256=${sig}`,
      createHash("sha256").update(raw).digest("hex"),
    ]) {
      expect(verifyGwUpiSignature(raw, header, secret), String(header)).toBe(false)
    }
    expect(verifyGwUpiSignature(raw, signGwUpi(raw, ""), "")).toBe(false)
    expect(verifyGwUpiSignature(null as unknown as Buffer, sig, secret)).toBe(false)
  })
})

const request = (over: Partial<CheckoutRequest> = {}): CheckoutRequest => ({
  intentId: 41,
  tenantId: 7,
  amountMinor: 2500,
  currency: "USD",
  returnUrl: "https://app.parley.test/billing/return",
  baseUrl: "https://parley.test/",
  ...over,
})

describe("stub gateway", () => {
  it("returns a fresh stub_ id and our own return page as the checkout", async () => {
    const stub = makeStubGateway()
    expect(stub.name).toBe("stub")
    const a = await stub.createCheckout(request())
    const b = await stub.createCheckout(request())
    expect(a.externalId).toMatch(/^stub_[0-9a-f]{24}$/)
    expect(b.externalId).not.toBe(a.externalId)
    expect(a.checkoutUrl).toBe(`https://parley.test/billing/return?status=pending&order_id=${a.externalId}`)
    await caught(stub.createCheckout(request({ amountMinor: 0 })))
  })
})

describe("gw_card adapter", () => {
  const secretKey = "sk_test_card_0123456789"
  let fake: FakeGwCard
  beforeAll(async () => {
    fake = await startFakeGwCard({ secretKey, webhookSecret: "whsec_card" })
  })
  afterEach(() => fake.reset())
  afterAll(() => fake.close())
  const gateway = (over: { secretKey?: string; timeoutMs?: number } = {}) =>
    makeGwCardGateway({ apiUrl: `${fake.url}/`, secretKey, ...over })

  it("creates a checkout session: form body, bearer key, idempotency key per intent", async () => {
    const gw = gateway()
    expect(gw.name).toBe("gw_card")
    const session = await gw.createCheckout(
      request({ returnUrl: "https://app.parley.test/billing/return?from=topup#top" }),
    )

    expect(fake.requests).toHaveLength(1)
    const req = fake.requests[0]!
    expect(req.method).toBe("POST")
    expect(req.path).toBe("/v1/checkout/sessions")
    expect(req.headers.authorization).toBe(`Bearer ${secretKey}`)
    expect(req.headers["content-type"]).toMatch(/^application\/x-www-form-urlencoded/)
    expect(req.headers["idempotency-key"]).toBe("topup-41")
    expect(Object.fromEntries(new URLSearchParams(req.body))).toEqual({
      mode: "payment",
      "line_items[0][price_data][currency]": "usd",
      "line_items[0][price_data][unit_amount]": "2500",
      "line_items[0][price_data][product_data][name]": "Parley wallet top-up",
      "line_items[0][quantity]": "1",
      // The gateway's template placeholder must arrive literally, the fragment stays last.
      success_url:
        "https://app.parley.test/billing/return?from=topup&status=succeeded&order_id={CHECKOUT_SESSION_ID}#top",
      cancel_url: "https://app.parley.test/billing/return?from=topup&status=cancelled#top",
      client_reference_id: "41",
      "metadata[intent_id]": "41",
      "metadata[tenant_id]": "7",
      // On the PaymentIntent too: its payment_intent.succeeded finds the top-up by it.
      "payment_intent_data[metadata][intent_id]": "41",
      "payment_intent_data[metadata][tenant_id]": "7",
    })

    const stored = fake.sessions.get(session.externalId)
    expect(stored).toBeDefined()
    expect(session).toEqual({ externalId: stored!.id, checkoutUrl: stored!.url })
    expect(session.externalId).toMatch(/^cs_test_/)
    expect(stored!.metadata).toEqual({ intent_id: "41", tenant_id: "7" })
    expect(stored!.amount_total).toBe(2500)
  })

  it("retries a 503 and succeeds with the same body and idempotency key", async () => {
    fake.failNext(503)
    const session = await gateway().createCheckout(request({ intentId: 42 }))
    expect(fake.requests.map((r) => r.status)).toEqual([503, 200])
    expect(fake.requests[1]!.headers["idempotency-key"]).toBe("topup-42")
    expect(fake.requests[1]!.headers["idempotency-key"]).toBe(fake.requests[0]!.headers["idempotency-key"])
    expect(fake.requests[1]!.body).toBe(fake.requests[0]!.body)
    expect(fake.sessions.has(session.externalId)).toBe(true)
  })

  it("gives up after three 429s with a retryable error", async () => {
    fake.failNext(429, 3, { headers: { "retry-after": "0" } })
    const e = await caught(gateway().createCheckout(request({ intentId: 43 })))
    expect(e.retryable).toBe(true)
    expect(e.status).toBe(429)
    expect(e.message).toMatch(/gave up after 3 attempts/)
    expect(fake.requests).toHaveLength(3)
  })

  it("does not retry a 400, and says why", async () => {
    // Below the gateway's minimum charge.
    const e = await caught(gateway().createCheckout(request({ intentId: 44, amountMinor: 10 })))
    expect(e.retryable).toBe(false)
    expect(e.status).toBe(400)
    expect(e.message).toMatch(/amount_too_small/)
    expect(fake.requests).toHaveLength(1)
  })

  it("refuses a wrong key as non-retryable, never leaking the key", async () => {
    const wrong = "sk_test_wrong_key_999"
    const e = await caught(gateway({ secretKey: wrong }).createCheckout(request({ intentId: 45 })))
    expect(e.retryable).toBe(false)
    expect(e.status).toBe(401)
    expect(e.message).toMatch(/Invalid API Key/)
    expect(fake.requests).toHaveLength(1)
    expect(fake.requests[0]!.status).toBe(401)

    // A gateway that echoes the whole key back: it is scrubbed from the message.
    fake.failNext(401, 1, { body: { error: { message: `bad key ${secretKey}` } } })
    const echoed = await caught(gateway().createCheckout(request({ intentId: 46 })))
    expect(echoed.message).toContain("bad key ***")
    expect(echoed.message).not.toContain(secretKey)
    expect(JSON.stringify(echoed)).not.toContain(secretKey)
  })

  it("times out each attempt, retrying up to three times", async () => {
    fake.hangNext(3)
    const t0 = performance.now()
    const e = await caught(gateway({ timeoutMs: 150 }).createCheckout(request({ intentId: 47 })))
    const elapsed = performance.now() - t0
    expect(e.retryable).toBe(true)
    expect(e.message).toMatch(/no answer within 150 ms/)
    expect(fake.requests).toHaveLength(3)
    // Three 150 ms attempts and 250 + 500 ms of backoff.
    expect(elapsed).toBeGreaterThanOrEqual(3 * 150 + 750 - 50)
    expect(elapsed).toBeLessThan(5_000)
  })

  it("gets the same session back when an attempt timed out after the gateway had created it", async () => {
    fake.delayNext(600)
    const before = fake.sessions.size
    const session = await gateway({ timeoutMs: 150 }).createCheckout(request({ intentId: 48 }))
    expect(fake.requests).toHaveLength(2)
    expect(fake.sessions.size).toBe(before + 1)
    expect([...fake.sessions.values()].filter((s) => s.client_reference_id === "48").map((s) => s.id)).toEqual([
      session.externalId,
    ])
  })

  it("retries an idempotency-lock 409 (the timed-out attempt still in flight)", async () => {
    fake.failNext(409, 1, { body: { error: { type: "idempotency_error", message: "request in progress" } } })
    await gateway().createCheckout(request({ intentId: 49 }))
    expect(fake.requests.map((r) => r.status)).toEqual([409, 200])
  })

  it("refuses an impossible amount before calling the gateway", async () => {
    for (const amountMinor of [0, -5, 12.5, Number.NaN]) {
      const e = await caught(gateway().createCheckout(request({ amountMinor })))
      expect(e.retryable).toBe(false)
    }
    expect(fake.requests).toHaveLength(0)
  })

  it("refuses a 2xx without id and url rather than guess", async () => {
    fake.failNext(200, 1, { body: { id: "cs_only" } })
    const e = await caught(gateway().createCheckout(request({ intentId: 50 })))
    expect(e.retryable).toBe(false)
    expect(fake.requests).toHaveLength(1)
  })

  it("charges a saved card off-session: succeeded, declined (402) as failed, an outage rejects retryable", async () => {
    const gw = gateway()
    const method = { id: "pm_saved1", customer: "cus_saved1", brand: "visa", last4: "4242" }
    fake.methods.set(method.id, method)
    const charge = {
      intentId: 90,
      tenantId: 7,
      amountMinor: 2000,
      currency: "USD" as const,
      customerId: method.customer,
      methodId: method.id,
    }
    const ok = await gw.chargeSaved!(charge)
    expect(ok).toMatchObject({ status: "succeeded", amountMinor: 2000, currency: "USD" })
    expect(ok.externalId).toMatch(/^pi_/)
    expect(fake.requests[0]!.headers["idempotency-key"]).toBe("autocharge-90")

    fake.declineNext()
    const declined = await gw.chargeSaved!({ ...charge, intentId: 91 })
    expect(declined.status).toBe("failed")
    expect(declined.reason).toMatch(/card_declined/)
    expect(fake.requests.at(-1)!.status).toBe(402)

    const detached = await gw.chargeSaved!({ ...charge, intentId: 92, methodId: "pm_unknown" })
    expect(detached.status).toBe("failed")

    fake.failNext(503, 3)
    const e = await caught(gw.chargeSaved!({ ...charge, intentId: 93 }))
    expect(e.retryable).toBe(true)
  })

  it("treats an unreachable host as retryable", async () => {
    const closed = await startFakeGwCard({ secretKey, webhookSecret: "x" })
    await closed.close()
    const e = await caught(
      makeGwCardGateway({ apiUrl: closed.url, secretKey, timeoutMs: 1000 }).createCheckout(request()),
    )
    expect(e.retryable).toBe(true)
    expect(e.message).toMatch(/unreachable/)
    expect(e.message).not.toContain(secretKey)
  })
})

describe("gw_upi adapter", () => {
  const keyId = "rzp_test_KEYID01"
  const keySecret = "upi_secret_abcdef123456"
  let fake: FakeGwUpi
  beforeAll(async () => {
    fake = await startFakeGwUpi({ keyId, keySecret, webhookSecret: "upi_wh" })
  })
  afterEach(() => fake.reset())
  afterAll(() => fake.close())
  const gateway = (over: { keySecret?: string; timeoutMs?: number } = {}) =>
    makeGwUpiGateway({ apiUrl: fake.url, keyId, keySecret, ...over })
  const inr = (over: Partial<CheckoutRequest> = {}) => request({ currency: "INR", amountMinor: 49_900, ...over })

  it("creates an order with HTTP Basic auth and points the payer at our hosted page", async () => {
    const gw = gateway()
    expect(gw.name).toBe("gw_upi")
    const session = await gw.createCheckout(inr())

    expect(fake.requests).toHaveLength(1)
    const req = fake.requests[0]!
    expect(req.method).toBe("POST")
    expect(req.path).toBe("/v1/orders")
    expect(req.headers.authorization).toBe(`Basic ${Buffer.from(`${keyId}:${keySecret}`).toString("base64")}`)
    expect(req.headers["content-type"]).toMatch(/^application\/json/)
    expect(JSON.parse(req.body)).toEqual({
      amount: 49_900,
      currency: "INR",
      receipt: "intent_41",
      notes: { intent_id: "41", tenant_id: "7" },
    })

    const order = fake.orders.get(session.externalId)
    expect(order).toMatchObject({ amount: 49_900, currency: "INR", receipt: "intent_41", status: "created" })
    expect(session.externalId).toMatch(/^order_/)
    // The page reads key, amount and currency from the stored intent, never from the link.
    expect(session.checkoutUrl).toBe(
      `https://parley.test/billing/gw_upi/checkout?intent=41&order_id=${session.externalId}`,
    )
  })

  it("retries a 503 and succeeds", async () => {
    fake.failNext(503)
    const session = await gateway().createCheckout(inr())
    expect(fake.requests.map((r) => r.status)).toEqual([503, 200])
    expect(fake.requests[1]!.body).toBe(fake.requests[0]!.body)
    expect(fake.orders.has(session.externalId)).toBe(true)
  })

  it("does not retry a 400", async () => {
    // Below the gateway's INR 1.00 minimum.
    const e = await caught(gateway().createCheckout(inr({ amountMinor: 50 })))
    expect(e.retryable).toBe(false)
    expect(e.status).toBe(400)
    expect(e.message).toMatch(/atleast INR 1\.00/)
    expect(fake.requests).toHaveLength(1)
  })

  it("refuses a wrong secret as non-retryable, leaking neither the secret nor the Basic token", async () => {
    const wrong = "upi_wrong_secret_777"
    const e = await caught(gateway({ keySecret: wrong }).createCheckout(inr()))
    expect(e.retryable).toBe(false)
    expect(e.status).toBe(401)
    expect(e.message).toMatch(/Authentication failed/)
    expect(fake.requests).toHaveLength(1)

    const token = Buffer.from(`${keyId}:${keySecret}`).toString("base64")
    fake.failNext(400, 1, {
      body: { error: { code: "BAD_REQUEST_ERROR", description: `bad ${keySecret} / ${token}` } },
    })
    const echoed = await caught(gateway().createCheckout(inr()))
    expect(echoed.message).not.toContain(keySecret)
    expect(echoed.message).not.toContain(token)
  })

  it("times out each attempt, retrying up to three times", async () => {
    fake.hangNext(3)
    const e = await caught(gateway({ timeoutMs: 150 }).createCheckout(inr()))
    expect(e.retryable).toBe(true)
    expect(e.message).toMatch(/no answer within 150 ms/)
    expect(fake.requests).toHaveLength(3)
  })

  it("refuses USD without calling the gateway", async () => {
    const e = await caught(gateway().createCheckout(inr({ currency: "USD" })))
    expect(e.retryable).toBe(false)
    expect(fake.requests).toHaveLength(0)
  })
})

describe("fake gateways' webhooks", () => {
  let receiver: Server
  let receiverUrl = ""
  const received: Array<{ headers: IncomingHttpHeaders; raw: Buffer }> = []
  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        received.push({ headers: req.headers, raw: Buffer.concat(chunks) })
        res.writeHead(204)
        res.end()
      })
    })
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/billing/webhooks`
  })
  afterEach(() => {
    received.length = 0
  })
  afterAll(async () => {
    receiver.closeAllConnections()
    await new Promise<void>((resolve) => receiver.close(() => resolve()))
  })

  it("gw_card delivers a signed checkout.session.completed for a session it created", async () => {
    const fake = await startFakeGwCard({ secretKey: "sk_x", webhookSecret: "whsec_card" })
    try {
      const session = await makeGwCardGateway({ apiUrl: fake.url, secretKey: "sk_x" }).createCheckout(
        request({ intentId: 77 }),
      )
      const d = await fake.deliver(`${receiverUrl}/gw_card`, session.externalId)
      expect(d.status).toBe(204)
      expect(received).toHaveLength(1)
      const got = received[0]!
      expect(got.raw.toString()).toBe(d.payload)
      const header = got.headers["gw_card-signature"]
      expect(typeof header).toBe("string")
      const now = Math.floor(Date.now() / 1000)
      expect(verifyGwCardSignature(got.raw, header as string, "whsec_card", now)).toBe(true)
      expect(verifyGwCardSignature(got.raw, header as string, "whsec_other", now)).toBe(false)
      const event = JSON.parse(got.raw.toString()) as {
        id: string
        type: string
        data: { object: Record<string, unknown> }
      }
      expect(event.id).toBe(d.eventId)
      expect(event.id).toMatch(/^evt_/)
      expect(event.type).toBe("checkout.session.completed")
      expect(event.data.object).toMatchObject({
        id: session.externalId,
        amount_total: 2500,
        currency: "usd",
        payment_status: "paid",
        client_reference_id: "77",
        metadata: { intent_id: "77", tenant_id: "7" },
      })
      expect(fake.sessions.get(session.externalId)?.payment_status).toBe("paid")

      // Stale, wrongly signed and unsigned deliveries, for the receiver's rejection paths.
      await fake.deliver(`${receiverUrl}/gw_card`, session.externalId, { timestamp: now - 600, eventId: "evt_stale" })
      await fake.deliver(`${receiverUrl}/gw_card`, session.externalId, { secret: "whsec_wrong" })
      await fake.deliver(`${receiverUrl}/gw_card`, session.externalId, { signature: null })
      const verdicts = received
        .slice(1)
        .map((r) =>
          verifyGwCardSignature(r.raw, r.headers["gw_card-signature"] as string | undefined, "whsec_card", now),
        )
      expect(verdicts).toEqual([false, false, false])
      expect(received[3]!.headers["gw_card-signature"]).toBeUndefined()
    } finally {
      await fake.close()
    }
  })

  it("gw_upi delivers a signed payment.captured with an event id header", async () => {
    const fake = await startFakeGwUpi({ keyId: "k", keySecret: "s", webhookSecret: "upi_wh" })
    try {
      const session = await makeGwUpiGateway({ apiUrl: fake.url, keyId: "k", keySecret: "s" }).createCheckout(
        request({ currency: "INR", amountMinor: 1000 }),
      )
      const d = await fake.deliver(`${receiverUrl}/gw_upi`, session.externalId)
      expect(d.status).toBe(204)
      const got = received[0]!
      expect(verifyGwUpiSignature(got.raw, got.headers["x-gw_upi-signature"] as string, "upi_wh")).toBe(true)
      expect(verifyGwUpiSignature(got.raw, got.headers["x-gw_upi-signature"] as string, "other")).toBe(false)
      expect(got.headers["x-gw_upi-event-id"]).toBe(d.eventId)
      const event = JSON.parse(got.raw.toString()) as {
        event: string
        payload: { payment: { entity: Record<string, unknown> } }
      }
      expect(event.event).toBe("payment.captured")
      expect(event.payload.payment.entity).toMatchObject({
        order_id: session.externalId,
        amount: 1000,
        currency: "INR",
        status: "captured",
      })
      expect(String(event.payload.payment.entity.id)).toMatch(/^pay_/)
      expect(fake.orders.get(session.externalId)?.status).toBe("paid")

      // Without the event id header the payment id is the event id.
      const bare = await fake.deliver(`${receiverUrl}/gw_upi`, session.externalId, { eventId: null })
      expect(received[1]!.headers["x-gw_upi-event-id"]).toBeUndefined()
      const second = JSON.parse(received[1]!.raw.toString()) as { payload: { payment: { entity: { id: string } } } }
      expect(bare.eventId).toBe(second.payload.payment.entity.id)
    } finally {
      await fake.close()
    }
  })
})

describe("Payments service", () => {
  const payments = (env: Record<string, string>) =>
    Effect.runSync(Effect.provide(Payments, PaymentsLive.pipe(Layer.provide(AppConfig.layer(loadConfig(env))))))

  it("uses the stub for both currencies only with PAYMENTS=stub and no gateway configured", () => {
    const p = payments({ PAYMENTS: "stub" })
    expect(p.mode).toBe("stub")
    expect(p.live).toEqual({ gw_card: false, gw_upi: false })
    expect(p.forCurrency("INR")?.name).toBe("stub")
    expect(p.forCurrency("USD")?.name).toBe("stub")
    expect(p.forCurrency("USD")?.chargeSaved).toBeDefined()
  })

  it("has no gateway at all with PAYMENTS=gateways and none configured", () => {
    const p = payments({ PAYMENTS: "gateways" })
    expect(p.mode).toBe("gateways")
    expect(p.forCurrency("INR")).toBeUndefined()
    expect(p.forCurrency("USD")).toBeUndefined()
  })

  it("routes INR to gw_upi and USD to gw_card when each has all its keys; never the stub beside them", () => {
    const both = payments({
      PAYMENTS: "stub",
      GW_CARD_API_URL: "https://card.example",
      GW_CARD_SECRET_KEY: "sk",
      GW_UPI_API_URL: "https://upi.example",
      GW_UPI_KEY_ID: "kid",
      GW_UPI_KEY_SECRET: "ks",
    })
    expect(both.live).toEqual({ gw_card: true, gw_upi: true })
    expect(both.mode).toBe("gateways")
    expect(both.forCurrency("INR")?.name).toBe("gw_upi")
    expect(both.forCurrency("USD")?.name).toBe("gw_card")

    // PAYMENTS=stub does not bring the stub back for the currency a real gateway leaves uncovered.
    const cardOnly = payments({ PAYMENTS: "stub", GW_CARD_API_URL: "https://card.example", GW_CARD_SECRET_KEY: "sk" })
    expect(cardOnly.live).toEqual({ gw_card: true, gw_upi: false })
    expect(cardOnly.mode).toBe("gateways")
    expect(cardOnly.forCurrency("USD")?.name).toBe("gw_card")
    expect(cardOnly.forCurrency("INR")).toBeUndefined()

    // A half-configured gateway (no key secret) is not live.
    const upiHalf = payments({ PAYMENTS: "stub", GW_UPI_API_URL: "https://upi.example", GW_UPI_KEY_ID: "kid" })
    expect(upiHalf.live).toEqual({ gw_card: false, gw_upi: false })
    expect(upiHalf.forCurrency("INR")?.name).toBe("stub")
  })

  it("sends real requests to the configured gateways", async () => {
    const card = await startFakeGwCard({ secretKey: "sk_live_cfg", webhookSecret: "w" })
    const upi = await startFakeGwUpi({ keyId: "kid_cfg", keySecret: "ks_cfg", webhookSecret: "w" })
    try {
      const p = makePayments(
        loadConfig({
          GW_CARD_API_URL: card.url,
          GW_CARD_SECRET_KEY: "sk_live_cfg",
          GW_UPI_API_URL: upi.url,
          GW_UPI_KEY_ID: "kid_cfg",
          GW_UPI_KEY_SECRET: "ks_cfg",
        }),
      )
      const usd = await p.forCurrency("USD")!.createCheckout(request())
      const inr = await p.forCurrency("INR")!.createCheckout(request({ currency: "INR", amountMinor: 10_000 }))
      expect(card.sessions.has(usd.externalId)).toBe(true)
      expect(upi.orders.has(inr.externalId)).toBe(true)
      expect(card.requests).toHaveLength(1)
      expect(upi.requests).toHaveLength(1)
    } finally {
      await card.close()
      await upi.close()
    }
  })
})
