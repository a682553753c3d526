// Speech recognition by a hosted vendor speaking Deepgram's live protocol (wss://…/v1/listen): one
// WebSocket per call, opened when the call's recogniser is made, carrying the callee's speech as μ-law 8 kHz.
//
// The call's own voice-activity detection says where an utterance ends: end() flushes its audio and sends
// `Finalize`, and the vendor's final results (`from_finalize`) are its transcript. Only speech is sent, so
// between utterances the stream is kept open by `KeepAlive`. Results are matched to utterances by where
// their audio lies in the stream (the vendor's `start`/`duration` against the bytes sent), so an utterance
// that starts while the last one's answer is still coming is not confused with it. A connection lost in
// the call is opened again (a short backoff, bounded attempts) and the utterances not yet answered are sent
// again; a refused key or a policy close is not retried. end() never rejects and never waits past its
// finalize timeout: a call must not go silent because its recogniser did. What failed is told to onFailure.
import type { Duplex } from "node:stream"
import { type Dispatcher, getGlobalDispatcher, WebSocket } from "undici"
import { parseJsonObject, parseRetryAfter } from "../http.util.js"
import type { StreamingRecognizer } from "./streaming.interface.js"

export const DEEPGRAM_BASE_URL = "wss://api.deepgram.com"

/** μ-law at 8 kHz: a byte a sample. */
const BYTES_PER_SECOND = 8000
const FRAME_MS = 20
/** How far (10 ms of audio) the vendor's timestamps may stray from the bytes we counted. */
const SLACK_BYTES = 80
/** A stream open this long worked, even if the vendor said nothing on it: the reconnect count starts again. */
const STABLE_MS = 5_000
/** The most audio one message carries when a backlog goes at once (1 s). */
const MAX_MESSAGE_AUDIO_BYTES = BYTES_PER_SECOND
const ERROR_DETAIL_CHARS = 200

/**
 * What went wrong. Fatal failures (`fatal: true`) end the call's recognition: each is told once, and from
 * then on frames are dropped and end() answers "" at once.
 * - `auth`: the key was refused (401/403 on the upgrade); not retried.
 * - `refused`: the vendor closed the stream 1008 (policy: the key, or audio it cannot decode, DATA-0000), or
 *   answered the upgrade with another 4xx; not retried.
 * - `rate_limited`: 429 on the upgrade; retried after a backoff, fatal once the retries are spent.
 * - `unreachable`: a connect that failed (network, 5xx, timeout); retried, fatal once the attempts are spent.
 * - `dropped`: an open stream was lost (1011, network); opened again, fatal once the attempts are spent.
 * - `finalize_timeout`: an utterance's Finalize went unanswered; it was answered from what had been heard.
 * - `bad_message`: a message from the vendor was ignored (not JSON, an unexpected shape, oversized).
 * - `audio_dropped`: an utterance outgrew the audio kept while not connected; its oldest frames were dropped.
 */
export type DeepgramFailureKind =
  | "auth"
  | "refused"
  | "rate_limited"
  | "unreachable"
  | "dropped"
  | "finalize_timeout"
  | "bad_message"
  | "audio_dropped"

export class DeepgramFailure extends Error {
  override readonly name = "DeepgramFailure"
  constructor(
    readonly kind: DeepgramFailureKind,
    message: string,
    readonly fatal: boolean,
    /** The upgrade's HTTP status, or the close code of an open stream. */
    readonly status?: number,
  ) {
    super(message)
  }
}

