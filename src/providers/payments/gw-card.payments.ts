// The card gateway adapter (gw_card, USD): a hosted Checkout Session created with the secret key,
// form-encoded, idempotent per intent (the payer is sent to the session's own URL), and
// off-session PaymentIntents on a card saved at such a checkout (autocharge).
import {
  appendQuery,
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

export interface GwCardOptions {
  /** The API root without /v1, e.g. https://api.gw-card.example. */
  readonly apiUrl: string
  readonly secretKey: string
  /** Limit for each attempt (connect, request and response body); default 10000 ms. */
  readonly timeoutMs?: number
  /** Replaces the global fetch (tests). */
  readonly fetch?: typeof fetch
}

/** The line item's name on the gateway's checkout page and the payer's receipt. */
export const GW_CARD_PRODUCT_NAME = "Parley wallet top-up"

export function makeGwCardGateway(opts: GwCardOptions): PaymentGateway {
  const url = `${trimSlash(opts.apiUrl)}/v1/checkout/sessions`
  const intentsUrl = `${trimSlash(opts.apiUrl)}/v1/payment_intents`
  const timeoutMs = opts.timeoutMs ?? 10_000
  const doFetch = opts.fetch ?? fetch

  return {
    name: "gw_card",
    async createCheckout(req: CheckoutRequest): Promise<CheckoutSession> {
      assertChargeableAmount("gw_card", req.amountMinor)
      const form = new URLSearchParams()
      form.set("mode", "payment")
      form.set("line_items[0][price_data][currency]", req.currency.toLowerCase())
      form.set("line_items[0][price_data][unit_amount]", String(req.amountMinor))
      form.set("line_items[0][price_data][product_data][name]", GW_CARD_PRODUCT_NAME)
      form.set("line_items[0][quantity]", "1")
      // {CHECKOUT_SESSION_ID} is the gateway's template: it substitutes the session id on success.
      form.set("success_url", appendQuery(req.returnUrl, "status=succeeded&order_id={CHECKOUT_SESSION_ID}"))
      form.set("cancel_url", appendQuery(req.returnUrl, "status=cancelled"))
      form.set("client_reference_id", String(req.intentId))
      form.set("metadata[intent_id]", String(req.intentId))
      form.set("metadata[tenant_id]", String(req.tenantId))
      // Our intent id on the payment itself: its payment_intent.succeeded, which names only the
      // PaymentIntent, credits this top-up even when it overtakes checkout.session.completed.
      form.set("payment_intent_data[metadata][intent_id]", String(req.intentId))
      form.set("payment_intent_data[metadata][tenant_id]", String(req.tenantId))
      if (req.savePaymentMethod === true) {
        // A customer to keep the card on and the card kept for charges without the payer; the
        // payment's payment_intent.succeeded names the saved card.
        form.set("customer_creation", "always")
        form.set("payment_intent_data[setup_future_usage]", "off_session")
      }

      const body = await postToGateway({
        gateway: "gw_card",
        url,
        headers: {
          authorization: `Bearer ${opts.secretKey}`,
          "content-type": "application/x-www-form-urlencoded",
          // One session per intent however often we retry: a retry after a timed-out attempt the
          // gateway did process gets that same session back instead of a second one.
          "idempotency-key": `topup-${req.intentId}`,
        },
        body: form.toString(),
        timeoutMs,
        fetch: doFetch,
        secrets: [opts.secretKey],
        // 409: the same idempotency key is still being processed (our own timed-out attempt).
        alsoRetry: [409],
      })
      const externalId = stringField(body, "id")
      const checkoutUrl = stringField(body, "url")
      if (externalId === undefined || checkoutUrl === undefined) {
        throw new PaymentGatewayError("gw_card API answered without a session id and url", false)
      }
      return { externalId, checkoutUrl }
    },

    chargeSaved(req: SavedChargeRequest): Promise<SavedChargeResult> {
      assertChargeableAmount("gw_card", req.amountMinor)
      const form = new URLSearchParams()
      form.set("amount", String(req.amountMinor))
      form.set("currency", req.currency.toLowerCase())
      form.set("customer", req.customerId)
      form.set("payment_method", req.methodId)
      form.set("off_session", "true")
      form.set("confirm", "true")
      form.set("metadata[intent_id]", String(req.intentId))
      form.set("metadata[tenant_id]", String(req.tenantId))
      // A 402 (card_declined, authentication_required) is the gateway's answer, not an outage.
      return declinedAsFailure(async () => {
        const body = await postToGateway({
          gateway: "gw_card",
          url: intentsUrl,
          headers: {
            authorization: `Bearer ${opts.secretKey}`,
            "content-type": "application/x-www-form-urlencoded",
            // One charge per intent however often we retry.
            "idempotency-key": `autocharge-${req.intentId}`,
          },
          body: form.toString(),
          timeoutMs,
          fetch: doFetch,
          secrets: [opts.secretKey],
          alsoRetry: [409],
        })
        const status = stringField(body, "status")
        const result = {
          externalId: stringField(body, "id"),
          amountMinor: intField(body, "amount_received") ?? intField(body, "amount"),
          currency: stringField(body, "currency")?.toUpperCase(),
          raw: body,
        }
        if (status === "succeeded") return { status: "succeeded", ...result }
        if (status === "requires_payment_method" || status === "canceled")
          return { status: "failed", reason: `payment intent ${status}`, ...result }
        // processing, requires_action, requires_capture…: payment_intent.succeeded or .payment_failed will say.
        return { status: "pending", ...result }
      })
    },
  }
}
