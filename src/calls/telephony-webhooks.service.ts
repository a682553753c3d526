// Telephony webhooks as an api process receives them: whose call or number it is, whether the
// signature is that tenant's (its own telco credential in byok mode, the platform's otherwise),
// and where it goes next: to the runtime process holding the call over the bus, or, for a call to
// one of our numbers, an answer in the persona of the number's workflow.
import { createHmac, timingSafeEqual } from "node:crypto"
import { Effect } from "effect"
import { findActiveByPhone } from "../numbers/numbers.repo.js"
import { Credentials } from "../onboarding/Credentials.js"
import { AppConfig } from "../platform/AppConfig.js"
import { Bus } from "../platform/Bus.js"
import { Db } from "../platform/Db.js"
import { Unauthenticated } from "../platform/errors.js"
import { Log } from "../platform/Log.js"
import { rtTelcoCall, type TelcoWebhookMessage } from "../platform/subjects.js"
import { fillPlaceholders } from "../providers/llm/llm.interface.js"
import { verifyTelcoA } from "../providers/telephony/telco-a.signature.js"
import { twiml } from "../providers/telephony/telco-a.telephony.js"
import { findVoice } from "../voices/voices.catalog.js"
import * as repo from "./inbound-calls.repo.js"

const badSignature = () =>
  new Unauthenticated({ code: "INVALID_SIGNATURE", message: "webhook signature missing or not valid" })

/** A telco_a webhook refused for its signature (the tenant was found; its token did not sign it). */
const signatureRefused = (why: string) =>
  new Unauthenticated({ code: "INVALID_SIGNATURE", message: `webhook signature not valid: ${why}` })

/** A telco_a webhook refused before any signature check: no workspace to check it against. */
const tenantRefused = (why: string) =>
  new Unauthenticated({ code: "UNAUTHENTICATED", message: `webhook tenant not known: ${why}` })

/** How long a voice webhook may wait for the runtime's answer (the agent deciding what to say). */
const VOICE_WAIT_MS = 15_000

const ID = /^[1-9]\d{0,15}$/
/** Our own routing parameters in a callback URL: not callback fields. */
const ROUTING = new Set(["tenant_id", "call_id", "turn"])

export interface TelcoAWebhook {
  /** The URL as the provider called it (scheme, host, path and query). */
  readonly url: string
  /** The spec lets the provider call by POST (form fields, signed) or GET (fields in the URL). */
  readonly method: "GET" | "POST"
  readonly query: URLSearchParams
  /** POST: the form parameters (signed after the URL); GET: none (the URL alone is signed). */
  readonly params: Record<string, string>
  readonly signature: string | undefined
}

/** The callback's fields: the POST form, or a GET's query without our routing parameters. */
const fieldsOf = (w: TelcoAWebhook): Record<string, string> => {
  if (w.method === "POST") return w.params
  const out: Record<string, string> = {}
  for (const [k, v] of w.query) if (!ROUTING.has(k) && !(k in out)) out[k] = v
  return out
}

const capped = (v: string | undefined, max: number): string | null =>
  v === undefined || v === "" ? null : v.slice(0, max)

/**
 * Verifies a telco_a webhook against its tenant's auth token; the tenant, the call it names (when
 * it is that tenant's) and the number called. The tenant is the one the URL names (?tenant_id=, the
 * spec's form), else the owner of Parley's own ?call_id=, else the owner of the number called.
 */
const authenticate = (w: TelcoAWebhook) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const config = yield* AppConfig
    const credentials = yield* Credentials
    const tenantRaw = w.query.get("tenant_id")
    const callIdRaw = w.query.get("call_id")
    if (tenantRaw !== null && !ID.test(tenantRaw)) return yield* Effect.fail(tenantRefused("tenant_id is not an id"))
    if (callIdRaw !== null && !ID.test(callIdRaw)) return yield* Effect.fail(tenantRefused("call_id is not an id"))
    let tenantId: number | undefined
    if (tenantRaw !== null) {
      tenantId = Number(tenantRaw)
      if (!(yield* Effect.promise(() => repo.tenantExists(sql, tenantId!))))
        return yield* Effect.fail(tenantRefused(`no workspace ${tenantRaw}`))
    }
    let callId: number | undefined
    let number: Awaited<ReturnType<typeof findActiveByPhone>>
    if (callIdRaw !== null) {
      const owner = yield* Effect.promise(() => repo.tenantOfCall(sql, Number(callIdRaw)))
      if (tenantId === undefined && owner === undefined)
        return yield* Effect.fail(tenantRefused(`call ${callIdRaw} is not known and the URL names no tenant_id`))
      // Another workspace's call id under this tenant_id is a call this tenant does not have.
      if (tenantId === undefined || owner === tenantId) {
        tenantId = owner
        callId = Number(callIdRaw)
      }
    } else {
      const to = fieldsOf(w)["To"]
      number = to === undefined ? undefined : yield* Effect.promise(() => findActiveByPhone(sql, to))
      if (tenantId === undefined) {
        if (number === undefined)
          return yield* Effect.fail(tenantRefused("the URL names no tenant_id or call_id, and To is not our number"))
        tenantId = number.tenant_id
      } else if (number !== undefined && number.tenant_id !== tenantId) number = undefined
    }
    const own = yield* Effect.promise(() => credentials.active(tenantId!, "telco_a"))
    const token = own?.secret ?? config.telcoA?.authToken
    if (token === undefined)
      return yield* Effect.fail(signatureRefused(`workspace ${tenantId} has no telco_a auth token to check it with`))
    if (!verifyTelcoA(token, w.url, w.params, w.signature))
      return yield* Effect.fail(
        signatureRefused(
          w.signature === undefined
            ? "X-telco_a-Signature is missing"
            : `it does not sign ${w.url} with workspace ${tenantId}'s telco_a auth token`,
        ),
      )
    return { tenantId: tenantId!, callId, number }
  })