export interface DeepgramOptions {
  readonly apiKey: string
  /** The API root, ws:// or wss://, without the path; default wss://api.deepgram.com. */
  readonly baseUrl?: string | undefined
  /** The vendor's model (e.g. nova-3); its default when unset. */
  readonly model?: string | undefined
  /** BCP-47 language (e.g. en-US); the vendor's default when unset. */
  readonly language?: string | undefined
  /** Silence (ms) the vendor waits for before it marks speech final; default 300. */
  readonly endpointingMs?: number | undefined
  /** How long an upgrade may take before it is given up and tried again; default 5 000 ms. */
  readonly connectTimeoutMs?: number | undefined
  /** How long end() waits for the vendor's answer to its Finalize; default 2 000 ms. */
  readonly finalizeTimeoutMs?: number | undefined
  /** A KeepAlive goes when nothing was sent for half this long (the vendor closes after 10 s); default 4 000 ms. */
  readonly keepAliveMs?: number | undefined
  /** Audio gathered into one message while an utterance is under way; default 100 ms. */
  readonly batchMs?: number | undefined
  /** An utterance's audio kept to be sent when (re)connected; past it the oldest is dropped; default 10 000 ms. */
  readonly bufferMs?: number | undefined
  /** Connects or drops in a row (nothing heard from the vendor between them) before giving up; default 5. */
  readonly maxReconnects?: number | undefined
  /** 429s in a row retried before giving up; default 3. */
  readonly maxRateLimitRetries?: number | undefined
  /** The first retry's delay (doubling, with jitter, up to maxBackoffMs); default 200 ms and 5 000 ms. */
  readonly backoffMs?: number | undefined
  readonly maxBackoffMs?: number | undefined
  /** After the key is refused, recognisers made within this long fail at once without connecting; default 60 s. */
  readonly authRetryAfterMs?: number | undefined
  /** After free()'s CloseStream, how long the vendor has to close before the socket is closed; default 1 000 ms. */
  readonly closeGraceMs?: number | undefined
  /** Longer messages from the vendor (in characters) are ignored; default 256 Ki. */
  readonly maxMessageChars?: number | undefined
  /** Where the upgrade's request goes; default undici's global dispatcher. */
  readonly dispatcher?: Dispatcher | undefined
  /** A failure, for the call's log and metrics (see DeepgramFailureKind). */
  readonly onFailure?: ((kind: DeepgramFailureKind, failure: DeepgramFailure) => void) | undefined
}

/** Counters since the recognisers were made (live: read them at any time). */
export interface DeepgramStats {
  /** Upgrades tried, and those that opened. */
  connects: number
  opened: number
  /** Sockets connecting or open now. */
  open: number
  /** Frames dropped: past the buffer while not connected, or heard after a fatal failure. */
  framesDropped: number
  /** Messages from the vendor not used (malformed, oversized, or of a type not read). */
  messagesIgnored: number
  readonly failures: Record<DeepgramFailureKind, number>
}

export interface DeepgramRecognizers {
  /**
   * One call's recogniser: it connects at once. `gaveUp`: told once when recognition is over for the
   * call (a fatal failure), so the call can hear with another recogniser from then on.
   */
  recognizer(gaveUp?: (failure: DeepgramFailure) => void): HostedRecognizer
  readonly stats: Readonly<DeepgramStats>
  /** Frees every recogniser still held (process shutdown). */
  close(): void
}

/** A hosted recogniser: whether it has given up on its call (what it hears from then on is dropped). */
export interface HostedRecognizer extends StreamingRecognizer {
  readonly failed: boolean
}

interface Settings {
  readonly url: string
  readonly apiKey: string
  readonly connectTimeoutMs: number
  readonly finalizeTimeoutMs: number
  readonly keepAliveMs: number
  readonly batchFrames: number
  readonly bufferFrames: number
  readonly maxReconnects: number
  readonly maxRateLimitRetries: number
  readonly backoffMs: number
  readonly maxBackoffMs: number
  readonly authRetryAfterMs: number
  readonly closeGraceMs: number
  readonly maxMessageChars: number
  readonly dispatcher: Dispatcher | undefined
}

/** What the recognisers of one key share. */
interface Hub {
  readonly stats: DeepgramStats
  readonly live: Set<DeepgramRecognizer>
  closed: boolean
  /** When the key was last refused (Date.now()). */
  authRefusedAt: number | undefined
  report(f: DeepgramFailure): void
}

