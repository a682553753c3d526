// POST /email/webhooks/mail_a (?key= shared secret, constant time; accepted without a key only
// when MAIL_A_WEBHOOK_SECRET is unset, as the spec says) and POST /email/webhooks/mail_b
// (X-mail_b-Signature or X-mail-b-Signature: hex HMAC-SHA256 of the raw body with
// MAIL_B_WEBHOOK_SECRET; refused when the secret is unset). Body: one event or an array of up to
// 1,000. A bad key or signature is 401 and changes nothing; see src/email/email.webhooks.ts.
import { createHash, createHmac, timingSafeEqual } from "node:crypto"
import { Effect } from "effect"
import { z } from "zod"
import { applyMailEvents, MAX_EVENTS } from "../../src/email/email.webhooks.js"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { BadRequestBody, Unauthenticated, type ValidationFailed } from "../../src/platform/errors.js"
import { jsonBody } from "../../src/platform/json.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { specHeader } from "../spec-header.js"

const sha256 = (s: string | Buffer) => createHash("sha256").update(s).digest()
/** Equal strings, in time that does not depend on where they differ (digests have one length). */
const sameSecret = (a: string, b: string) => timingSafeEqual(sha256(a), sha256(b))

export function verifyMailBSignature(raw: Buffer, header: string | undefined, secret: string): boolean {
  if (header === undefined) return false
  const given = header
    .trim()
    .toLowerCase()
    .replace(/^sha256=/, "")
  if (!/^[0-9a-f]{64}$/.test(given)) return false
  return timingSafeEqual(Buffer.from(given, "hex"), createHmac("sha256", secret).update(raw).digest())
}

const badSignature = (what: string) =>
  Effect.fail(new Unauthenticated({ code: "INVALID_SIGNATURE", message: `missing or invalid webhook ${what}` }))

const MailEvent = z.looseObject({ event: z.string().min(1).max(100) })
const Batch = z.union([MailEvent, z.array(MailEvent).min(1).max(MAX_EVENTS)])

function parseEvents(raw: Buffer): Effect.Effect<Array<Record<string, unknown>>, BadRequestBody | ValidationFailed> {
  // Bounded in depth: an event is stored whole (jsonb), and serialising a deep one overflows the stack.
  const parsed = jsonBody(raw.toString("utf8"), "webhook body")
  if (parsed instanceof Error) return Effect.fail(parsed)
  const r = Batch.safeParse(parsed.value)
  if (!r.success)
    return Effect.fail(
      new BadRequestBody({
        code: "BAD_REQUEST",
        message: `expected one event or an array of 1 to ${MAX_EVENTS} events, each with "event"`,
      }),
    )
  return Effect.succeed(Array.isArray(r.data) ? r.data : [r.data])
}

const Ack = z.object({
  received: z.number().int(),
  processed: z.number().int(),
  duplicates: z.number().int(),
  unknown_messages: z.number().int(),
})

export const mailAWebhook = route({
  method: "POST",
  path: "/email/webhooks/mail_a",
  auth: "public",
  summary: "mail_a delivery events (query key, constant time); one event or an array of up to 1,000",
  tags: ["email", "webhooks"],
  query: z.object({ key: z.string().max(500).optional() }),
  body: { raw: true },
  responses: { 200: { description: "Acknowledged", schema: Ack } },
  handler: ({ query, rawBody }) =>
    Effect.gen(function* () {
      const secret = (yield* AppConfig).mailAWebhookSecret
      if (secret !== undefined && (query.key === undefined || !sameSecret(query.key, secret)))
        return yield* badSignature("key")
      const events = yield* parseEvents(rawBody)
      return json(yield* applyMailEvents("mail_a", events))
    }),
})

export const mailBWebhook = route({
  method: "POST",
  path: "/email/webhooks/mail_b",
  auth: "public",
  summary: "mail_b delivery events (X-mail_b-Signature: hex HMAC-SHA256 of the raw body); one or up to 1,000",
  tags: ["email", "webhooks"],
  body: { raw: true },
  responses: { 200: { description: "Acknowledged", schema: Ack } },
  handler: ({ headers, rawBody }) =>
    Effect.gen(function* () {
      const secret = (yield* AppConfig).mailBWebhookSecret
      if (secret === undefined || !verifyMailBSignature(rawBody, specHeader(headers, "x-mail_b-signature"), secret))
        return yield* badSignature("signature")
      const events = yield* parseEvents(rawBody)
      return json(yield* applyMailEvents("mail_b", events))
    }),
})
