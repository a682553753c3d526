// gw_card's payment_intent.succeeded credits a checkout top-up (issue 32): found by the spec's
// data.object.payment_intent (the stored checkout session id) and by the gateway's own shape
// (data.object.id, the session's PaymentIntent, our intent id in its metadata); only signed, only
// with the intent's amount and currency, and once per intent and per event id whichever comes first.
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { TRIAL_CREDIT_MINOR } from "../../src/billing/pricing.js"
import { signGwCard } from "../../src/providers/payments/signatures.js"
import { api, type Session } from "../support/clients.js"
import { type FakeGwCard, type FakeGwUpi, startFakeGateways } from "../support/fake-gateways.js"
import { startTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any>

let srv: TestServer
let a: ReturnType<typeof api>
let card: FakeGwCard
let upi: FakeGwUpi
let secret = ""
let hook = ""

beforeAll(async () => {
  const gateways = await startFakeGateways()
  ;({ card, upi } = gateways)
  secret = gateways.env["GW_CARD_WEBHOOK_SECRET"]!
  srv = await startTestServer({ env: gateways.env })
  a = api(srv)
  hook = `${srv.url}/billing/webhooks/gw_card`
})
afterAll(async () => {
  await srv?.stop()
  await card?.close()
  await upi?.close()
})

const rid = (prefix: string) => `${prefix}${randomBytes(10).toString("hex")}`

/** A gateway event as gw_card sends it, signed (or signed with `opts.secret`, or unsigned when null). */
async function send(type: string, object: Json, opts: { eventId?: string; secret?: string | null } = {}) {
  const eventId = opts.eventId ?? rid("evt_")
  const now = Math.floor(Date.now() / 1000)
  const payload = JSON.stringify({
    id: eventId,
    object: "event",
    type,
    created: now,
    livemode: false,
    data: { object },
  })
  const headers: Record<string, string> = { "content-type": "application/json" }
  if (opts.secret !== null) headers["gw_card-Signature"] = signGwCard(payload, opts.secret ?? secret, now)
  const res = await fetch(hook, { method: "POST", headers, body: payload })
  const text = await res.text()
  return { status: res.status, body: (text === "" ? {} : JSON.parse(text)) as Json, eventId }
}

const outcomeOf = async (p: Promise<{ status: number; body: Json }>) => {
  const r = await p
  expect(r.status).toBe(200)
  return r.body["outcome"] as string
}

interface Topup {
  readonly s: Session
  readonly intentId: number
  readonly sessionId: string
}

async function topup(amount = 2000): Promise<Topup> {
  const s = await a.signup({ country: "US" })
  const res = await a.call("POST", "/billing/topup", { token: s.token, body: { amount_minor: amount } })
  expect(res.status).toBe(201)
  const intent = (await res.json()) as Json
  expect(intent).toMatchObject({ gateway: "gw_card", status: "pending", currency: "USD" })
  return { s, intentId: intent["intent_id"], sessionId: intent["external_id"] }
}

/** The spec's shape: a PaymentIntent whose payment_intent names the checkout session. */
const specIntent = (t: Topup, over: Json = {}) => ({
  object: "payment_intent",
  id: rid("pi_"),
  payment_intent: t.sessionId,
  amount: 2000,
  amount_received: 2000,
  currency: "usd",
  status: "succeeded",
  ...over,
})

/** The gateway's own shape: the session's PaymentIntent, with the metadata our checkout gave it. */
const gatewayIntent = (t: Topup, piId: string, over: Json = {}) => ({
  object: "payment_intent",
  id: piId,
  amount: 2000,
  amount_received: 2000,
  currency: "usd",
  status: "succeeded",
  customer: null,
  payment_method: rid("pm_"),
  metadata: card.sessions.get(t.sessionId)!.payment_intent_metadata,
  ...over,
})

const sessionCompleted = (t: Topup, piId: string) => ({
  object: "checkout.session",
  id: t.sessionId,
  amount_total: 2000,
  currency: "usd",
  payment_status: "paid",
  status: "complete",
  metadata: card.sessions.get(t.sessionId)!.metadata,
  payment_intent: piId,
})

/** Balance, ledger rows of the intent, and its status. */
async function state(t: Topup) {
  const [w] = await srv.sql<[{ balance_minor: number }]>`
    select balance_minor from wallets where tenant_id = ${t.s.tenantId}`
  const entries = await srv.sql<Array<{ amount_minor: number; kind: string }>>`
    select amount_minor, kind from ledger_entries
    where tenant_id = ${t.s.tenantId} and idempotency_key = ${`intent:${t.intentId}`}`
  const [i] = await srv.sql<[{ status: string }]>`select status from payment_intents where id = ${t.intentId}`
  return { credited: w.balance_minor - TRIAL_CREDIT_MINOR.USD, entries: [...entries], status: i.status }
}

const creditedOnce = { credited: 2000, entries: [{ amount_minor: 2000, kind: "topup" }], status: "succeeded" }
const untouched = { credited: 0, entries: [], status: "pending" }

describe("gw_card payment_intent.succeeded", () => {
  it("credits the checkout session that data.object.payment_intent names (the spec's rule), once", async () => {
    const t = await topup()
    const first = await send("payment_intent.succeeded", specIntent(t))
    expect(first).toMatchObject({ status: 200, body: { received: true, outcome: "credited" } })
    expect(await state(t)).toEqual(creditedOnce)
    const [ev] = await srv.sql`select outcome, intent_id from payment_events
      where source = 'gw_card' and event_id = ${first.eventId}`
    expect(ev).toEqual({ outcome: "credited", intent_id: t.intentId })

    // The same event again, another event naming it, and the session's own completion: no second credit.
    expect(await outcomeOf(send("payment_intent.succeeded", specIntent(t), { eventId: first.eventId }))).toBe(
      "duplicate",
    )
    expect(await outcomeOf(send("payment_intent.succeeded", specIntent(t)))).toBe("already_settled")
    expect(await outcomeOf(send("checkout.session.completed", sessionCompleted(t, rid("pi_"))))).toBe("already_settled")
    expect(await state(t)).toEqual(creditedOnce)

    // A payload that does not say it is a PaymentIntent is found the same way.
    const bare = await topup()
    const { object: _, id: __, ...fields } = specIntent(bare)
    expect(await outcomeOf(send("payment_intent.succeeded", fields))).toBe("credited")
    expect(await state(bare)).toEqual(creditedOnce)
  })

  it("moves nothing unless it is signed and states the intent's amount and currency", async () => {
    const t = await topup()
    expect((await send("payment_intent.succeeded", specIntent(t), { secret: "whsec_wrong" })).status).toBe(401)
    expect((await send("payment_intent.succeeded", specIntent(t), { secret: null })).status).toBe(401)
    expect(
      await outcomeOf(send("payment_intent.succeeded", specIntent(t, { amount: 1999, amount_received: 1999 }))),
    ).toBe("amount_mismatch")
    expect(
      await outcomeOf(
        send("payment_intent.succeeded", specIntent(t, { amount: undefined, amount_received: undefined })),
      ),
    ).toBe("amount_mismatch")
    expect(await outcomeOf(send("payment_intent.succeeded", specIntent(t, { currency: "eur" })))).toBe(
      "currency_mismatch",
    )
    expect(await outcomeOf(send("payment_intent.succeeded", specIntent(t, { currency: undefined })))).toBe(
      "currency_mismatch",
    )
    // Naming another gateway's order or nothing of ours credits no one.
    expect(await outcomeOf(send("payment_intent.succeeded", specIntent(t, { payment_intent: "order_x" })))).toBe(
      "unknown_intent",
    )
    expect(await state(t)).toEqual(untouched)
    expect(await outcomeOf(send("payment_intent.succeeded", specIntent(t)))).toBe("credited")
    expect(await state(t)).toEqual(creditedOnce)
  })

  it("credits by the session's own PaymentIntent (data.object.id) when it comes before the session", async () => {
    const t = await topup()
    const pi = rid("pi_")
    expect(card.sessions.get(t.sessionId)!.payment_intent_metadata).toEqual({
      intent_id: String(t.intentId),
      tenant_id: String(t.s.tenantId),
    })
    // A declined attempt inside the checkout is not final: the payer may try another card.
    const declined = await send(
      "payment_intent.payment_failed",
      gatewayIntent(t, pi, { status: "requires_payment_method" }),
    )
    expect(declined.body.outcome).toBe("unknown_intent")
    expect(await outcomeOf(send("payment_intent.succeeded", gatewayIntent(t, pi, { amount_received: 20 })))).toBe(
      "amount_mismatch",
    )
    expect(await state(t)).toEqual(untouched)

    expect(await outcomeOf(send("payment_intent.succeeded", gatewayIntent(t, pi)))).toBe("credited")
    expect(await state(t)).toEqual(creditedOnce)
    expect(await outcomeOf(send("checkout.session.completed", sessionCompleted(t, pi)))).toBe("already_settled")
    expect(await state(t)).toEqual(creditedOnce)
    // Its session id stays the intent's external id.
    const [row] = await srv.sql`select external_id from payment_intents where id = ${t.intentId}`
    expect(row).toEqual({ external_id: t.sessionId })

    // And in the gateway's usual order, the session credits and its PaymentIntent finds it settled.
    const u = await topup()
    const paid = await card.pay(hook, u.sessionId)
    expect(JSON.parse(paid.session.body)).toEqual({ received: true, outcome: "credited" })
    expect(JSON.parse(paid.paymentIntent.body)).toEqual({ received: true, outcome: "already_settled" })
    expect(await state(u)).toEqual(creditedOnce)
  })

  it("credits once when the session's events, in both shapes, arrive ten times each at once", async () => {
    const t = await topup()
    const pi = rid("pi_")
    const events = [
      { type: "checkout.session.completed", object: sessionCompleted(t, pi), eventId: rid("evt_s") },
      { type: "payment_intent.succeeded", object: specIntent(t), eventId: rid("evt_p") },
      { type: "payment_intent.succeeded", object: gatewayIntent(t, pi), eventId: rid("evt_g") },
    ]
    const deliveries = await Promise.all(
      events.flatMap((e) => Array.from({ length: 10 }, () => send(e.type, e.object, { eventId: e.eventId }))),
    )
    expect(deliveries.map((d) => d.status)).toEqual(Array(30).fill(200))
    const outcomes = deliveries.map((d) => d.body.outcome as string)
    expect(outcomes.filter((o) => o === "credited")).toHaveLength(1)
    expect(outcomes.filter((o) => o === "already_settled")).toHaveLength(2)
    expect(outcomes.filter((o) => o === "duplicate")).toHaveLength(27)
    expect(await state(t)).toEqual(creditedOnce)
    const recorded = await srv.sql`select event_id, intent_id from payment_events
      where source = 'gw_card' and event_id in ${srv.sql(events.map((e) => e.eventId))} order by event_id`
    expect(recorded).toHaveLength(3)
    expect(recorded.every((r) => r["intent_id"] === t.intentId)).toBe(true)
  })
})
