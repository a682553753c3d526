// Carrier media streams (Twilio-style <Connect><Stream>, which telco_a speaks): a WebSocket per
// call at /media/telco_a/<token>, served by the engine beside the HTTP routes. Nothing of a stream
// is read before it is let in: the upgrade takes the call's single-use token
// (src/calls/media-stream-tokens.repo.ts), and a carrier's stream must also be signed as its
// webhooks are (X-telco_a-Signature over the full stream URL, with the workspace's auth token; the
// token is spent only once the signature holds); it is answered 401 otherwise, before any frame. Then
// the carrier's `start` must name the call the token was minted for, and everything it sends goes
// onto the bus for the runtime process that holds the call (mediaInSubject), and what that process
// publishes (mediaOutSubject) goes to the carrier. Every buffer is bounded: a message over 16 KiB,
// a peer sending faster than audio can come, or one that stops reading what we send is cut.
import type { Logger } from "pino"
import { claimOf, type StreamGrant, takeStreamToken } from "../src/calls/media-stream-tokens.repo.js"
import type { BusClient, BusSubscription } from "../src/platform/bus/bus.js"
import type { Sql } from "../src/platform/Db.js"
import { MEDIA_KIND_HEADER, mediaInSubject, mediaOutSubject } from "../src/platform/subjects.js"
import {
  clearMessage,
  MAX_STREAM_MESSAGE_BYTES,
  markMessage,
  mediaBytes,
  mediaMessage,
  parseStreamMessage,
} from "../src/providers/telephony/media-stream.messages.js"
import { verifyTelcoA } from "../src/providers/telephony/telco-a.signature.js"
import { clientAddress } from "./pipeline/client-address.js"
import type { TemplatedApp, WebSocket } from "./uws.js"

export const MEDIA_STREAM_PATH = "/media/telco_a/:token"
/** What the carrier may send per second on average (50 media messages a second is real time). */
const MESSAGES_PER_SECOND = 100
/** The burst above that average a carrier may send (3 s of audio at once after a network stall). */
const MESSAGE_BURST = 150
/** What we hold for a carrier that is not reading (about 4 s of audio): past it, it is cut. */
export const MAX_OUTBOUND_BUFFER = 64 * 1024
/** A simulated call's audio at its time scale: its buffer holds as many seconds of audio, to this many times. */
const MAX_SCALED_BUFFERS = 16
/** What we hold for a carrier (4 s of audio; a simulated call's at its pace, at most 1 MiB). */
const outboundLimit = (s: { readonly grant: StreamGrant }) =>
  MAX_OUTBOUND_BUFFER * Math.min(MAX_SCALED_BUFFERS, Math.max(1, Math.round(1 / s.grant.timeScale)))
/** A stream that sends nothing for this long is closed (a carrier sends 50 frames a second). */
const IDLE_TIMEOUT_S = 30

/** WebSocket close codes we end a stream with. */
export const CLOSE = { normal: 1000, unsupported: 1003, policy: 1008, tooBig: 1009 } as const

interface StreamState {
  readonly grant: StreamGrant
  streamSid: string | undefined
  out: BusSubscription | undefined
  /** Token bucket of messages the carrier may still send. */
  allowance: number
  lastRefill: number
  closed: boolean
}

export interface MediaStreams {
  /** Streams open in this process. */
  readonly open: number
  /** Ends every stream (shutdown). */
  closeAll(): void
}

export interface MediaStreamDeps {
  readonly sql: Sql
  readonly bus: BusClient
  readonly log: Logger
  /** The telco_a auth token a workspace's carrier signs with (its own credential, else the platform's). */
  readonly signingToken: (tenantId: number) => Promise<string | undefined>
  /** Proxies whose X-Forwarded-For names the client (TRUSTED_PROXIES), for the refusal throttle. */
  readonly trustedProxies?: readonly string[]
  readonly now?: () => number
}

/**
 * Refused upgrades an address may make in a minute before it is answered 429 without its token being
 * looked up (a well-formed token costs a database statement to check); addresses tracked at most.
 */
const REFUSALS_PER_MINUTE = 30
const MAX_TRACKED_ADDRESSES = 10_000

/** Refused upgrades per client address, in a fixed minute window each. */
class Refusals {
  private readonly by = new Map<string, { n: number; since: number }>()
  constructor(private readonly now: () => number) {}

  blocked(ip: string): boolean {
    const r = this.by.get(ip)
    return r !== undefined && this.now() - r.since < 60_000 && r.n >= REFUSALS_PER_MINUTE
  }

  refused(ip: string): void {
    const t = this.now()
    const r = this.by.get(ip)
    if (r !== undefined && t - r.since < 60_000) {
      r.n++
      return
    }
    this.by.delete(ip)
    // The oldest entry goes first (a Map keeps insertion order).
    if (this.by.size >= MAX_TRACKED_ADDRESSES) this.by.delete(this.by.keys().next().value!)
    this.by.set(ip, { n: 1, since: t })
  }
}