/** Keeps a signed callback about a call we do not know; it is acknowledged, not refused. */
const recordUnknown = (tenantId: number, kind: "status" | "voice", w: TelcoAWebhook) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const log = yield* Log
    const f = fieldsOf(w)
    const duration = /^\d{1,9}$/.test(f["CallDuration"] ?? "") ? Number(f["CallDuration"]) : null
    yield* Effect.promise(() =>
      repo.recordUnmatchedCallback(sql, {
        tenantId,
        kind,
        method: w.method,
        providerCallId: capped(f["CallSid"], 200),
        callStatus: capped(f["CallStatus"], 64),
        durationSeconds: duration,
      }),
    )
    log.info({ tenant_id: tenantId, kind, call_sid: capped(f["CallSid"], 200) }, "telco_a callback for an unknown call")
  })

/** A voice webhook: the next TwiML for a call we placed, or the greeting of a call to our number. */
export const telcoAVoice = (w: TelcoAWebhook) =>
  Effect.gen(function* () {
    const who = yield* authenticate(w)
    const bus = yield* Bus
    const log = yield* Log
    if (who.callId !== undefined) {
      const turn = w.query.get("turn")
      const message: TelcoWebhookMessage = { kind: "voice", params: { ...fieldsOf(w), ...(turn !== null && { turn }) } }
      return yield* Effect.promise(() =>
        bus.request(rtTelcoCall(who.callId!), message, { timeoutMs: VOICE_WAIT_MS }).then(
          (reply) => reply.string(),
          (err: unknown) => {
            // Nobody holds the call any more (its process died, or it ended): end it politely.
            log.warn({ err, call_id: who.callId }, "voice webhook for a call no runtime process holds")
            return twiml([], { hangup: true })
          },
        ),
      )
    }
    if (who.number !== undefined) return yield* answerInbound(who.tenantId, who.number, fieldsOf(w), "telco_a")
    // Signed for a workspace, about a call it does not have: acknowledged (hung up) and kept.
    yield* recordUnknown(who.tenantId, "voice", w)
    return twiml([], { hangup: true })
  })

/** A status callback: to the leg of a call we placed, or onto the record of a call to our number. */
export const telcoAStatus = (w: TelcoAWebhook) =>
  Effect.gen(function* () {
    const who = yield* authenticate(w)
    const { sql } = yield* Db
    const bus = yield* Bus
    if (who.callId !== undefined) {
      const message: TelcoWebhookMessage = { kind: "status", params: fieldsOf(w) }
      yield* Effect.promise(() =>
        bus.request(rtTelcoCall(who.callId!), message, { timeoutMs: 3_000 }).then(
          () => undefined,
          () => undefined,
        ),
      )
      return
    }
    const f = fieldsOf(w)
    const sid = f["CallSid"]
    const duration = /^\d{1,9}$/.test(f["CallDuration"] ?? "") ? Number(f["CallDuration"]) : null
    const ended = ["completed", "busy", "no-answer", "failed", "canceled"].includes(f["CallStatus"] ?? "")
    const status = capped(f["CallStatus"], 64) ?? "unknown"
    const known =
      sid !== undefined &&
      (yield* Effect.promise(() =>
        repo.updateInboundStatus(sql, {
          tenantId: who.tenantId,
          providerCallId: sid,
          status,
          durationSeconds: duration,
          ended,
        }),
      ))
    if (!known) yield* recordUnknown(who.tenantId, "status", w)
  })

