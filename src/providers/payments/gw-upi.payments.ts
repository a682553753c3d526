// The UPI gateway adapter (gw_upi, INR): an order created with HTTP Basic key id and secret, the
// payer sent to our own hosted page for it; and recurring payments on a token saved at such a
// checkout (autocharge).
import { Buffer } from "node:buffer"
import {
  assertChargeableAmount,
  type CheckoutRequest,
  type CheckoutSession,
  declinedAsFailure,
  intField,
  type PaymentGateway,
  PaymentGatewayError,
  postToGateway,
  type SavedChargeRequest,
  type SavedChargeResult,
  stringField,
  trimSlash,
} from "./payments.interface.js"

/**
 * Most a saved UPI token may be charged in one payment, in paise (₹50,000): the mandate's own
 * ceiling, equal to the largest autocharge amount Parley allows (pricing.ts).
 */
export const GW_UPI_TOKEN_MAX_AMOUNT = 5_000_000

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
  const root = trimSlash(opts.apiUrl)
  const timeoutMs = opts.timeoutMs ?? 10_000
  const doFetch = opts.fetch ?? fetch
  const basic = Buffer.from(`${opts.keyId}:${opts.keySecret}`, "utf8").toString("base64")
  const post = (path: string, body: unknown) =>
    postToGateway({
      gateway: "gw_upi",
      url: `${root}${path}`,
      headers: { authorization: `Basic ${basic}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      timeoutMs,
      fetch: doFetch,
      secrets: [opts.keySecret, basic],
    })

  return {
    name: "gw_upi",
    async createCheckout(req: CheckoutRequest): Promise<CheckoutSession> {
      if (req.currency !== "INR") throw new PaymentGatewayError(`gw_upi charges INR only, not ${req.currency}`, false)
      assertChargeableAmount("gw_upi", req.amountMinor)
      // Saving the method: the order belongs to a customer and asks for a recurring token, which
      // the captured payment's webhook names (token_id, customer_id).
      let recurring: Record<string, unknown> = {}
      if (req.savePaymentMethod === true) {
        const customer = await post("/v1/customers", {
          name: `Parley workspace ${req.tenantId}`,
          fail_existing: "0",
          notes: { tenant_id: String(req.tenantId) },
        })
        const customerId = stringField(customer, "id")
        if (customerId === undefined) throw new PaymentGatewayError("gw_upi API answered without a customer id", false)
        recurring = {
          customer_id: customerId,
          method: "upi",
          token: { max_amount: GW_UPI_TOKEN_MAX_AMOUNT, frequency: "as_presented" },
        }
      }
      const body = await post("/v1/orders", {
        amount: req.amountMinor,
        currency: "INR",
        receipt: `intent_${req.intentId}`,
        // The gateway keeps notes as string values and echoes them in webhooks.
        notes: { intent_id: String(req.intentId), tenant_id: String(req.tenantId) },
        ...recurring,
      })
      const orderId = stringField(body, "id")
      if (orderId === undefined) throw new PaymentGatewayError("gw_upi API answered without an order id", false)
      // The page finds amount, key and order from the stored intent; the order id proves the link.
      const query = new URLSearchParams({ intent: String(req.intentId), order_id: orderId })
      return {
        externalId: orderId,
        checkoutUrl: `${trimSlash(req.baseUrl)}/billing/gw_upi/checkout?${query.toString()}`,
      }
    },

    async chargeSaved(req: SavedChargeRequest): Promise<SavedChargeResult> {
      if (req.currency !== "INR") throw new PaymentGatewayError(`gw_upi charges INR only, not ${req.currency}`, false)
      assertChargeableAmount("gw_upi", req.amountMinor)
      const notes = { intent_id: String(req.intentId), tenant_id: String(req.tenantId), purpose: "autocharge" }
      const order = await post("/v1/orders", {
        amount: req.amountMinor,
        currency: "INR",
        receipt: `intent_${req.intentId}`,
        payment_capture: 1,
        notes,
      })
      const orderId = stringField(order, "id")
      if (orderId === undefined) throw new PaymentGatewayError("gw_upi API answered without an order id", false)
      // An order takes one successful payment, so a retried request cannot charge twice.
      return declinedAsFailure(async () => {
        const body = await post("/v1/payments/create/recurring", {
          amount: req.amountMinor,
          currency: "INR",
          order_id: orderId,
          customer_id: req.customerId,
          token: req.methodId,
          recurring: "1",
          description: "Parley wallet autocharge",
          notes,
        })
        const status = stringField(body, "status")
        const result = {
          externalId: orderId,
          amountMinor: intField(body, "amount"),
          currency: stringField(body, "currency")?.toUpperCase(),
          raw: body,
        }
        if (status === "captured") return { status: "succeeded", ...result }
        if (status === "failed")
          return { status: "failed", reason: stringField(body, "error_description") ?? "payment failed", ...result }
        // created, authorized: payment.captured or payment.failed will say.
        return { status: "pending", ...result }
      }).then((r) => (r.externalId === undefined ? { ...r, externalId: orderId } : r))
    },
  }
}
