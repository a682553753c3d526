// Calls over telco_a's REST and webhook protocol (a Twilio-style API). A call is created with a
// voice URL and a status-callback URL; the provider reports progress to the status URL and asks
// the voice URL what to do next each time the callee has spoken, so the conversation is a series
// of webhook answers: what the agent says (<Say>), then listen again (<Gather input="speech">) or
// hang up. Webhooks reach the api process that the provider calls; the channel carries them to
// the process holding the leg.
import { ProviderCallError, withRetries } from "../http.util.js"
import { type Outbound, PLATFORM_DEFAULT, retryableStatus, vendorAttempt } from "../outbound.js"
import {
  type CallLeg,
  type CarrierEvent,
  type DialRequest,
  HangupFailed,
  type MediaStreams,
  type Spoken,
  TelephonyError,
  type TelephonyProvider,
} from "./telephony.interface.js"

export interface TelcoAAccount {
  readonly sid: string
  readonly token: string
  /** e.g. https://api.telco-a.example; the REST paths start with /2010-04-01. */
  readonly apiUrl: string
  /** Caller id for outbound calls (E.164); required by the provider. */
  readonly callerId: string | null
}

/** What the provider posts to our webhooks, as form parameters. */
export type WebhookParams = Readonly<Record<string, string>>

export interface LegWebhooks {
  /** A voice webhook: answer with the TwiML document that tells the provider what to do next. */
  voice(params: WebhookParams): Promise<string>
  /** A status callback. */
  status(params: WebhookParams): void
}

/** Carries a call's webhooks from the api process that received them to the leg; returns an unregister. */
export interface WebhookChannel {
  register(callId: number, handlers: LegWebhooks): () => void
}

export interface TelcoAOptions {
  readonly account: TelcoAAccount
  /** Where the provider reaches our webhooks (PUBLIC_BASE_URL of the api processes). */
  readonly publicBaseUrl: string
  readonly channel: WebhookChannel
  /** Replaces undici's fetch (tests). */
  readonly fetch?: typeof fetch
  /** Limit for each attempt (connect, request and the whole answer); default 10000 ms. */
  readonly timeoutMs?: number
  /** The address guard (a tenant's API root) and answer size cap; default: no guard, 2 MiB. */
  readonly outbound?: Outbound
  /**
   * Calls heard as audio: an answered call's voice webhook is answered with <Connect><Stream> to a
   * media stream (a URL with a token minted for the call), and the runtime speaks and hears it
   * there; unset, the agent speaks turn by turn with <Say> and hears with <Gather>.
   */
  readonly mediaStreams?: MediaStreams
  /** How long a voice webhook may wait for the agent before it is asked to call back (Pause + Redirect). */
  readonly holdMs?: number
  readonly now?: () => number
}

export const voiceUrl = (base: string, callId: number) => `${base}/voice/telco_a/incoming?call_id=${callId}`
export const statusUrl = (base: string, callId: number) => `${base}/api/telco_a/status?call_id=${callId}`

const xml = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

/** The TwiML a voice webhook answers with. */
export function twiml(
  says: readonly string[],
  next: { gather: string } | { hangup: true } | { redirect: string; pauseSeconds: number },
): string {
  let body = says.map((s) => `<Say>${xml(s)}</Say>`).join("")
  if ("gather" in next)
    body += `<Gather input="speech" method="POST" speechTimeout="auto" action="${xml(next.gather)}"></Gather>`
  else if ("hangup" in next) body += "<Hangup/>"
  else body += `<Pause length="${next.pauseSeconds}"/><Redirect method="POST">${xml(next.redirect)}</Redirect>`
  return `<?xml version="1.0" encoding="UTF-8"?><Response>${body}</Response>`
}

const WORDS_PER_SECOND = 2.6

/** Patch-in: the TwiML that puts a call into the recorded conference `name`. */
export const conferenceTwiml = (name: string): string =>
  `<?xml version="1.0" encoding="UTF-8"?><Response><Dial><Conference record="record-from-start" ` +
  `startConferenceOnEnter="true" endConferenceOnExit="false">${xml(name)}</Conference></Dial></Response>`