const UNAUTHORIZED = JSON.stringify({
  error: "this media stream's token is not valid (unknown, used, expired, or its call has ended)",
  code: "UNAUTHENTICATED",
})

const BAD_SIGNATURE = JSON.stringify({
  error:
    "this media stream's upgrade is not signed by its workspace's carrier (X-telco_a-Signature over the stream URL)",
  code: "INVALID_SIGNATURE",
})

const TOO_MANY = JSON.stringify({
  error: "too many refused media streams from this address: try again in a minute",
  code: "RATE_LIMITED",
})

/** Serves carrier media streams on `app`. */
export function attachMediaStreams(app: TemplatedApp, deps: MediaStreamDeps): MediaStreams {
  const { sql, bus, log } = deps
  const now = deps.now ?? (() => performance.now())
  const refusals = new Refusals(now)
  const sockets = new Set<WebSocket<StreamState>>()

  // What the carriers sent, published together once per turn of the event loop: uWS calls us once
  // per message, and a publish per callback is a write to the bus's socket per frame (10,000 a
  // second at 200 calls); together they are one write.
  let outbox: Array<{ readonly s: StreamState; readonly kind: string; readonly payload: Uint8Array | object }> = []
  const flushOutbox = () => {
    const batch = outbox
    outbox = []
    for (const { s, kind, payload } of batch) {
      try {
        bus.publish(mediaInSubject(s.grant.tenantId, s.grant.callId), payload, {
          headers: { [MEDIA_KIND_HEADER]: kind },
        })
      } catch (err) {
        log.warn({ err, call_id: s.grant.callId }, "media stream: could not publish to the bus")
      }
    }
  }
  const publishIn = (s: StreamState, kind: string, payload: Uint8Array | object) => {
    if (outbox.push({ s, kind, payload }) === 1) setImmediate(flushOutbox)
  }

  /**
   * The call a stream may carry, or the refusal's body: the token must be live, and a carrier's
   * stream signed over the URL it was given; only then is the token spent (a stranger who saw the
   * URL cannot spend it for the carrier).
   */
  const admitStream = async (token: string, signature: string | undefined): Promise<StreamGrant | string> => {
    const claim = await claimOf(sql, token)
    if (claim === undefined) return UNAUTHORIZED
    if (claim.signedUrl !== undefined) {
      const key = await deps.signingToken(claim.tenantId)
      if (key === undefined || !verifyTelcoA(key, claim.signedUrl, undefined, signature)) return BAD_SIGNATURE
    }
    return (await takeStreamToken(sql, token)) ?? UNAUTHORIZED
  }

  const cut = (ws: WebSocket<StreamState>, code: number, reason: string) => {
    const s = ws.getUserData()
    if (s.closed) return
    log.warn({ call_id: s.grant.callId, code, reason }, "media stream cut")
    ws.end(code, reason.slice(0, 120))
  }

  /**
   * Takes one message from the carrier's allowance; false when it sends faster than audio can come
   * (a simulated call's audio comes at its time scale: the allowance is real time's at that pace).
   */
  const admit = (s: StreamState): boolean => {
    const t = now()
    const perSecond = MESSAGES_PER_SECOND / s.grant.timeScale
    s.allowance = Math.min(MESSAGE_BURST, s.allowance + ((t - s.lastRefill) / 1000) * perSecond)
    s.lastRefill = t
    if (s.allowance < 1) return false
    s.allowance -= 1
    return true
  }

  /** What the runtime asks us to send; a carrier not reading what we send is cut. */
  const listenOut = (ws: WebSocket<StreamState>, s: StreamState, streamSid: string) =>
    bus.subscribe(mediaOutSubject(s.grant.tenantId, s.grant.callId), (msg) => {
      if (s.closed) return
      const kind = msg.headers?.[MEDIA_KIND_HEADER]
      let text: string
      if (kind === "media") text = mediaMessage(streamSid, msg.data)
      else if (kind === "mark") text = markMessage(streamSid, String(msg.json<{ name?: unknown }>().name ?? ""))
      else if (kind === "clear") text = clearMessage(streamSid)
      else if (kind === "hangup") return void ws.end(CLOSE.normal, "call ended")
      else return
      if (ws.getBufferedAmount() > outboundLimit(s)) return cut(ws, CLOSE.policy, "not reading the call's audio")
      ws.send(text, false)
    })

  app.ws<StreamState>(MEDIA_STREAM_PATH, {
    maxPayloadLength: MAX_STREAM_MESSAGE_BYTES,
    maxBackpressure: MAX_OUTBOUND_BUFFER * MAX_SCALED_BUFFERS * 2,
    closeOnBackpressureLimit: true,
    idleTimeout: IDLE_TIMEOUT_S,
    sendPingsAutomatically: true,

    upgrade: (res, req, context) => {
      // req is valid only now: copy what the upgrade needs.
      const ip = clientAddress(
        Buffer.from(res.getRemoteAddressAsText()).toString(),
        req.getHeader("x-forwarded-for") || undefined,
        deps.trustedProxies ?? [],
      ).clientIp
      if (refusals.blocked(ip)) {
        res
          .writeStatus("429 Too Many Requests")
          .writeHeader("Retry-After", "60")
          .writeHeader("Content-Type", "application/json; charset=utf-8")
          .end(TOO_MANY, true)
        return
      }
      const token = req.getParameter(0) ?? ""
      // The spec's header name, or its hyphenated form (what a proxy forwards: deploy/nginx.conf).
      const signature = req.getHeader("x-telco_a-signature") || req.getHeader("x-telco-a-signature") || undefined
      const key = req.getHeader("sec-websocket-key")
      const protocol = req.getHeader("sec-websocket-protocol")
      const extensions = req.getHeader("sec-websocket-extensions")
      let aborted = false
      res.onAborted(() => {
        aborted = true
      })
      // A token is URL-safe as minted: anything escaped is not one (and decoding could throw here).
      admitStream(token, signature).then(
        (admitted) => {
          if (aborted) return
          res.cork(() => {
            if (typeof admitted === "string") {
              refusals.refused(ip)
              res
                .writeStatus("401 Unauthorized")
                .writeHeader("Content-Type", "application/json; charset=utf-8")
                .end(admitted, true)
              return
            }
            const state: StreamState = {
              grant: admitted,
              streamSid: undefined,
              out: undefined,
              allowance: MESSAGE_BURST,
              lastRefill: now(),
              closed: false,
            }
            res.upgrade(state, key, protocol, extensions, context)
          })
        },
        (err: unknown) => {
          log.error({ err }, "media stream: could not check its token")
          if (aborted) return
          res.cork(() => {
            res
              .writeStatus("503 Service Unavailable")
              .writeHeader("Content-Type", "application/json; charset=utf-8")
              .end(JSON.stringify({ error: "the database is unavailable", code: "DATABASE_UNAVAILABLE" }), true)
          })
        },
      )
    },

    open: (ws) => {
      sockets.add(ws)
      const s = ws.getUserData()
      log.info({ call_id: s.grant.callId }, "media stream open")
    },

    message: (ws, message, isBinary) => {
      const s = ws.getUserData()
      if (s.closed) return
      if (isBinary) return cut(ws, CLOSE.unsupported, "binary messages are not part of the protocol")
      if (!admit(s)) return cut(ws, CLOSE.policy, "sending faster than audio can come")
      const parsed = parseStreamMessage(Buffer.from(message).toString("utf8"))
      if (!parsed.ok) return cut(ws, CLOSE.policy, parsed.reason)
      const m = parsed.message
      switch (m.event) {
        case "connected":
          return
        case "start": {
          if (s.streamSid !== undefined) return cut(ws, CLOSE.policy, "a second start")
          const callSid = m.start.callSid
          if (s.grant.providerCallId !== null && callSid !== s.grant.providerCallId)
            return cut(ws, CLOSE.policy, "this stream's call is not the one its token was minted for")
          s.streamSid = m.streamSid
          s.out = listenOut(ws, s, m.streamSid)
          return publishIn(s, "start", { stream_sid: m.streamSid, call_sid: callSid })
        }
        default:
          break
      }
      // Everything else belongs to a started stream, and names it.
      if (s.streamSid === undefined) return cut(ws, CLOSE.policy, `${m.event} before start`)
      if (m.streamSid !== s.streamSid) return cut(ws, CLOSE.policy, "a message of another stream")
      switch (m.event) {
        case "media":
          if (m.media.track === "outbound") return
          return publishIn(s, "media", mediaBytes(m))
        case "mark":
          return publishIn(s, "mark", { name: m.mark.name })
        case "dtmf":
          return publishIn(s, "dtmf", { digit: m.dtmf.digit })
        case "stop":
          publishIn(s, "stop", {})
          return ws.end(CLOSE.normal, "stopped")
      }
    },

    close: (ws, code) => {
      sockets.delete(ws)
      const s = ws.getUserData()
      s.closed = true
      s.out?.unsubscribe()
      if (s.streamSid !== undefined) publishIn(s, "closed", { code })
      log.info({ call_id: s.grant.callId, code }, "media stream closed")
    },
  })

  return {
    get open() {
      return sockets.size
    },
    closeAll() {
      for (const ws of [...sockets]) ws.end(CLOSE.normal, "server shutting down")
    },
  }
}
