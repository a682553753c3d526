// POST /billing/topup and PUT|POST /billing/autocharge: adding money, now or automatically (on a
// method saved by a top-up with save_payment_method; bounds in src/billing/pricing.ts).

import { Effect } from "effect"
import { z } from "zod"
import { auditActorOf } from "../../src/auth/principal.js"
import { setAutocharge } from "../../src/billing/autocharge.service.js"
import { topup } from "../../src/billing/payments.service.js"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { baseUrl } from "../base-url.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"

const MAX_TOPUP_MINOR = 10_000_000
const Amount = z.number().int("must be a whole number of minor units").min(1).max(MAX_TOPUP_MINOR)

export const billingTopup = route({
  method: "POST",
  path: "/billing/topup",
  auth: "jwt",
  summary: "Start a top-up: a pending intent and a checkout URL; the wallet is credited by the gateway's webhook",
  tags: ["billing"],
  body: {
    json: z.object({
      amount_minor: Amount,
      return_url: z
        .url({ protocol: /^https?$/ })
        .max(2000)
        .optional(),
      /** Keep the payer's method (card, UPI token) for autocharge once this payment succeeds. */
      save_payment_method: z.boolean().optional(),
    }),
  },
  responses: {
    201: { description: "{intent_id, amount_minor, currency, status: pending, external_id, checkout_url}" },
  },
  handler: ({ principal, body, headers }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      const config = yield* AppConfig
      const b = body!
      return json(
        yield* topup(c.tenantId, b.amount_minor, {
          returnUrl: b.return_url,
          baseUrl: baseUrl(config, headers),
          saveMethod: b.save_payment_method === true,
        }),
        201,
      )
    }),
})

const AutochargeBody = z
  .object({
    enabled: z.boolean(),
    threshold_minor: Amount.nullable().optional(),
    amount_minor: Amount.nullable().optional(),
  })
  .refine((b) => !b.enabled || (b.threshold_minor != null && b.amount_minor != null), {
    message: "enabling autocharge needs threshold_minor and amount_minor",
    path: ["threshold_minor"],
  })

const autocharge = (method: "PUT" | "POST") =>
  route({
    method,
    path: "/billing/autocharge",
    auth: "jwt",
    // A money setting: it spends from the owner's saved card, so owners and admins (admin keys) set it.
    permission: "admin",
    audit: "service",
    summary:
      "Top up automatically from a saved payment method when a debit takes the balance under a threshold (409 " +
      "PAYMENT_METHOD_REQUIRED without one)",
    tags: ["billing"],
    body: { json: AutochargeBody },
    handler: ({ principal, body, clientIp }) =>
      Effect.gen(function* () {
        const c = yield* callerOf(principal)
        const b = body!
        const settings = yield* setAutocharge(auditActorOf(c, clientIp), {
          enabled: b.enabled,
          thresholdMinor: b.threshold_minor ?? null,
          amountMinor: b.amount_minor ?? null,
        })
        return json({ autocharge: settings })
      }),
  })

export const billingAutochargePut = autocharge("PUT")
export const billingAutochargePost = autocharge("POST")
