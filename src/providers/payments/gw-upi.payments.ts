// The UPI gateway adapter (gw_upi, INR): an order created with HTTP Basic key id and secret; the
// payer is sent to our own hosted page, which opens the gateway's payment modal for that order.
import { Buffer } from "node:buffer"
import {
  assertChargeableAmount,
  PaymentGatewayError,
  postToGateway,
  stringField,
  trimSlash,
  type CheckoutRequest,
  type CheckoutSession,
  type PaymentGateway,
} from "./payments.interface.js"

export interface GwUpiOptions {
  /** The API root without /v1, e.g. https://api.gw-upi.example. */
  readonly apiUrl: string
  /** Public key id (it also goes to the payer's browser, in the checkout page). */
  readonly keyId: string
  readonly keySecret: string
  /** Limit for each attempt (connect, request and response body); default 10000 ms. */
  readonly timeoutMs?: number
  /** Replaces the global fetch (tests). */
  readonly fetch?: typeof fetch
}

export function makeGwUpiGateway(opts: GwUpiOptions): PaymentGateway {
  const url = `${trimSlash(opts.apiUrl)}/v1/orders`
  const timeoutMs = opts.timeoutMs ?? 10_000
  const doFetch = opts.fetch ?? fetch
  const basic = Buffer.from(`${opts.keyId}:${opts.keySecret}`, "utf8").toString("base64")

  return {
    name: "gw_upi",
    async createCheckout(req: CheckoutRequest): Promise<CheckoutSession> {
      if (req.currency !== "INR") throw new PaymentGatewayError(`gw_upi charges INR only, not ${req.currency}`, false)
      assertChargeableAmount("gw_upi", req.amountMinor)
      const body = await postToGateway({
        gateway: "gw_upi",
        url,
        headers: { authorization: `Basic ${basic}`, "content-type": "application/json" },
        body: JSON.stringify({
          amount: req.amountMinor,
          currency: "INR",
          receipt: `intent_${req.intentId}`,
          // The gateway keeps notes as string values and echoes them in webhooks.
          notes: { intent_id: String(req.intentId), tenant_id: String(req.tenantId) },
        }),
        timeoutMs,
        fetch: doFetch,
        secrets: [opts.keySecret, basic],
      })
      const orderId = stringField(body, "id")
      if (orderId === undefined) throw new PaymentGatewayError("gw_upi API answered without an order id", false)
      const query = new URLSearchParams({ order_id: orderId, key_id: opts.keyId, amount: String(req.amountMinor), currency: "INR" })
      return { externalId: orderId, checkoutUrl: `${trimSlash(req.baseUrl)}/billing/gw_upi/checkout?${query.toString()}` }
    },
  }
}
