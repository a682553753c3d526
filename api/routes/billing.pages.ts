// GET /billing/gw_upi/checkout and GET /billing/return: the pages around a payment. The checkout
// page (the spec's ?order_id&key_id, or our older ?intent&order_id links) opens the UPI gateway's
// payment modal for a stored intent and returns to /billing/return either way; the return page
// says the wallet is credited once the gateway's webhook confirms.
import { Effect } from "effect"
import { z } from "zod"
import { upiCheckoutIntent } from "../../src/billing/payments.service.js"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { NotFound, ValidationFailed } from "../../src/platform/errors.js"
import { formatAmount } from "../../src/platform/money.js"
import { esc, page, scriptJson } from "../html.js"
import { route } from "../route.js"
import { QueryInt } from "../schemas.js"

const Token = z.string().regex(/^[A-Za-z0-9_:-]{1,100}$/, "must be a gateway identifier")

const CheckoutQuery = z
  .object({
    order_id: Token.describe("the gateway order id of a top-up (POST /billing/topup's external_id)"),
    key_id: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe("the gateway key id this deployment is configured with (required, except on legacy links with intent)"),
    amount: QueryInt(1, Number.MAX_SAFE_INTEGER)
      .optional()
      .describe("informational: the page shows and charges the order's stored amount"),
    currency: z
      .string()
      .regex(/^[A-Za-z]{3}$/, "must be a currency code")
      .default("INR"),
    intent: QueryInt(1, Number.MAX_SAFE_INTEGER)
      .optional()
      .describe("legacy links: the intent id, which must then be the order's"),
  })
  .refine((q) => q.key_id !== undefined || q.intent !== undefined, {
    path: ["key_id"],
    message: "is required",
  })

const wrongKey = () =>
  new ValidationFailed({
    message: "invalid query: key_id: is not this deployment's gw_upi key id",
    errors: [{ field: "key_id", message: "is not this deployment's gw_upi key id" }],
  })

export const gwUpiCheckout = route({
  method: "GET",
  path: "/billing/gw_upi/checkout",
  auth: "public",
  summary:
    "Hosted page that opens the UPI gateway's payment modal for a pending top-up, found by its gateway order id. " +
    "An unknown order id is 404; a key_id other than the configured one is 422.",
  tags: ["billing"],
  query: CheckoutQuery,
  responses: { 200: { description: "HTML", contentType: "text/html" }, 404: { description: "No such checkout" } },
  handler: ({ query }) =>
    Effect.gen(function* () {
      const config = yield* AppConfig
      // Key, amount and currency come from configuration and the stored intent, never the query:
      // a forged link cannot show or ask for another amount. The order id is the link's secret.
      if (config.gwUpi === undefined) return yield* Effect.fail(new NotFound({ message: "no such checkout" }))
      if (query.key_id !== undefined && query.key_id !== config.gwUpi.keyId) return yield* Effect.fail(wrongKey())
      const intent = yield* upiCheckoutIntent(query.order_id, query.intent)
      const back = (status: string) =>
        `/billing/return?status=${status}&order_id=${encodeURIComponent(intent.external_id)}`
      if (intent.status !== "pending")
        return page(
          "Payment",
          `<h1>Wallet top-up</h1><p>This payment is already ${esc(intent.status)}.</p>` +
            `<p><a href="${esc(back(intent.status))}">Continue</a></p>`,
        )
      const options = {
        key: config.gwUpi.keyId,
        order_id: intent.external_id,
        amount: intent.amount_minor,
        currency: intent.currency,
        name: "Parley",
        description: "Wallet top-up",
        ...(intent.save_method && { recurring: "1" }),
      }
      const script =
        config.gwUpiCheckoutScript === undefined ? "" : `<script src="${esc(config.gwUpiCheckoutScript)}"></script>`
      const amount = esc(formatAmount(intent.amount_minor, intent.currency))
      return page(
        "Pay with UPI",
        `<h1>Parley wallet top-up</h1><p>Amount: <strong>${amount}</strong></p>` +
          `<p class="muted">Order ${esc(intent.external_id)}</p>
<p id="status">Opening the payment window…</p>
<p><a href="${esc(back("cancelled"))}">Cancel and go back</a></p>
${script}
<script>
(function () {
  var options = ${scriptJson(options)};
  function go(status) { location.href = ${scriptJson(back("__S__"))}.replace("__S__", status); }
  // The gateway's checkout script exposes a modal constructor; without it, say so instead of hanging.
  var Modal = window.GwUpiCheckout;
  if (typeof Modal !== "function") {
    document.getElementById("status").textContent =
      "The payment window could not be loaded. Check your connection and reload.";
    return;
  }
  options.handler = function () { go("success"); };
  options.modal = { ondismiss: function () { go("dismissed"); } };
  new Modal(options).open();
})();
</script>`,
      )
    }),
})

const PENDING_TEXT = "Your payment is being processed; the wallet is credited once the gateway confirms it."

const RETURN_TEXT: Record<string, string> = {
  success:
    "Thank you. Your payment went through; the wallet is credited as soon as the payment gateway confirms it, " +
    "usually within a minute.",
  pending: PENDING_TEXT,
  dismissed: "The payment window was closed before paying. Nothing was charged.",
  cancelled: "The payment was cancelled. Nothing was charged.",
}

export const billingReturn = route({
  method: "GET",
  path: "/billing/return",
  auth: "public",
  summary: "Where the customer lands after a checkout; the wallet is credited later by webhook",
  tags: ["billing"],
  query: z.object({ status: z.string().max(40).default(""), order_id: z.string().max(200).default("") }),
  responses: { 200: { description: "HTML", contentType: "text/html" } },
  handler: ({ query }) =>
    Effect.succeed(
      page(
        "Payment",
        `<h1>Wallet top-up</h1><p>${esc(RETURN_TEXT[query.status] ?? PENDING_TEXT)}</p>
${query.order_id ? `<p class="muted">Reference ${esc(query.order_id)}</p>` : ""}
<p class="muted">Check your balance in the dashboard or with GET /billing/balance.</p>`,
      ),
    ),
})
