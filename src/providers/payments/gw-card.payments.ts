// The card gateway adapter (gw_card, USD): a hosted Checkout Session created with the secret key,
// form-encoded, idempotent per intent; the payer is sent to the session's own URL.
import {
  appendQuery,
  assertChargeableAmount,
  PaymentGatewayError,
  postToGateway,
  stringField,
  trimSlash,
  type CheckoutRequest,
  type CheckoutSession,
  type PaymentGateway,
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
  }
}
