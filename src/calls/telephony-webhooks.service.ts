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

/** How long a voice webhook may wait for the runtime's answer (the agent deciding what to say). */
const VOICE_WAIT_MS = 15_000

export interface TelcoAWebhook {
  /** The URL as the provider called it (scheme, host, path and query). */
  readonly url: string
  readonly query: URLSearchParams
  readonly params: Record<string, string>
  readonly signature: string | undefined
}

/** Verifies a telco_a webhook against its tenant's auth token; the tenant and the call it names. */
const authenticate = (w: TelcoAWebhook) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const config = yield* AppConfig
    const credentials = yield* Credentials
    const callIdRaw = w.query.get("call_id")
    const callId = callIdRaw !== null && /^[1-9]\d{0,15}$/.test(callIdRaw) ? Number(callIdRaw) : undefined
    let tenantId: number | undefined
    let number: Awaited<ReturnType<typeof findActiveByPhone>>
    if (callId !== undefined) tenantId = yield* Effect.promise(() => repo.tenantOfCall(sql, callId))
    else {
      number = yield* Effect.promise(() => findActiveByPhone(sql, w.params["To"] ?? ""))
      tenantId = number?.tenant_id
    }
    if (tenantId === undefined) return yield* Effect.fail(badSignature())
    const own = yield* Effect.promise(() => credentials.active(tenantId, "telco_a"))
    const token = own?.secret ?? config.telcoA?.authToken
    if (token === undefined || !verifyTelcoA(token, w.url, w.params, w.signature))
      return yield* Effect.fail(badSignature())
    return { tenantId, callId, number }
  })

/** A voice webhook: the next TwiML for a call we placed, or the greeting of a call to our number. */
export const telcoAVoice = (w: TelcoAWebhook) =>
  Effect.gen(function* () {
    const who = yield* authenticate(w)
    const bus = yield* Bus
    const log = yield* Log
    if (who.callId !== undefined) {
      const turn = w.query.get("turn")
      const message: TelcoWebhookMessage = { kind: "voice", params: { ...w.params, ...(turn !== null && { turn }) } }
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
    return yield* answerInbound(who.tenantId, who.number!, w.params, "telco_a")
  })

/** A status callback: to the leg of a call we placed, or onto the record of a call to our number. */
export const telcoAStatus = (w: TelcoAWebhook) =>
  Effect.gen(function* () {
    const who = yield* authenticate(w)
    const { sql } = yield* Db
    const bus = yield* Bus
    if (who.callId !== undefined) {
      const message: TelcoWebhookMessage = { kind: "status", params: w.params }
      yield* Effect.promise(() =>
        bus.request(rtTelcoCall(who.callId!), message, { timeoutMs: 3_000 }).then(
          () => undefined,
          () => undefined,
        ),
      )
      return
    }
    const sid = w.params["CallSid"]
    if (sid === undefined) return
    const duration = /^\d+$/.test(w.params["CallDuration"] ?? "") ? Number(w.params["CallDuration"]) : null
    const ended = ["completed", "busy", "no-answer", "failed", "canceled"].includes(w.params["CallStatus"] ?? "")
    const status = w.params["CallStatus"] ?? "unknown"
    yield* Effect.promise(() =>
      repo.updateInboundStatus(sql, {
        tenantId: who.tenantId,
        providerCallId: sid,
        status,
        durationSeconds: duration,
        ended,
      }),
    )
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
 * telco_b's voice webhook: a JSON body `{uuid, from, to, …}` signed with header
 * X-telco_b-Signature = hex HMAC-SHA256(the tenant's telco_b secret, raw body). The answer is a
 * list of actions (talk).
 */
export const telcoBVoice = (raw: Buffer, signature: string | undefined) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const credentials = yield* Credentials
    let body: Record<string, string>
    try {
      body = JSON.parse(raw.toString("utf8")) as Record<string, string>
    } catch {
      return yield* Effect.fail(badSignature())
    }
    const to = typeof body["to"] === "string" ? (body["to"].startsWith("+") ? body["to"] : `+${body["to"]}`) : ""
    const number = yield* Effect.promise(() => findActiveByPhone(sql, to))
    if (number === undefined) return yield* Effect.fail(badSignature())
    const own = yield* Effect.promise(() => credentials.active(number.tenant_id, "telco_b"))
    if (own === undefined || signature === undefined || !/^[0-9a-fA-F]{64}$/.test(signature.trim()))
      return yield* Effect.fail(badSignature())
    const expected = createHmac("sha256", own.secret).update(raw).digest()
    if (!timingSafeEqual(expected, Buffer.from(signature.trim(), "hex"))) return yield* Effect.fail(badSignature())
    return yield* answerInbound(number.tenant_id, number, { ...body, From: body["from"] ?? "" }, "telco_b")
  })