/**
 * A call to one of our numbers: the persona of the number's workflow greets the caller with the
 * rule book's opening line and promises a call back; the call is recorded for the timeline.
 */
const answerInbound = (
  tenantId: number,
  number: NonNullable<Awaited<ReturnType<typeof findActiveByPhone>>>,
  params: Record<string, string>,
  provider: "telco_a" | "telco_b",
) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const ctx = yield* Effect.promise(() => repo.greetingContext(sql, tenantId, number.workflow_id))
    const agent = findVoice(ctx?.persona ?? "amelia")?.name ?? "Amelia"
    const company = ctx?.tenant_name ?? "us"
    const opening =
      ctx?.opening !== null && ctx?.opening !== undefined
        ? fillPlaceholders(ctx.opening, { name: null, agentName: agent, company })
        : `Hello, this is ${agent} from ${company}.`
    const greeting = `${opening} Thank you for calling. Someone from ${company} will call you back shortly. Goodbye.`
    const sid = params["CallSid"] ?? params["uuid"] ?? `unknown-${Date.now()}`
    const from = params["From"] ?? params["from"] ?? ""
    yield* Effect.promise(() =>
      repo.recordInboundCall(sql, {
        tenantId,
        numberId: number.id,
        workflowId: number.workflow_id,
        provider,
        providerCallId: sid,
        from,
        to: number.phone_e164,
        greeting,
      }),
    )
    return provider === "telco_a"
      ? twiml([greeting], { hangup: true })
      : JSON.stringify([{ action: "talk", text: greeting }])
  })

/**
 * A telco_b voice webhook as received. The provider calls by POST (a JSON body `{uuid, from, to, …}`)
 * or GET (the same fields in the query); the URL may name the workspace (`?tenant_id=`, the spec's form).
 */
export interface TelcoBWebhook {
  /** What the signature covers: a POST's raw body, a GET's query string exactly as sent. */
  readonly signed: Buffer
  /** The call's fields: the POST's JSON object (undefined when it is not one), a GET's query values. */
  readonly fields: Readonly<Record<string, unknown>> | undefined
  /** The `tenant_id` the URL names, if any. */
  readonly tenantId: string | null
  readonly signature: string | undefined
}

/** A POST's body as a telco_b webhook: JSON that is not an object (null, a number, an array) names no number. */
export const telcoBPostFields = (raw: Buffer): Record<string, unknown> | undefined => {
  let body: unknown
  try {
    body = JSON.parse(raw.toString("utf8"))
  } catch {
    return undefined
  }
  return typeof body === "object" && body !== null && !Array.isArray(body)
    ? (body as Record<string, unknown>)
    : undefined
}

/** A GET's query as a telco_b webhook's fields (the first value of each; our `tenant_id` is routing, not a field). */
export const telcoBGetFields = (query: URLSearchParams): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [k, v] of query) if (k !== "tenant_id" && !(k in out)) out[k] = v
  return out
}

/** `to` as E.164: the provider sends it without the "+" (and an unencoded "+" in a query reads as a space). */
const e164 = (to: unknown): string => (typeof to === "string" ? `+${to.trim().replace(/^\+/, "")}` : "")

/**
 * telco_b's voice webhook, by POST or GET, signed with header X-telco_b-Signature = hex
 * HMAC-SHA256(the tenant's telco_b secret, what the request carries: a POST's raw body, a GET's
 * raw query string). The tenant is the owner of the number called (and must be the one a
 * `?tenant_id=` names). The answer is a list of actions (talk). Every refusal is the same 401.
 */
export const telcoBVoice = (w: TelcoBWebhook) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const credentials = yield* Credentials
    if (w.fields === undefined) return yield* Effect.fail(badSignature())
    const number = yield* Effect.promise(() => findActiveByPhone(sql, e164(w.fields!["to"])))
    if (number === undefined) return yield* Effect.fail(badSignature())
    if (w.tenantId !== null && w.tenantId !== String(number.tenant_id)) return yield* Effect.fail(badSignature())
    const own = yield* Effect.promise(() => credentials.active(number.tenant_id, "telco_b"))
    const signature = w.signature?.trim()
    if (own === undefined || signature === undefined || !/^[0-9a-fA-F]{64}$/.test(signature))
      return yield* Effect.fail(badSignature())
    const expected = createHmac("sha256", own.secret).update(w.signed).digest()
    if (!timingSafeEqual(expected, Buffer.from(signature, "hex"))) return yield* Effect.fail(badSignature())
    const params = w.fields as Record<string, string>
    return yield* answerInbound(number.tenant_id, number, { ...params, From: params["from"] ?? "" }, "telco_b")
  })