/** The stream's URL: μ-law 8 kHz mono, interim results, punctuation. */
export function listenUrl(o: Pick<DeepgramOptions, "baseUrl" | "model" | "language" | "endpointingMs">): string {
  const base = (o.baseUrl ?? DEEPGRAM_BASE_URL).replace(/\/+$/, "")
  const q = new URLSearchParams({
    encoding: "mulaw",
    sample_rate: String(BYTES_PER_SECOND),
    channels: "1",
    interim_results: "true",
    endpointing: String(o.endpointingMs ?? 300),
    punctuate: "true",
  })
  if (o.model !== undefined) q.set("model", o.model)
  if (o.language !== undefined) q.set("language", o.language)
  return `${base}/v1/listen?${q}`
}

export function makeDeepgramRecognizers(opts: DeepgramOptions): DeepgramRecognizers {
  const url = listenUrl(opts)
  const protocol = new URL(url).protocol
  if (protocol !== "wss:" && protocol !== "ws:")
    throw new TypeError(`a Deepgram base URL is ws:// or wss://, not ${url}`)
  const s: Settings = {
    url,
    apiKey: opts.apiKey,
    connectTimeoutMs: opts.connectTimeoutMs ?? 5_000,
    finalizeTimeoutMs: opts.finalizeTimeoutMs ?? 2_000,
    keepAliveMs: opts.keepAliveMs ?? 4_000,
    batchFrames: Math.max(1, Math.round((opts.batchMs ?? 100) / FRAME_MS)),
    bufferFrames: Math.max(1, Math.round((opts.bufferMs ?? 10_000) / FRAME_MS)),
    maxReconnects: opts.maxReconnects ?? 5,
    maxRateLimitRetries: opts.maxRateLimitRetries ?? 3,
    backoffMs: opts.backoffMs ?? 200,
    maxBackoffMs: opts.maxBackoffMs ?? 5_000,
    authRetryAfterMs: opts.authRetryAfterMs ?? 60_000,
    closeGraceMs: opts.closeGraceMs ?? 1_000,
    maxMessageChars: opts.maxMessageChars ?? 256 * 1024,
    dispatcher: opts.dispatcher,
  }
  const stats: DeepgramStats = {
    connects: 0,
    opened: 0,
    open: 0,
    framesDropped: 0,
    messagesIgnored: 0,
    failures: {
      auth: 0,
      refused: 0,
      rate_limited: 0,
      unreachable: 0,
      dropped: 0,
      finalize_timeout: 0,
      bad_message: 0,
      audio_dropped: 0,
    },
  }
  // The key never reaches a message, even if the vendor echoes it back.
  const scrub = (text: string): string => (s.apiKey === "" ? text : text.split(s.apiKey).join("***"))
  const hub: Hub = {
    stats,
    live: new Set(),
    closed: false,
    authRefusedAt: undefined,
    report(f) {
      stats.failures[f.kind]++
      try {
        opts.onFailure?.(f.kind, new DeepgramFailure(f.kind, scrub(f.message), f.fatal, f.status))
      } catch {
        // the caller's counter threw: nothing of ours to undo
      }
    },
  }
  return {
    recognizer: (gaveUp) => new DeepgramRecognizer(s, hub, gaveUp),
    stats,
    close() {
      hub.closed = true
      for (const r of [...hub.live]) r.free()
    },
  }
}

/** One utterance: its audio, and what the vendor has made of it on the current connection. */
interface Utterance {
  /** Its frames, kept to be sent again on a new connection (the oldest dropped past the buffer). */
  frames: Uint8Array[]
  /** How many of them (the first) went on the current connection. */
  sent: number
  /** Where its audio begins, and (once its Finalize went) ends, in the current connection's stream (bytes). */
  from: number | undefined
  to: number | undefined
  finalizeSent: boolean
  finals: string[]
  interim: string
  /** Where the last final result given to it ends (bytes). */
  finalEnd: number
  /** What an earlier connection made of it before it was lost (the answer if the new one says nothing). */
  earlier: string
  audioDropped: boolean
  /** Set by end(): who waits for the transcript, and the finalize timeout. */
  answer: ((text: string) => void) | undefined
  timer: NodeJS.Timeout | undefined
}

