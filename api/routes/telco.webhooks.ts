// Inbound telephony webhooks: telco_a's voice and status callbacks, by POST or GET (spec section
// 4), at the spec's ?tenant_id=<id> or Parley's own ?call_id=<id> (signed per DESIGN.md with that
// tenant's telco_a token; 401 otherwise, saying whether the tenant or the signature failed), and
// telco_b's voice webhook, also by POST or GET (signed with the workspace's telco_b secret). Voice
// webhooks answer with what the provider should do next (TwiML for telco_a, a JSON action list for
// telco_b).
import { Effect } from "effect"
import {
  type TelcoAWebhook,
  telcoAStatus,
  telcoAVoice,
  telcoBGetFields,
  telcoBPostFields,
  telcoBVoice,
} from "../../src/calls/telephony-webhooks.service.js"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { bytes, json } from "../reply.js"
import { type RequestContext, route } from "../route.js"
import { specHeader } from "../spec-header.js"
import { calledUrl } from "../webhook-url.js"

const XML = "text/xml; charset=utf-8"

/** The spec's X-telco_a-Signature (or hyphenated). */
const telcoASignature = (headers: Readonly<Record<string, string>>) => specHeader(headers, "x-telco_a-signature")

const webhookOf = (ctx: RequestContext<unknown, unknown, unknown>) =>
  Effect.map(AppConfig, (config): TelcoAWebhook => {
    // A GET callback's fields are in its URL, which alone is signed.
    const form = new URLSearchParams(ctx.method === "GET" ? "" : ctx.rawBody.toString("utf8"))
    const params: Record<string, string> = {}
    for (const [k, v] of form) params[k] = v
    return {
      url: calledUrl(config, ctx),
      method: ctx.method === "GET" ? "GET" : "POST",
      query: new URLSearchParams(ctx.rawQuery),
      params,
      signature: telcoASignature(ctx.headers),
    }
  })

const INCOMING = "/voice/telco_a/incoming"
const STATUS = "/api/telco_a/status"
const QUERY =
  "Query tenant_id=<workspace id> (the spec's form: its telco_a auth token checks the signature) or call_id " +
  "(Parley's own callbacks); a correctly signed callback about a call Parley does not know is acknowledged and " +
  "recorded. 401 says whether the tenant or the signature failed."

const incoming = (method: "GET" | "POST") =>
  route({
    method,
    path: INCOMING,
    auth: "public",
    summary:
      "telco_a voice webhook (signed): the next step of a call we placed, or the answer to a call to one of our " +
      `numbers. ${QUERY}`,
    tags: ["telephony"],
    ...(method === "POST" && { body: { raw: true } as const }),
    responses: { 200: { description: "TwiML", contentType: XML } },
    handler: (ctx) =>
      Effect.gen(function* () {
        const doc = yield* telcoAVoice(yield* webhookOf(ctx))
        return bytes(XML, doc)
      }),
  })

const status = (method: "GET" | "POST") =>
  route({
    method,
    path: STATUS,
    auth: "public",
    summary: `telco_a status callback (signed): ringing, answered, completed, busy, no-answer. ${QUERY}`,
    tags: ["telephony"],
    ...(method === "POST" && { body: { raw: true } as const }),
    handler: (ctx) =>
      Effect.gen(function* () {
        yield* telcoAStatus(yield* webhookOf(ctx))
        return json({ received: true })
      }),
  })

export const telcoAIncoming = incoming("POST")
export const telcoAIncomingGet = incoming("GET")
export const telcoAStatusCallback = status("POST")
export const telcoAStatusCallbackGet = status("GET")

const TELCO_B_INCOMING = "/voice/telco_b/incoming"

/** The spec's X-telco_b-Signature (or hyphenated). */
const telcoBSignature = (headers: Readonly<Record<string, string>>) => specHeader(headers, "x-telco_b-signature")

const TELCO_B_SIGNED = "Signed with the number's workspace's telco_b secret: X-telco_b-Signature, hex HMAC-SHA256 of"

export const telcoBIncoming = route({
  method: "POST",
  path: TELCO_B_INCOMING,
  auth: "public",
  summary: `telco_b voice webhook, JSON {uuid, from, to, …}. ${TELCO_B_SIGNED} the raw body. ?tenant_id= is optional.`,
  tags: ["telephony"],
  body: { raw: true },
  responses: { 200: { description: "JSON list of actions", contentType: "application/json" } },
  handler: ({ rawBody, rawQuery, headers }) =>
    Effect.gen(function* () {
      const actions = yield* telcoBVoice({
        signed: rawBody,
        fields: telcoBPostFields(rawBody),
        tenantId: new URLSearchParams(rawQuery).get("tenant_id"),
        signature: telcoBSignature(headers),
      })
      return bytes("application/json", actions)
    }),
})

export const telcoBIncomingGet = route({
  method: "GET",
  path: TELCO_B_INCOMING,
  auth: "public",
  summary:
    `telco_b voice webhook by GET, the fields (uuid, from, to, …) in the query. ${TELCO_B_SIGNED} the raw ` +
    "query string as sent (tenant_id included when the URL names it; it must be the number's workspace).",
  tags: ["telephony"],
  responses: { 200: { description: "JSON list of actions", contentType: "application/json" } },
  handler: ({ rawQuery, headers }) =>
    Effect.gen(function* () {
      const query = new URLSearchParams(rawQuery)
      const actions = yield* telcoBVoice({
        signed: Buffer.from(rawQuery, "utf8"),
        fields: telcoBGetFields(query),
        tenantId: query.get("tenant_id"),
        signature: telcoBSignature(headers),
      })
      return bytes("application/json", actions)
    }),
})