/** The TwiML that bridges a call to its bidirectional media stream. */
export const streamTwiml = (url: string, callId: number): string =>
  `<?xml version="1.0" encoding="UTF-8"?><Response><Connect><Stream url="${xml(url)}">` +
  `<Parameter name="call_id" value="${callId}"/></Stream></Connect></Response>`

/** Said when the media stream could not be set up: the call is not left in silence. */
const NO_STREAM_TWIML = twiml(["Sorry, we are having trouble connecting this call. Goodbye."], { hangup: true })

/** The conference a handed-off call joins: one per call. */
export const conferenceName = (callId: number) => `parley-call-${callId}`

type LegOptions = TelcoAOptions & {
  fetchCall(sid: string, form: Record<string, string>): Promise<unknown>
  createCall(form: Record<string, string>): Promise<{ sid?: string }>
}

class TelcoALeg implements CallLeg {
  providerCallId = ""
  private says: string[] = []
  /** The voice webhook waiting for the agent's next move. */
  private pendingVoice: ((doc: string) => void) | undefined
  private pendingTimer: NodeJS.Timeout | undefined
  /** The agent's next move, decided before any voice webhook asked for it. */
  private ready: "listen" | "hangup" | undefined
  private heard: ((u: { text: string; at: number } | null) => void) | undefined
  private answered = false
  private ended = false
  private unregister: () => void = () => {}

  /** The call's audio is on a media stream: say and listen are the runtime's (the voice webhook connects it). */
  readonly mediaStream: boolean
  private streaming = false

  constructor(
    private readonly callId: number,
    private readonly tenantId: number,
    private readonly onEvent: (e: CarrierEvent) => void,
    private readonly o: LegOptions,
  ) {
    this.mediaStream = o.mediaStreams !== undefined
  }

  attach(): void {
    this.unregister = this.o.channel.register(this.callId, {
      voice: (p) => this.voice(p),
      status: (p) => this.status(p),
    })
  }

  private now(): number {
    return (this.o.now ?? Date.now)()
  }

  private answer(by: string | undefined): void {
    if (this.answered || this.ended) return
    this.answered = true
    this.onEvent({ type: "ANSWERED", by: by?.startsWith("machine") ? "machine" : "human", at: this.now() })
  }

  private end(e: CarrierEvent): void {
    if (this.ended) return
    this.ended = true
    this.unregister()
    this.heard?.(null)
    this.heard = undefined
    this.respond(twiml(this.says.splice(0), { hangup: true }))
    this.onEvent(e)
  }

  status(p: WebhookParams): void {
    const at = this.now()
    switch (p["CallStatus"]) {
      case "ringing":
        if (!this.answered) this.onEvent({ type: "RINGING", at })
        return
      case "in-progress":
      case "answered":
        return this.answer(p["AnsweredBy"])
      case "busy":
        return this.end({ type: "BUSY", at })
      case "no-answer":
        return this.end({ type: "NO_ANSWER", at })
      case "failed":
      case "canceled":
        return this.end(
          this.answered
            ? { type: "HANGUP", by: "callee", at }
            : { type: "FAILED", reason: `provider reported ${p["CallStatus"]}`, at },
        )
      case "completed":
        return this.end(this.answered ? { type: "HANGUP", by: "callee", at } : { type: "NO_ANSWER", at })
      default:
        return
    }
  }

