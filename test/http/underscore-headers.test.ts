// The spec's webhook headers as the spec spells them (gw_card-Signature, X-gw_upi-Signature,
// X-gw_upi-Event-Id, X-mail_b-Signature, X-telco_a-Signature, X-telco_b-Signature), sent straight
// to the server with no proxy in front. The engine before @based/uws 6.0.1 dropped every request
// carrying "_" in a header name unanswered; now each is read: a good signature is accepted, a bad
// one is a 401 in the contract's shape, and the hyphenated spelling still works.
import { createHmac } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { signGwCard, signGwUpi } from "../../src/providers/payments/signatures.js"
import { startTestServer, type TestServer } from "../support/harness.js"

const GW_CARD = "whsec_underscore_card"
const GW_UPI = "upi_underscore_secret"
const MAIL_B = "mail_b_underscore_secret"

let srv: TestServer
beforeAll(async () => {
  srv = await startTestServer({
    env: { GW_CARD_WEBHOOK_SECRET: GW_CARD, GW_UPI_WEBHOOK_SECRET: GW_UPI, MAIL_B_WEBHOOK_SECRET: MAIL_B },
  })
})
afterAll(async () => srv?.stop())

/** POSTs within 5 s or fails saying nothing answered (what the old engine did). */
async function post(path: string, headers: Record<string, string>, body: string) {
  const res = await fetch(srv.url + path, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
    signal: AbortSignal.timeout(5_000),
  })
  return { status: res.status, body: (await res.json()) as Record<string, unknown> }
}

const now = () => Math.floor(Date.now() / 1000)
const refused = { code: "INVALID_SIGNATURE", error: expect.any(String) }

describe("the spec's underscore headers, no proxy in front", () => {
  it("gw_card-Signature: a good signature is read and acknowledged, a bad one is 401", async () => {
    const raw = JSON.stringify({ id: "evt_us_1", type: "customer.created", data: { object: { id: "cus_1" } } })
    const good = await post("/billing/webhooks/gw_card", { "gw_card-Signature": signGwCard(raw, GW_CARD, now()) }, raw)
    expect(good).toEqual({ status: 200, body: { received: true, outcome: "ignored" } })
    const bad = await post("/billing/webhooks/gw_card", { "gw_card-Signature": signGwCard(raw, "other", now()) }, raw)
    expect(bad).toMatchObject({ status: 401, body: refused })
    const hyphen = await post(
      "/billing/webhooks/gw_card",
      { "gw-card-Signature": signGwCard(raw, GW_CARD, now()) },
      raw,
    )
    expect(hyphen.status).toBe(200)
  })

  it("X-gw_upi-Signature and X-gw_upi-Event-Id are read", async () => {
    const raw = JSON.stringify({ event: "order.notified", payload: {} })
    // The event id is required (header or payment id): answered 200, the header was read.
    const good = await post(
      "/billing/webhooks/gw_upi",
      { "X-gw_upi-Signature": signGwUpi(raw, GW_UPI), "X-gw_upi-Event-Id": "evt_upi_us_1" },
      raw,
    )
    expect(good).toEqual({ status: 200, body: { received: true, outcome: "ignored" } })
    const noId = await post("/billing/webhooks/gw_upi", { "X-gw_upi-Signature": signGwUpi(raw, GW_UPI) }, raw)
    expect(noId).toMatchObject({ status: 400, body: { code: "BAD_REQUEST" } })
    const bad = await post(
      "/billing/webhooks/gw_upi",
      { "X-gw_upi-Signature": signGwUpi(raw, "other"), "X-gw_upi-Event-Id": "evt_upi_us_2" },
      raw,
    )
    expect(bad).toMatchObject({ status: 401, body: refused })
  })

  it("X-mail_b-Signature is read", async () => {
    const raw = JSON.stringify({ event: "delivered", msgid: "unknown-message", to: "a@example.com", ts: 1 })
    const sig = (secret: string) => createHmac("sha256", secret).update(raw).digest("hex")
    const good = await post("/email/webhooks/mail_b", { "X-mail_b-Signature": sig(MAIL_B) }, raw)
    expect(good.status).toBe(200)
    const bad = await post("/email/webhooks/mail_b", { "X-mail_b-Signature": sig("other") }, raw)
    expect(bad).toMatchObject({ status: 401 })
  })

  it("X-telco_a-Signature and X-telco_b-Signature reach the carriers' routes (a forged one is 401)", async () => {
    const a = await fetch(`${srv.url}/voice/telco_a/incoming?tenant_id=1`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", "X-telco_a-Signature": "forged" },
      body: "CallSid=CA1&From=%2B15550100&To=%2B15550101",
      signal: AbortSignal.timeout(5_000),
    })
    expect(a.status).toBe(401)
    const b = await post("/voice/telco_b/incoming", { "X-telco_b-Signature": "00".repeat(32) }, '{"uuid":"u1"}')
    expect(b.status).toBe(401)
    expect(b.body).toMatchObject({ error: expect.any(String), code: expect.any(String) })
  })
})
