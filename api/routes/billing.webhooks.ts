// POST /billing/webhooks/{gw_card,gw_upi,payment,stub}: gateways telling us how a payment went.
// Signatures are checked over the exact raw bytes; a bad one is 401 and changes nothing; each
// event id is applied once; amount and currency must match the intent; a valid event about an
// intent we don't know is acknowledged.
import { Effect } from "effect"
import { z } from "zod"
import { applyGatewayEvent, type GatewayEvent, type SavedMethodInfo } from "../../src/billing/payments.service.js"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { Clock } from "../../src/platform/Clock.js"
import { BadRequestBody, NotFound, Unauthenticated, type ValidationFailed } from "../../src/platform/errors.js"
import { jsonBody } from "../../src/platform/json.js"
import { Payments } from "../../src/providers/Payments.js"
import {
  verifyGenericSignature,
  verifyGwCardSignature,
  verifyGwUpiSignature,
} from "../../src/providers/payments/signatures.js"
import { json } from "../reply.js"
import { type Route, route } from "../route.js"
import { specHeader } from "../spec-header.js"

const badSignature = () =>
  Effect.fail(new Unauthenticated({ code: "INVALID_SIGNATURE", message: "missing or invalid webhook signature" }))

function parse<T>(raw: Buffer, schema: z.ZodType<T>): Effect.Effect<T, BadRequestBody | ValidationFailed> {
  // Bounded in depth: an event is stored whole (jsonb), and serialising a deep one overflows the stack.
  const parsed = jsonBody(raw.toString("utf8"), "webhook body")
  if (parsed instanceof Error) return Effect.fail(parsed)
  const r = schema.safeParse(parsed.value)
  return r.success
    ? Effect.succeed(r.data)
    : Effect.fail(
        new BadRequestBody({
          code: "BAD_REQUEST",
          message: `unexpected webhook body: ${r.error.issues[0]?.message ?? "invalid"}`,
        }),
      )
}

const ack = (ev: GatewayEvent) => Effect.map(applyGatewayEvent(ev), (r) => json({ received: true, outcome: r.outcome }))

const webhook = (path: string, summary: string, handler: Route["handler"]) =>
  route({ method: "POST", path, auth: "public", summary, tags: ["billing", "webhooks"], body: { raw: true }, handler })

const str = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined)
const num = (v: unknown) => (typeof v === "number" && Number.isSafeInteger(v) ? v : undefined)
const record = (v: unknown): Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {}
/** Our intent id as we put it in the gateway's metadata or notes (a decimal string). */
const ourIntentId = (v: unknown): number | undefined =>
  typeof v === "string" && /^[1-9]\d{0,15}$/.test(v) ? Number(v) : undefined

/** A UPI address shown masked: "ab•••@okbank". */
const maskVpa = (vpa: string | undefined): string => {
  if (vpa === undefined) return "UPI"
  const at = vpa.indexOf("@")
  return at <= 0 ? "UPI" : `${vpa.slice(0, Math.min(2, at))}•••${vpa.slice(at).slice(0, 40)}`
}

const GwCardEvent = z.object({
  id: z.string().min(1),
  type: z.string().min(1),
  data: z.object({ object: z.record(z.string(), z.unknown()) }),
})

export const gwCardWebhook = webhook(
  "/billing/webhooks/gw_card",
  "Card gateway events (gw_card-Signature)",
  ({ rawBody, headers }) =>
    Effect.gen(function* () {
      const config = yield* AppConfig
      const clock = yield* Clock
      const secret = config.gwCardWebhookSecret
      if (
        secret === undefined ||
        !verifyGwCardSignature(
          rawBody,
          specHeader(headers, "gw_card-signature"),
          secret,
          Math.floor(clock.nowMs() / 1000),
        )
      )
        return yield* badSignature()
      const ev = yield* parse(rawBody, GwCardEvent)
      const obj = ev.data.object
      let externalId: string | undefined
      let paymentId: string | undefined
      let outcome: GatewayEvent["outcome"] = "ignore"
      let amount: number | undefined
      let intentId: number | undefined
      let checkoutIntentId: number | undefined
      let savedMethod: SavedMethodInfo | undefined
      if (ev.type.startsWith("checkout.session.")) {
        externalId = str(obj["id"])
        amount = num(obj["amount_total"])
        if (ev.type === "checkout.session.completed" || ev.type === "checkout.session.async_payment_succeeded")
          outcome = obj["payment_status"] === "unpaid" ? "ignore" : "succeeded"
        else if (ev.type === "checkout.session.async_payment_failed" || ev.type === "checkout.session.expired")
          outcome = "failed"
      } else if (ev.type.startsWith("payment_intent.")) {
        // A PaymentIntent object names itself by id (an autocharge's stored external_id); the
        // spec's rule finds the intent by data.object.payment_intent (a checkout session's id).
        const ownId = obj["object"] === "payment_intent" ? str(obj["id"]) : undefined
        const named = str(obj["payment_intent"])
        amount = num(obj["amount_received"]) ?? num(obj["amount"])
        intentId = ourIntentId(record(obj["metadata"])["intent_id"])
        if (ev.type === "payment_intent.succeeded") {
          outcome = "succeeded"
          externalId = named ?? ownId
          paymentId = ownId
          // The checkout's PaymentIntent carries our intent id in metadata only our secret key sets.
          checkoutIntentId = intentId
        } else {
          // A failed attempt inside a checkout is not final (the payer may try another card), so
          // failures keep to the PaymentIntent they name, as before.
          externalId = obj["object"] === "payment_intent" ? ownId : named
          if (ev.type === "payment_intent.payment_failed" || ev.type === "payment_intent.canceled") outcome = "failed"
        }
        const customerId = str(obj["customer"])
        const methodId = str(obj["payment_method"])
        if (outcome === "succeeded" && customerId !== undefined && methodId !== undefined) {
          const card = record(record(obj["payment_method_details"])["card"])
          const brand = str(card["brand"])
          const last4 = str(card["last4"])
          savedMethod = {
            customerId,
            methodId,
            hint: last4 === undefined ? "card" : `${brand ?? "card"} •••• ${last4.slice(-4)}`,
          }
        }
      }
      return yield* ack({
        source: "gw_card",
        eventId: ev.id,
        type: ev.type,
        intent: externalId === undefined ? undefined : { gateway: "gw_card", externalId, paymentId },
        outcome,
        amountMinor: amount,
        currency: str(obj["currency"]),
        requireAmount: true,
        intentId,
        checkoutIntentId,
        savedMethod,
        payload: ev,
      })
    }),
)