  voice(p: WebhookParams): Promise<string> {
    if (this.ended) return Promise.resolve(twiml([], { hangup: true }))
    this.answer(p["AnsweredBy"])
    const streams = this.o.mediaStreams
    if (streams !== undefined) {
      // Once a call: a second voice webhook (the stream ended) has nothing more to do.
      if (this.streaming) return Promise.resolve(twiml([], { hangup: true }))
      this.streaming = true
      return streams.streamUrl({ tenantId: this.tenantId, callId: this.callId }).then(
        (url) => streamTwiml(url, this.callId),
        () => NO_STREAM_TWIML,
      )
    }
    if ("SpeechResult" in p || "turn" in p) {
      const text = (p["SpeechResult"] ?? "").trim()
      const heard = this.heard
      this.heard = undefined
      heard?.(text === "" ? null : { text, at: this.now() })
    }
    return new Promise<string>((resolve) => {
      this.pendingVoice?.(twiml([], { redirect: voiceUrl(this.o.publicBaseUrl, this.callId), pauseSeconds: 1 }))
      this.pendingVoice = resolve
      if (this.ready !== undefined) return this.flush()
      // The agent is still thinking: ask the provider to come back rather than time out.
      this.pendingTimer = setTimeout(() => {
        this.respond(
          twiml(this.says.splice(0), { redirect: voiceUrl(this.o.publicBaseUrl, this.callId), pauseSeconds: 1 }),
        )
      }, this.o.holdMs ?? 8_000)
      this.pendingTimer.unref?.()
    })
  }

  private respond(doc: string): void {
    const r = this.pendingVoice
    this.pendingVoice = undefined
    if (this.pendingTimer !== undefined) clearTimeout(this.pendingTimer)
    this.pendingTimer = undefined
    r?.(doc)
  }

  /** Answers the waiting voice webhook with what the agent said and its next move. */
  private flush(): void {
    if (this.pendingVoice === undefined || this.ready === undefined) return
    const next = this.ready
    this.ready = undefined
    const gather = `${voiceUrl(this.o.publicBaseUrl, this.callId)}&turn=1`
    this.respond(twiml(this.says.splice(0), next === "hangup" ? { hangup: true } : { gather }))
  }

  async say(text: string): Promise<Spoken> {
    if (this.ended) throw new TelephonyError("the call has ended", false)
    if (this.mediaStream) return { durationMs: 0 } // spoken on the stream by the runtime
    this.says.push(text)
    return { durationMs: Math.round((text.split(/\s+/).length / WORDS_PER_SECOND) * 1000) }
  }

  listen(): Promise<{ text: string; at: number } | null> {
    if (this.ended) return Promise.resolve(null)
    // On a media stream the callee is heard by the runtime: this only answers null at the call's end.
    if (this.mediaStream) this.heard?.(null)
    return new Promise((resolve) => {
      this.heard = resolve
      if (this.mediaStream) return
      this.ready = "listen"
      this.flush()
    })
  }

  async hangup(): Promise<void> {
    if (this.ended) return
    let failed: HangupFailed | undefined
    if (this.pendingVoice !== undefined) {
      this.ready = "hangup"
      this.flush()
    } else {
      // No webhook to answer: end the call through the REST API (retried on 429, 5xx and no answer).
      await this.o.fetchCall(this.providerCallId, { Status: "completed" }).catch((e: unknown) => {
        failed = new HangupFailed(this.providerCallId, e)
      })
    }
    // Ended here either way: nothing more is said or heard on it; a failure is the caller's to record.
    this.end({ type: "HANGUP", by: "agent", at: this.now() })
    if (failed !== undefined) throw failed
  }

  /**
   * Patch-in: the callee's call gets the conference TwiML (as the answer to the voice webhook
   * waiting, else through a REST update of the live call), the operator is called into the same
   * conference over REST, and this leg stops listening without hanging the callee up.
   */
  async handoff(operatorNumber: string): Promise<{ conference_id: string }> {
    if (this.ended || !this.answered || this.providerCallId === "")
      throw new TelephonyError("the call is not connected: it cannot be handed off", false)
    const name = conferenceName(this.callId)
    const doc = conferenceTwiml(name)
    if (this.pendingVoice !== undefined) {
      this.says.splice(0)
      this.respond(doc)
    } else await this.o.fetchCall(this.providerCallId, { Twiml: doc })
    // From here the callee is in the conference; if the operator cannot be called, nobody would join them.
    this.end({ type: "HANGUP", by: "agent", at: this.now() })
    const from = this.o.account.callerId
    try {
      await this.o.createCall({ To: operatorNumber, ...(from !== null && { From: from }), Twiml: doc })
    } catch (e) {
      await this.o.fetchCall(this.providerCallId, { Status: "completed" }).catch((h: unknown) => {
        // The callee would wait in a conference nobody joins: the caller records it, and sees `e`.
        throw new HangupFailed(this.providerCallId, h, e)
      })
      throw e
    }
    return { conference_id: name }
  }
}

