// GET/PUT /api/webhooks/wallet-threshold: the balance below which wallet.low is sent (minor units of
// the wallet's currency; null: the cost of 30 minutes at the bundled rate). Reading takes the read
// scope, a change admin, as every webhook setting does.
import { Effect } from "effect"
import { z } from "zod"
import { getWalletThreshold, putWalletThreshold } from "../../src/billing/wallet-events.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"

const DOC =
  "{low_threshold_minor (the workspace's own, or null for the default), effective_low_threshold_minor, " +
  "default_low_threshold_minor (30 minutes at the bundled rate), currency}"
const tags = ["webhooks"]

export const webhookWalletThresholdGet = route({
  method: "GET",
  path: "/api/webhooks/wallet-threshold",
  auth: "jwt",
  summary: "The wallet balance below which wallet.low is sent",
  tags,
  responses: { 200: { description: DOC } },
  handler: ({ principal }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* getWalletThreshold(caller.tenantId))
    }),
})

export const webhookWalletThresholdPut = route({
  method: "PUT",
  path: "/api/webhooks/wallet-threshold",
  auth: "jwt",
  permission: "admin",
  summary:
    "Set the balance below which wallet.low is sent: {low_threshold_minor: a whole number of minor units " +
    "(0 turns wallet.low off) or null for the default}; wallet.low is armed again",
  tags,
  body: {
    json: z.object({
      low_threshold_minor: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).nullable(),
    }),
  },
  responses: { 200: { description: DOC } },
  handler: ({ principal, body }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* putWalletThreshold(caller.tenantId, body!.low_threshold_minor))
    }),
})