/** What the upgrade was answered when it was not 101. */
interface Handshake {
  status?: number
  retryAfterMs?: number
  vendorError?: string
}

interface Connection {
  readonly ws: WebSocket
  readonly handshake: Handshake
  opened: boolean
  /** When it opened (Date.now()). */
  openedAt: number
  ended: boolean
  timedOut: boolean
  /** Malformed messages on it: the first is reported, all are counted. */
  badMessages: number
  error: string | undefined
  grace: NodeJS.Timeout | undefined
}

/** A vendor result, its audio in bytes of the stream when it said where (start, duration). */
interface Result {
  readonly transcript: string
  readonly isFinal: boolean
  readonly speechFinal: boolean
  readonly fromFinalize: boolean
  readonly from: number | undefined
  readonly end: number | undefined
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null
const seconds = (v: unknown): number | undefined =>
  typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : undefined

/** A `Results` message's parts, or undefined when it does not have the shape the protocol gives it. */
function readResult(m: Record<string, unknown>): Result | undefined {
  const alternatives = isObject(m.channel) ? m.channel.alternatives : undefined
  const best: unknown = Array.isArray(alternatives) ? alternatives[0] : undefined
  if (!isObject(best) || typeof best.transcript !== "string") return undefined
  const start = seconds(m.start)
  const duration = seconds(m.duration)
  const timed = start !== undefined && duration !== undefined
  return {
    transcript: best.transcript.replace(/\s+/g, " ").trim(),
    isFinal: m.is_final === true,
    speechFinal: m.speech_final === true,
    fromFinalize: m.from_finalize === true,
    from: timed ? Math.round(start * BYTES_PER_SECOND) : undefined,
    end: timed ? Math.round((start + duration) * BYTES_PER_SECOND) : undefined,
  }
}

const heardOf = (u: Utterance): string => u.finals.join(" ") || u.interim

/** A header of an upgrade's answer (undici gives them as name, value, name, value …). */
function headerOf(raw: Buffer[], name: string): string | undefined {
  for (let i = 0; i + 1 < raw.length; i += 2)
    if (raw[i]!.toString("latin1").toLowerCase() === name) return raw[i + 1]!.toString("latin1")
  return undefined
}

/**
 * The handler of the upgrade's request, passing everything through and noting the status of an answer
 * that is not 101 (undici's WebSocket reports only "non-101 status code": a refused key, a 429 and an
 * outage are handled differently here).
 */
class HandshakeWatch implements Dispatcher.DispatchHandlers {
  constructor(
    private readonly inner: Dispatcher.DispatchHandlers,
    private readonly seen: Handshake,
  ) {}
  onConnect(abort: (err?: Error) => void): void {
    return this.inner.onConnect?.(abort)
  }
  onError(err: Error): void {
    return this.inner.onError?.(err)
  }
  onUpgrade(statusCode: number, headers: Buffer[] | string[] | null, socket: Duplex): void {
    return this.inner.onUpgrade?.(statusCode, headers, socket)
  }
  onResponseStarted(): void {
    return this.inner.onResponseStarted?.()
  }
  onHeaders(statusCode: number, headers: Buffer[], resume: () => void, statusText: string): boolean {
    if (statusCode >= 200) {
      this.seen.status = statusCode
      const retryAfter = parseRetryAfter(headerOf(headers, "retry-after") ?? null)
      if (retryAfter !== undefined) this.seen.retryAfterMs = retryAfter
      const vendorError = headerOf(headers, "dg-error")
      if (vendorError !== undefined) this.seen.vendorError = vendorError.slice(0, ERROR_DETAIL_CHARS)
    }
    return this.inner.onHeaders?.(statusCode, headers, resume, statusText) ?? true
  }
  onData(chunk: Buffer): boolean {
    return this.inner.onData?.(chunk) ?? true
  }
  onComplete(trailers: string[] | null): void {
    return this.inner.onComplete?.(trailers)
  }
  onBodySent(chunkSize: number, totalBytesSent: number): void {
    return this.inner.onBodySent?.(chunkSize, totalBytesSent)
  }
}

const watched = (base: Dispatcher, seen: Handshake): Dispatcher =>
  base.compose((dispatch) => (opts, handler) => dispatch(opts, new HandshakeWatch(handler, seen)))

class DeepgramRecognizer implements HostedRecognizer {
  private state: "live" | "failed" | "freed" = "live"
  private conn: Connection | undefined
  /** The utterance being spoken, and those ended whose transcript is still to come (in order). */
  private current: Utterance | undefined
  private readonly pending: Utterance[] = []
  /** Audio bytes sent on the current connection: where the next byte lies in the vendor's timestamps. */
  private streamBytes = 0
  private lastSentAt = 0
  /** Connects or drops in a row with nothing heard from the vendor, and 429s in a row. */
  private failures = 0
  private refusals = 0
  private connectTimer: NodeJS.Timeout | undefined
  private retryTimer: NodeJS.Timeout | undefined
  private keepAliveTimer: NodeJS.Timeout | undefined