/** A telco_a account as a TelephonyProvider. */
export function makeTelcoATelephony(o: TelcoAOptions): TelephonyProvider {
  let active = 0
  const outbound = o.outbound ?? PLATFORM_DEFAULT
  const timeoutMs = o.timeoutMs ?? 10_000
  const auth = `Basic ${Buffer.from(`${o.account.sid}:${o.account.token}`).toString("base64")}`
  const callsUrl =
    `${o.account.apiUrl.replace(/\/+$/, "")}/2010-04-01/Accounts/` + `${encodeURIComponent(o.account.sid)}/Calls`

  const post = (url: string, form: Record<string, string>): Promise<{ sid?: string }> =>
    withRetries<{ sid?: string }, TelephonyError>(
      () =>
        vendorAttempt({
          url,
          init: {
            method: "POST",
            headers: {
              authorization: auth,
              "content-type": "application/x-www-form-urlencoded",
              accept: "application/json",
            },
            body: new URLSearchParams(form).toString(),
          },
          // Covers the answer too: a provider dripping its body hits the same limit.
          timeoutMs,
          outbound,
          fetch: o.fetch,
          unreachable: (f, e) =>
            new TelephonyError(`telco_a ${f.message}`, f.retryable, {
              cause: e,
              ...(f.status !== undefined && { status: f.status }),
            }),
          answered: ({ text }) => {
            try {
              return { ok: true, value: JSON.parse(text) as { sid?: string } }
            } catch {
              return { ok: true, value: {} }
            }
          },
          refused: ({ status, text }) =>
            new TelephonyError(`telco_a answered ${status}: ${text.slice(0, 200)}`, retryableStatus(status), {
              status,
            }),
        }),
      (message, cause) =>
        new TelephonyError(message, true, { cause, ...(cause.status !== undefined && { status: cause.status }) }),
    )

  const options: LegOptions = {
    ...o,
    fetchCall: (sid, form) => post(`${callsUrl}/${encodeURIComponent(sid)}.json`, form),
    createCall: (form) => post(`${callsUrl}.json`, form),
  }

  return {
    name: "telco_a",
    get activeLegs() {
      return active
    },
    async hangupCall(providerCallId: string): Promise<void> {
      await post(`${callsUrl}/${encodeURIComponent(providerCallId)}.json`, { Status: "completed" })
    },
    dial(req: DialRequest, onEvent: (e: CarrierEvent) => void): CallLeg {
      active++
      let counted = true
      const leg = new TelcoALeg(
        req.callId,
        req.tenantId,
        (e) => {
          if (counted && (e.type === "BUSY" || e.type === "NO_ANSWER" || e.type === "FAILED" || e.type === "HANGUP")) {
            counted = false
            active--
          }
          onEvent(e)
        },
        options,
      )
      leg.attach()
      const from = req.from ?? o.account.callerId
      // Progress arrives only after dial returns (the interface promises it).
      queueMicrotask(() => {
        post(`${callsUrl}.json`, {
          To: req.to,
          ...(from !== null && { From: from }),
          Url: voiceUrl(o.publicBaseUrl, req.callId),
          Method: "POST",
          StatusCallback: statusUrl(o.publicBaseUrl, req.callId),
          StatusCallbackMethod: "POST",
          StatusCallbackEvent: "initiated ringing answered completed",
          MachineDetection: "Enable",
        }).then(
          (r) => {
            leg.providerCallId = r.sid ?? ""
          },
          (e: unknown) =>
            leg.status({ CallStatus: "failed", ErrorMessage: e instanceof ProviderCallError ? e.message : String(e) }),
        )
      })
      return leg
    },
  }
}
