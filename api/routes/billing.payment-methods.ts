// GET /billing/payment-methods and DELETE /billing/payment-methods/{id}: the methods top-ups saved
// for autocharge. Removing the last one of a gateway turns autocharge off.
import { Effect } from "effect"
import { z } from "zod"
import { listPaymentMethods, removePaymentMethod } from "../../src/billing/payments.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"

export const paymentMethodsList = route({
  method: "GET",
  path: "/billing/payment-methods",
  auth: "jwt",
  summary: "Saved payment methods (for autocharge), newest first",
  tags: ["billing"],
  handler: ({ principal }) =>
    Effect.flatMap(callerOf(principal), (c) => Effect.map(listPaymentMethods(c.tenantId), (r) => json(r))),
})

export const paymentMethodsDelete = route({
  method: "DELETE",
  path: "/billing/payment-methods/{id}",
  auth: "jwt",
  permission: "admin",
  summary: "Forget a saved payment method (autocharge turns off when none is left for its gateway)",
  tags: ["billing"],
  params: z.object({ id: Id }),
  handler: ({ principal, params }) =>
    Effect.flatMap(callerOf(principal), (c) => Effect.map(removePaymentMethod(c.tenantId, params.id), (r) => json(r))),
})