const GwUpiEvent = z.object({
  event: z.string().min(1),
  payload: z
    .object({
      payment: z
        .object({
          entity: z.object({
            id: z.string().min(1),
            order_id: z.string().optional(),
            amount: z.number().int().optional(),
            currency: z.string().optional(),
            customer_id: z.string().nullish(),
            token_id: z.string().nullish(),
            vpa: z.string().nullish(),
            notes: z.unknown().optional(),
          }),
        })
        .optional(),
    })
    .optional(),
})

export const gwUpiWebhook = webhook(
  "/billing/webhooks/gw_upi",
  "UPI gateway events (X-gw_upi-Signature)",
  ({ rawBody, headers }) =>
    Effect.gen(function* () {
      const config = yield* AppConfig
      const secret = config.gwUpiWebhookSecret
      if (secret === undefined || !verifyGwUpiSignature(rawBody, specHeader(headers, "x-gw_upi-signature"), secret))
        return yield* badSignature()
      const ev = yield* parse(rawBody, GwUpiEvent)
      const payment = ev.payload?.payment?.entity
      const eventId = specHeader(headers, "x-gw_upi-event-id") || payment?.id
      if (eventId === undefined)
        return yield* Effect.fail(
          new BadRequestBody({ code: "BAD_REQUEST", message: "the event has no id (X-gw_upi-Event-Id or payment id)" }),
        )
      const outcome: GatewayEvent["outcome"] =
        ev.event === "payment.captured" ? "succeeded" : ev.event === "payment.failed" ? "failed" : "ignore"
      // A recurring token the payer granted with this payment (orders created to save the method).
      const customerId = str(payment?.customer_id)
      const tokenId = str(payment?.token_id)
      return yield* ack({
        source: "gw_upi",
        eventId,
        type: ev.event,
        intent: payment?.order_id ? { gateway: "gw_upi", externalId: payment.order_id } : undefined,
        outcome,
        amountMinor: payment?.amount,
        currency: payment?.currency,
        requireAmount: true,
        intentId: ourIntentId(record(payment?.notes)["intent_id"]),
        savedMethod:
          customerId !== undefined && tokenId !== undefined
            ? { customerId, methodId: tokenId, hint: maskVpa(str(payment?.vpa)) }
            : undefined,
        payload: ev,
      })
    }),
)

const GenericEvent = z.object({
  id: z.string().min(1),
  external_id: z.string().min(1),
  status: z.enum(["succeeded", "failed"]),
  amount_minor: z.number().int().optional(),
  currency: z
    .string()
    .regex(/^[A-Za-z]{3}$/, "must be a 3-letter currency code")
    .optional(),
})

export const paymentWebhook = webhook(
  "/billing/webhooks/payment",
  "Generic payment events (X-SVC-Signature)",
  ({ rawBody, headers }) =>
    Effect.gen(function* () {
      const config = yield* AppConfig
      const clock = yield* Clock
      const secret = config.paymentWebhookSecret
      if (
        secret === undefined ||
        !verifyGenericSignature(rawBody, headers["x-svc-signature"], secret, Math.floor(clock.nowMs() / 1000))
      )
        return yield* badSignature()
      const ev = yield* parse(rawBody, GenericEvent)
      return yield* ack({
        source: "payment",
        eventId: ev.id,
        type: `payment.${ev.status}`,
        intent: { gateway: "any", externalId: ev.external_id },
        outcome: ev.status,
        amountMinor: ev.amount_minor,
        currency: ev.currency,
        payload: ev,
      })
    }),
)

const StubEvent = z.object({
  external_id: z.string().min(1).max(200),
  status: z.enum(["succeeded", "failed"]),
  amount_minor: z.number().int().optional(),
})

export const stubWebhook = webhook(
  "/billing/webhooks/stub",
  "Settle a stub-gateway intent (no signature; idempotent on external_id and status)",
  ({ rawBody }) =>
    Effect.gen(function* () {
      // Unsigned, so it exists only in deployments that run the stub (PAYMENTS=stub, no real gateway).
      const payments = yield* Payments
      if (payments.mode !== "stub")
        return yield* Effect.fail(
          new NotFound({ message: "the stub payment gateway is not enabled in this deployment" }),
        )
      const ev = yield* parse(rawBody, StubEvent)
      return yield* ack({
        source: "stub",
        eventId: `${ev.external_id}:${ev.status}`,
        type: `stub.${ev.status}`,
        intent: { gateway: "stub", externalId: ev.external_id },
        outcome: ev.status,
        amountMinor: ev.amount_minor,
        payload: ev,
      })
    }),
)
