// Inbound telephony webhooks: telco_a's voice and status callbacks (signed per DESIGN.md with the
// tenant's telco_a token; 401 otherwise) and telco_b's voice webhook. Voice webhooks answer with
// what the provider should do next (TwiML for telco_a, a JSON action list for telco_b).
import { Effect } from "effect"
import {
  type TelcoAWebhook,
  telcoAStatus,
  telcoAVoice,
  telcoBVoice,
} from "../../src/calls/telephony-webhooks.service.js"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { bytes, json } from "../reply.js"
import { type RequestContext, route } from "../route.js"
import { calledUrl } from "../webhook-url.js"

const XML = "text/xml; charset=utf-8"

/** The spec's header is X-telco_a-Signature; proxies (and our HTTP engine) pass it hyphenated. */
const telcoASignature = (headers: Readonly<Record<string, string>>) =>
  headers["x-telco_a-signature"] ?? headers["x-telco-a-signature"]

const webhookOf = (ctx: RequestContext<unknown, unknown, unknown>) =>
  Effect.map(AppConfig, (config): TelcoAWebhook => {
    const form = new URLSearchParams(ctx.rawBody.toString("utf8"))
    const params: Record<string, string> = {}
    for (const [k, v] of form) params[k] = v
    return {
      url: calledUrl(config, ctx),
      query: new URLSearchParams(ctx.rawQuery),
      params,
      signature: telcoASignature(ctx.headers),
    }
  })

export const telcoAIncoming = route({
  method: "POST",
  path: "/voice/telco_a/incoming",
  auth: "public",
  summary:
    "telco_a voice webhook (signed): the next step of a call we placed, or the answer to a call to one of our numbers",
  tags: ["telephony"],
  body: { raw: true },
  responses: { 200: { description: "TwiML", contentType: XML } },
  handler: (ctx) =>
    Effect.gen(function* () {
      const doc = yield* telcoAVoice(yield* webhookOf(ctx))
      return bytes(XML, doc)
    }),
})

export const telcoAStatusCallback = route({
  method: "POST",
  path: "/api/telco_a/status",
  auth: "public",
  summary: "telco_a status callback (signed): ringing, answered, completed, busy, no-answer",
  tags: ["telephony"],
  body: { raw: true },
  handler: (ctx) =>
    Effect.gen(function* () {
      yield* telcoAStatus(yield* webhookOf(ctx))
      return json({ received: true })
    }),
})

export const telcoBIncoming = route({
  method: "POST",
  path: "/voice/telco_b/incoming",
  auth: "public",
  summary:
    "telco_b voice webhook (signed with the tenant's telco_b secret: X-telco_b-Signature, hex HMAC-SHA256 of the body)",
  tags: ["telephony"],
  body: { raw: true },
  handler: ({ rawBody, headers }) =>
    Effect.gen(function* () {
      const actions = yield* telcoBVoice(rawBody, headers["x-telco_b-signature"] ?? headers["x-telco-b-signature"])
      return bytes("application/json", actions)
    }),
})