  constructor(
    private readonly s: Settings,
    private readonly hub: Hub,
    private readonly gaveUp?: (failure: DeepgramFailure) => void,
  ) {
    if (hub.closed) {
      this.state = "freed"
      return
    }
    const refusedAt = hub.authRefusedAt
    if (refusedAt !== undefined && Date.now() - refusedAt < s.authRetryAfterMs) {
      const ago = Math.round((Date.now() - refusedAt) / 1000)
      this.fail("auth", `the key was refused ${ago} s ago: not tried again for this call`)
      return
    }
    hub.live.add(this)
    this.connect()
  }

  get failed(): boolean {
    return this.state === "failed"
  }

  frame(mulaw: Uint8Array): void {
    if (this.state === "freed" || mulaw.length === 0) return // an empty message would close the stream
    if (this.state === "failed") {
      this.hub.stats.framesDropped++
      return
    }
    const u = (this.current ??= {
      frames: [],
      sent: 0,
      from: undefined,
      to: undefined,
      finalizeSent: false,
      finals: [],
      interim: "",
      finalEnd: 0,
      earlier: "",
      audioDropped: false,
      answer: undefined,
      timer: undefined,
    })
    u.frames.push(mulaw.slice())
    if (u.frames.length > this.s.bufferFrames) {
      u.frames.shift()
      if (u.sent > 0) u.sent--
      else this.droppedAudio(u)
    }
    if (u.frames.length - u.sent >= this.s.batchFrames) this.flush(u)
  }

  partial(): string {
    const u = this.current
    if (u === undefined) return ""
    return [...u.finals, u.interim].filter((t) => t !== "").join(" ") || u.earlier
  }

  end(): Promise<string> {
    const u = this.current
    this.current = undefined
    if (u === undefined || this.state !== "live") return Promise.resolve("")
    return new Promise((resolve) => {
      u.answer = resolve
      u.timer = setTimeout(() => {
        this.hub.report(
          new DeepgramFailure("finalize_timeout", `no answer to Finalize within ${this.s.finalizeTimeoutMs} ms`, false),
        )
        this.settle(u)
      }, this.s.finalizeTimeoutMs)
      this.pending.push(u)
      // Not connected: it goes, with its Finalize, once the stream opens.
      if (this.isOpen()) {
        this.flush(u)
        this.finalize(u)
      }
    })
  }

  free(): void {
    if (this.state === "freed") return
    this.state = "freed"
    this.hub.live.delete(this)
    this.current = undefined
    for (const u of [...this.pending]) this.settle(u)
    this.stopTimers()
    if (this.conn !== undefined) this.hangUp(this.conn)
  }

  // -------------------------------------------------------------------------------------------
  // The connection

