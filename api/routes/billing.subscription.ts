// GET, POST /billing/subscription and POST /billing/subscription/cancel: the byok plan's monthly
// platform fee, authorised by the customer through a mandate link.
import { Effect } from "effect"
import { cancelSubscription, createSubscription, getSubscription } from "../../src/billing/subscription.service.js"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { baseUrl } from "../base-url.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"

export const subscriptionGet = route({
  method: "GET",
  path: "/billing/subscription",
  auth: "jwt",
  summary: "The byok platform-fee subscription, if any",
  tags: ["billing"],
  handler: ({ principal }) =>
    Effect.flatMap(callerOf(principal), (c) => Effect.map(getSubscription(c.tenantId), (r) => json(r))),
})

export const subscriptionCreate = route({
  method: "POST",
  path: "/billing/subscription",
  auth: "jwt",
  // A money setting (a recurring plan): owners and admins, logged in the audit log.
  permission: "admin",
  summary: "Subscribe to the byok plan: 201 with short_url to authorise the monthly mandate",
  tags: ["billing"],
  responses: { 201: { description: "{id, status: pending_authorisation, short_url, amount_minor, currency, …}" } },
  handler: ({ principal, headers }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      const config = yield* AppConfig
      const r = yield* createSubscription(c.tenantId, baseUrl(config, headers))
      return json(r.subscription, r.created ? 201 : 200)
    }),
})

export const subscriptionCancel = route({
  method: "POST",
  path: "/billing/subscription/cancel",
  auth: "jwt",
  permission: "admin",
  summary: "Cancel the subscription: no further monthly charges",
  tags: ["billing"],
  handler: ({ principal }) =>
    Effect.flatMap(callerOf(principal), (c) => Effect.map(cancelSubscription(c.tenantId), (s) => json(s))),
})