  private connect(): void {
    this.retryTimer = undefined
    if (this.state !== "live") return
    const handshake: Handshake = {}
    let ws: WebSocket
    try {
      ws = new WebSocket(this.s.url, {
        headers: { Authorization: `Token ${this.s.apiKey}` },
        dispatcher: watched(this.s.dispatcher ?? getGlobalDispatcher(), handshake),
      })
    } catch (err) {
      return this.fail("refused", `the stream could not be opened: ${(err as Error).message}`)
    }
    ws.binaryType = "arraybuffer"
    const conn: Connection = {
      ws,
      handshake,
      opened: false,
      openedAt: 0,
      ended: false,
      timedOut: false,
      badMessages: 0,
      error: undefined,
      grace: undefined,
    }
    this.conn = conn
    this.hub.stats.connects++
    this.hub.stats.open++
    // A listener that throws would be thrown into the event loop: each catches what it does not expect.
    ws.addEventListener("open", () => this.guard(conn, () => this.opened(conn)))
    ws.addEventListener("message", (e) => this.guard(conn, () => this.heard(conn, e.data)))
    ws.addEventListener("error", (e) =>
      this.guard(conn, () => {
        conn.error ??= e.message
        // undici fires no close event for an upgrade that failed: this is its end.
        if (!conn.opened) this.ended(conn, 1006, "")
      }),
    )
    ws.addEventListener("close", (e) => this.guard(conn, () => this.ended(conn, e.code, e.reason)))
    this.connectTimer = setTimeout(() => {
      conn.timedOut = true
      ws.close()
    }, this.s.connectTimeoutMs)
  }

  private guard(conn: Connection, handle: () => void): void {
    try {
      handle()
    } catch (err) {
      this.badMessage(conn, `a message could not be handled: ${(err as Error).message}`)
    }
  }

  private isOpen(): boolean {
    return this.conn?.opened === true && this.conn.ws.readyState === WebSocket.OPEN
  }

  private opened(conn: Connection): void {
    if (conn !== this.conn || this.state !== "live") return
    clearTimeout(this.connectTimer)
    conn.opened = true
    conn.openedAt = Date.now()
    this.hub.stats.opened++
    this.refusals = 0
    this.streamBytes = 0
    this.lastSentAt = Date.now()
    // What was not answered on an earlier connection goes again, in order, each ended one with its Finalize.
    for (const u of this.current === undefined ? [...this.pending] : [...this.pending, this.current]) {
      const heard = heardOf(u)
      if (heard !== "") u.earlier = heard
      u.finals = []
      u.interim = ""
      u.finalEnd = 0
      u.sent = 0
      u.from = undefined
      u.to = undefined
      u.finalizeSent = false
      this.flush(u)
      if (u.answer !== undefined) this.finalize(u)
    }
    this.keepAliveTimer = setInterval(() => {
      if (Date.now() - this.lastSentAt >= this.s.keepAliveMs / 2) this.sendControl("KeepAlive")
    }, this.s.keepAliveMs)
  }

  /** The socket is closed (or its upgrade failed): what next depends on how. */
  private ended(conn: Connection, code: number, reason: string): void {
    if (conn.ended) return
    conn.ended = true
    clearTimeout(conn.grace)
    this.hub.stats.open--
    if (conn !== this.conn) return
    this.conn = undefined
    this.stopTimers()
    if (this.state !== "live") return
    const why = [reason, conn.handshake.vendorError, conn.error].find((t) => t !== undefined && t !== "") ?? ""
    const detail = why === "" ? "" : `: ${why.slice(0, ERROR_DETAIL_CHARS)}`
    if (conn.opened) {
      if (Date.now() - conn.openedAt >= STABLE_MS) this.failures = 0
      if (code === 1008) return this.fail("refused", `the vendor closed the stream 1008${detail}`, code)
      return this.retry("dropped", `the stream closed ${code}${detail}`, code)
    }
    const status = conn.handshake.status
    if (status === 401 || status === 403) {
      this.hub.authRefusedAt = Date.now()
      return this.fail("auth", `the vendor refused the key (${status})${detail}`, status)
    }
    if (status === 429) {
      this.refusals++
      const message = `the vendor answered 429 (attempt ${this.refusals})${detail}`
      if (this.refusals > this.s.maxRateLimitRetries) return this.fail("rate_limited", message, status)
      this.hub.report(new DeepgramFailure("rate_limited", message, false, status))
      const wait = Math.max(
        Math.min(conn.handshake.retryAfterMs ?? 0, this.s.maxBackoffMs),
        this.backoff(this.refusals),
      )
      this.retryTimer = setTimeout(() => this.connect(), wait)
      return
    }
    if (status !== undefined && status >= 400 && status < 500)
      return this.fail("refused", `the vendor answered the upgrade ${status}${detail}`, status)
    const what = conn.timedOut
      ? `no upgrade within ${this.s.connectTimeoutMs} ms`
      : status === undefined
        ? `the upgrade failed${detail}`
        : `the vendor answered the upgrade ${status}${detail}`
    this.retry("unreachable", what, status)
  }

  /** Connects again after a backoff, unless the attempts are spent. */
  private retry(kind: "dropped" | "unreachable", message: string, status: number | undefined): void {
    this.failures++
    if (this.failures > this.s.maxReconnects)
      return this.fail(kind, `${message} (${this.failures - 1} reconnects: given up)`, status)
    this.hub.report(new DeepgramFailure(kind, message, false, status))
    this.retryTimer = setTimeout(() => this.connect(), this.backoff(this.failures))
  }

  /** The n-th retry's delay: doubling from backoffMs, capped, jittered (calls lost together come back apart). */
  private backoff(n: number): number {
    return Math.min(this.s.maxBackoffMs, this.s.backoffMs * 2 ** (n - 1)) * (0.5 + Math.random() / 2)
  }

  /** Recognition is over for this call: told once; utterances waiting are answered with what was heard. */
  private fail(kind: DeepgramFailureKind, message: string, status?: number): void {
    if (this.state !== "live") return
    this.state = "failed"
    this.hub.live.delete(this)
    const failure = new DeepgramFailure(kind, message, true, status)
    this.hub.report(failure)
    try {
      this.gaveUp?.(failure)
    } catch {
      // the caller's handler threw: recognition is over all the same
    }
    this.stopTimers()
    if (this.conn !== undefined) this.hangUp(this.conn)
    this.current = undefined
    for (const u of [...this.pending]) this.settle(u)
  }

  /** Closes a connection: an open one is asked to (CloseStream) and given closeGraceMs to. */
  private hangUp(conn: Connection): void {
    const ws = conn.ws
    if (ws.readyState === WebSocket.CONNECTING) return ws.close()
    if (ws.readyState !== WebSocket.OPEN) return
    this.sendControl("CloseStream")
    conn.grace = setTimeout(() => ws.close(1000), this.s.closeGraceMs)
  }

  private stopTimers(): void {
    clearTimeout(this.connectTimer)
    clearTimeout(this.retryTimer)
    clearInterval(this.keepAliveTimer)
    this.connectTimer = this.retryTimer = this.keepAliveTimer = undefined
  }

  // -------------------------------------------------------------------------------------------
  // Audio out

  /** Sends the utterance's frames not yet sent on this connection (a backlog a second a message). */
  private flush(u: Utterance): void {
    if (!this.isOpen()) return
    const ws = this.conn!.ws
    while (u.sent < u.frames.length) {
      let n = 0
      let bytes = 0
      while (u.sent + n < u.frames.length && bytes < MAX_MESSAGE_AUDIO_BYTES) bytes += u.frames[u.sent + n++]!.length
      const out = new Uint8Array(bytes)
      for (let i = 0, at = 0; i < n; i++) {
        out.set(u.frames[u.sent + i]!, at)
        at += u.frames[u.sent + i]!.length
      }
      u.from ??= this.streamBytes
      ws.send(out)
      this.streamBytes += bytes
      u.sent += n
    }
    this.lastSentAt = Date.now()
  }

  /** Asks for the utterance's final results, unless every byte of it already has one. */
  private finalize(u: Utterance): void {
    u.to = this.streamBytes
    if (u.finals.length > 0 && u.finalEnd >= u.to - SLACK_BYTES) return this.settle(u)
    this.sendControl("Finalize")
    u.finalizeSent = true
  }

  private sendControl(type: "KeepAlive" | "Finalize" | "CloseStream"): void {
    if (!this.isOpen()) return
    this.conn!.ws.send(JSON.stringify({ type }))
    this.lastSentAt = Date.now()
  }

  private droppedAudio(u: Utterance): void {
    this.hub.stats.framesDropped++
    if (u.audioDropped) return
    u.audioDropped = true
    const ms = this.s.bufferFrames * FRAME_MS
    this.hub.report(
      new DeepgramFailure("audio_dropped", `an utterance outgrew the ${ms} ms kept while not connected`, false),
    )
  }

  // -------------------------------------------------------------------------------------------
  // Results in

  private heard(conn: Connection, data: unknown): void {
    if (conn !== this.conn || this.state !== "live") return
    if (typeof data !== "string") return this.badMessage(conn, "a binary message")
    if (data.length > this.s.maxMessageChars) return this.badMessage(conn, `a message of ${data.length} characters`)
    const m = parseJsonObject(data)
    if (m === undefined) return this.badMessage(conn, "a message that is not a JSON object")
    switch (m.type) {
      case "Results": {
        const r = readResult(m)
        if (r === undefined) return this.badMessage(conn, "a Results message without a transcript")
        this.answered()
        return this.result(r)
      }
      case "Metadata":
      case "UtteranceEnd":
      case "SpeechStarted":
        return this.answered()
      default:
        this.hub.stats.messagesIgnored++
    }
  }

  /** The vendor answers: the stream works, and the reconnect count starts again. */
  private answered(): void {
    this.failures = 0
  }

  private badMessage(conn: Connection, what: string): void {
    this.hub.stats.messagesIgnored++
    if (conn.badMessages++ > 0) return
    this.hub.report(new DeepgramFailure("bad_message", `ignored ${what} from the vendor`, false))
  }

  private result(r: Result): void {
    const u = this.ownerOf(r)
    if (u !== undefined) {
      if (r.isFinal) {
        if (r.transcript !== "") u.finals.push(r.transcript)
        u.interim = ""
        if (r.end !== undefined) u.finalEnd = Math.max(u.finalEnd, r.end)
      } else u.interim = r.transcript
    }
    if (r.fromFinalize) {
      // The answer to a Finalize: every utterance whose Finalize went and whose audio it reaches into is done.
      if (r.end === undefined) {
        const first = this.pending.find((p) => p.finalizeSent)
        if (first !== undefined) this.settle(first)
      } else
        for (const p of [...this.pending])
          if (p.finalizeSent && p.from !== undefined && p.from + SLACK_BYTES <= r.end) this.settle(p)
    } else if (r.isFinal && r.speechFinal && r.end !== undefined) {
      // The vendor's own endpointing covered an utterance to its end before the Finalize was answered.
      for (const p of [...this.pending]) if (p.to !== undefined && r.end >= p.to - SLACK_BYTES) this.settle(p)
    }
  }

  /**
   * The utterance a result speaks of: the last whose audio starts at or before the middle of the result's
   * (none: the audio of one already answered). Untimed, the oldest awaiting its Finalize, else the current.
   */
  private ownerOf(r: Result): Utterance | undefined {
    const all = this.current === undefined ? this.pending : [...this.pending, this.current]
    if (r.from === undefined || r.end === undefined)
      return r.isFinal ? (this.pending.find((p) => p.finalizeSent) ?? this.current) : (this.current ?? all.at(-1))
    const middle = (r.from + r.end) / 2
    let owner: Utterance | undefined
    for (const u of all) if (u.from !== undefined && u.from <= middle) owner = u
    return owner
  }

  /** The utterance is answered: its finals, else its interim, else what an earlier connection heard. */
  private settle(u: Utterance): void {
    const i = this.pending.indexOf(u)
    if (i < 0) return
    this.pending.splice(i, 1)
    clearTimeout(u.timer)
    u.frames = []
    u.answer?.(heardOf(u) || u.earlier)
  }
}
