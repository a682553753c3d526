// A call's sentences spoken by an ElevenLabs-style streaming voice API: one WebSocket per sentence
// (stream-input, μ-law 8 kHz asked for), its base64 chunks re-cut into 20 ms frames, bounded in time and size.
import { Buffer } from "node:buffer"
import { type Dispatcher, getGlobalDispatcher, WebSocket } from "undici"
import { PHONE_RATE, frames as toFrames } from "../audio/g711.js"
import { parseJsonObject } from "../http.util.js"
import type { Outbound } from "../outbound.js"
import {
  MAX_SPEECH_TEXT_CHARS,
  type SpeechErrorCode,
  type SpeechGender,
  SpeechSynthesisError,
} from "./speech.interface.js"
import type { PhoneSpeech, PhoneVoice, StreamingSynthesizer } from "./streaming.interface.js"

/** Limits of one sentence, in ms. */
export interface ElevenLabsStreamTimeouts {
  /** From dialling to the socket's opening (the upgrade answered). */
  readonly connectMs: number
  /** From the socket's opening (the sentence sent) to its first audio. */
  readonly firstAudioMs: number
  /** Between one audio chunk and the next, or the end. */
  readonly idleMs: number
  /** The whole sentence, the retry included. */
  readonly totalMs: number
}

export const ELEVENLABS_STREAM_TIMEOUTS: ElevenLabsStreamTimeouts = {
  connectMs: 3_000,
  firstAudioMs: 4_000,
  idleMs: 3_000,
  totalMs: 30_000,
}

/** A failed attempt at a sentence (counted by the caller; the retried one included). */
export interface ElevenLabsStreamFailure {
  readonly code: SpeechErrorCode
  /** Scrubbed of the key. */
  readonly message: string
  /** 1 or 2. */
  readonly attempt: number
  /** Another attempt follows. */
  readonly retrying: boolean
}

/** How a spoken sentence's time went, in ms from the call to speak. */
export interface ElevenLabsStreamTiming {
  readonly voice: string
  readonly attempts: number
  /** The last attempt's socket open, from that attempt's start. */
  readonly connectMs: number
  readonly firstAudioMs: number
  readonly totalMs: number
  readonly frames: number
}

export interface ElevenLabsStreamOptions {
  readonly apiKey: string
  /** The API root: wss://api.elevenlabs.io by default; http(s):// is taken as ws(s):// (SPEECH_API_URL's form). */
  readonly baseUrl?: string | undefined
  /** Default eleven_flash_v2_5, the vendor's low-latency model. */
  readonly modelId?: string | undefined
  /** Vendor voices for a voice naming none, by gender; the voice's variant picks among them. */
  readonly defaultVoices?: Partial<Readonly<Record<SpeechGender, readonly string[]>>> | undefined
  /** The vendor voice for a voice naming none when `defaultVoices` has none of its gender (SPEECH_DEFAULT_VOICE_ID). */
  readonly defaultVoiceId?: string | undefined
  readonly timeouts?: Partial<ElevenLabsStreamTimeouts> | undefined
  /** The dispatcher for the upgrade (the address guard for a tenant's URL); undici's default when absent. */
  readonly outbound?: Pick<Outbound, "dispatcher"> | undefined
  readonly onFailure?: ((failure: ElevenLabsStreamFailure) => void) | undefined
  readonly onSpoken?: ((timing: ElevenLabsStreamTiming) => void) | undefined
}

export const ELEVENLABS_STREAM_MODEL = "eleven_flash_v2_5"
const DEFAULT_BASE_URL = "wss://api.elevenlabs.io"
/** The most audio one sentence may bring (60 s of μ-law at 8 kHz): past it the answer is cut off. */
export const MAX_SENTENCE_AUDIO_BYTES = 60 * PHONE_RATE
/** The largest message the socket takes: a chunk's base64 and its alignment are a few kB. */
const MAX_MESSAGE_BYTES = 1024 * 1024
/** The vendor's speed setting runs 0.7–1.2; PhoneVoice's 0.5–2 is clamped into it. */
const MIN_SPEED = 0.7
const MAX_SPEED = 1.2
const DETAIL_CHARS = 200
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/
const END_OF_INPUT = JSON.stringify({ text: "" })

/** What the server said, sorted: a refused key, an unknown voice, a limit. */
const AUTH_WORDS = /api[ _-]?key|unauthori[sz]ed|authenticat|forbidden|permission|invalid[ _-]?token/i
const VOICE_WORDS = /voice/i
const NOT_FOUND_WORDS = /not[ _-]?found|invalid|unknown|does not exist/i
const LIMIT_WORDS = /quota|rate[ _-]?limit|too[ _-]?many|concurren|capacity|busy/i

/** One attempt's end: how it failed, and whether a second attempt may help. */
class AttemptFailed extends Error {
  constructor(
    readonly code: SpeechErrorCode,
    message: string,
    readonly retryable: boolean,
    /** Audio had arrived: a retry would speak it twice. */
    readonly heardAudio: boolean,
  ) {
    super(message)
  }
}

interface Verdict {
  readonly code: SpeechErrorCode
  readonly message: string
  readonly retryable: boolean
}

/** What a server's words (an error message, a close reason) mean, else `otherwise`. */
function verdictOf(words: string, otherwise: Verdict): Verdict {
  if (AUTH_WORDS.test(words))
    return { code: "ENGINE_FAILURE", message: `the speech API refused its key: ${words}`, retryable: false }
  if (VOICE_WORDS.test(words) && NOT_FOUND_WORDS.test(words))
    return { code: "UNSUPPORTED_VOICE", message: `the speech API does not know the voice: ${words}`, retryable: false }
  if (LIMIT_WORDS.test(words))
    return { code: "BUSY", message: `the speech API is at its limit: ${words}`, retryable: false }
  return otherwise
}

/** A refused upgrade's status, in the HTTP adapter's terms. */
function refusedUpgrade(status: number | undefined): Verdict {
  if (status === undefined)
    return { code: "ENGINE_FAILURE", message: "the speech API could not be reached", retryable: true }
  const message = `the speech API answered HTTP ${status} to the stream's upgrade`
  if (status === 401 || status === 403)
    return { code: "ENGINE_FAILURE", message: `${message}: it refused its key`, retryable: false }
  if (status === 404) return { code: "UNSUPPORTED_VOICE", message: `${message}: no such voice`, retryable: false }
  if (status === 429) return { code: "BUSY", message: `${message}: too many requests`, retryable: false }
  return { code: "ENGINE_FAILURE", message, retryable: status >= 500 }
}

/**
 * `base`, telling `seen` the status of an answer that is not an upgrade (undici's WebSocket only
 * says that the handshake failed, not with what). The socket's message limit is set on it, since a
 * composed dispatcher has none of its own.
 */
function tapStatus(base: Dispatcher, seen: (status: number) => void): Dispatcher {
  const tapped = base.compose(
    (dispatch) =>
      (opts, handler): boolean =>
        dispatch(opts, {
          onConnect: (abort) => handler.onConnect?.(abort),
          onError: (err) => handler.onError?.(err),
          onUpgrade: (status, headers, socket) => handler.onUpgrade?.(status, headers, socket),
          onResponseStarted: () => handler.onResponseStarted?.(),
          onHeaders: (status, headers, resume, text) => {
            if (status >= 200) seen(status)
            return handler.onHeaders?.(status, headers, resume, text) ?? true
          },
          onData: (chunk) => handler.onData?.(chunk) ?? true,
          onComplete: (trailers) => handler.onComplete?.(trailers),
          onBodySent: (size, total) => handler.onBodySent?.(size, total),
        }),
  )
  // undici's WebSocket reads its frame limits from its dispatcher's webSocketOptions.
  Object.defineProperty(tapped, "webSocketOptions", {
    value: { maxFragments: 1024, maxPayloadSize: MAX_MESSAGE_BYTES },
  })
  return tapped
}

interface AttemptPlan {
  readonly url: string
  readonly apiKey: string
  /** The dispatcher the upgrade goes through (tapped for its status). */
  readonly base: Dispatcher
  readonly messages: readonly string[]
  readonly timeouts: ElevenLabsStreamTimeouts
  /** What is left of the sentence's total time. */
  readonly budgetMs: number
  readonly scrub: (s: string) => string
}

interface Heard {
  readonly audio: Uint8Array
  /** performance.now() of the socket's opening and of the first audio. */
  readonly openedAt: number
  readonly firstAudioAt: number
}

/** One socket: the messages sent once it opens, the audio collected until isFinal or a normal close. */
function streamOnce(plan: AttemptPlan): Promise<Heard> {
  return new Promise<Heard>((resolve, reject) => {
    let status: number | undefined
    const chunks: Buffer[] = []
    let bytes = 0
    let openedAt = 0
    let firstAudioAt = 0
    let settled = false
    let phase: NodeJS.Timeout | undefined
    let ws: WebSocket
    let failedWith: unknown

    const stop = () => {
      settled = true
      clearTimeout(phase)
      clearTimeout(budget)
      try {
        if (ws.readyState === WebSocket.CONNECTING || ws.readyState === WebSocket.OPEN) ws.close(1000)
      } catch {
        // already closing
      }
    }
    const fail = (v: Verdict) => {
      if (settled) return
      stop()
      reject(new AttemptFailed(v.code, plan.scrub(v.message), v.retryable, bytes > 0))
    }
    const finish = () => {
      if (settled) return
      if (bytes === 0)
        return fail({ code: "ENGINE_FAILURE", message: "the speech API ended without audio", retryable: false })
      stop()
      resolve({ audio: Buffer.concat(chunks, bytes), openedAt, firstAudioAt })
    }
    /** The next limit: `ms` from now, failing with `what`. */
    const expect = (ms: number, what: string) => {
      clearTimeout(phase)
      phase = setTimeout(
        () => fail({ code: "ENGINE_FAILURE", message: `${what} within ${ms} ms`, retryable: true }),
        ms,
      )
    }
    const budget = setTimeout(
      () =>
        fail({
          code: "ENGINE_FAILURE",
          message: `no whole sentence within ${plan.timeouts.totalMs} ms`,
          retryable: false,
        }),
      plan.budgetMs,
    )

    const hear = (data: unknown) => {
      if (typeof data !== "string")
        return fail({ code: "ENGINE_FAILURE", message: "the speech API sent a binary message", retryable: false })
      const m = parseJsonObject(data)
      if (m === undefined)
        return fail({
          code: "ENGINE_FAILURE",
          message: "the speech API sent a message that is not JSON",
          retryable: false,
        })
      if (typeof m.error === "string" || (typeof m.message === "string" && typeof m.audio !== "string")) {
        const words = [m.error, m.message].filter((w) => typeof w === "string").join(": ")
        const detail = words.replace(/\s+/g, " ").slice(0, DETAIL_CHARS)
        return fail(
          verdictOf(detail, { code: "ENGINE_FAILURE", message: `the speech API failed: ${detail}`, retryable: false }),
        )
      }
      if (typeof m.audio === "string" && m.audio !== "") {
        if (!BASE64.test(m.audio))
          return fail({
            code: "ENGINE_FAILURE",
            message: "the speech API sent audio that is not base64",
            retryable: false,
          })
        const chunk = Buffer.from(m.audio, "base64")
        bytes += chunk.length
        if (bytes > MAX_SENTENCE_AUDIO_BYTES)
          return fail({
            code: "ENGINE_FAILURE",
            message: "the speech API sent more than 60 s of audio",
            retryable: false,
          })
        if (chunks.length === 0) firstAudioAt = performance.now()
        chunks.push(chunk)
        expect(plan.timeouts.idleMs, "no more audio")
      }
      if (m.isFinal === true) finish()
    }

    try {
      const dispatcher = tapStatus(plan.base, (s) => (status = s))
      ws = new WebSocket(plan.url, { headers: { "xi-api-key": plan.apiKey }, dispatcher })
    } catch (e) {
      clearTimeout(budget)
      const what = e instanceof Error ? e.message : String(e)
      return reject(
        new AttemptFailed("ENGINE_FAILURE", plan.scrub(`the stream's URL is unusable: ${what}`), false, false),
      )
    }
    expect(plan.timeouts.connectMs, "no connection")
    ws.addEventListener("open", () => {
      if (settled) return
      openedAt = performance.now()
      for (const m of plan.messages) ws.send(m)
      expect(plan.timeouts.firstAudioMs, "no audio")
    })
    ws.addEventListener("message", (e) => {
      if (!settled) hear(e.data)
    })
    // A refused upgrade is an error event alone (undici fires no close event for it); once open, the
    // close event that follows says more.
    ws.addEventListener("error", (e) => {
      if (!settled && openedAt === 0) fail(refusedUpgrade(status))
      // The client's own reason to fail the stream (a message over MAX_MESSAGE_BYTES, a bad frame).
      failedWith = (e as { message?: unknown }).message
    })
    ws.addEventListener("close", (e) => {
      if (settled) return
      if (openedAt === 0) return fail(refusedUpgrade(status))
      const reason = e.reason.replace(/\s+/g, " ").slice(0, DETAIL_CHARS)
      if (e.code === 1000 && bytes > 0) return finish()
      if (e.code === 1000)
        return fail({
          code: "ENGINE_FAILURE",
          message: "the speech API closed the stream without audio",
          retryable: false,
        })
      const closed = `the speech API closed the stream (${e.code}${reason === "" ? "" : `: ${reason}`})`
      if (e.code === 1008) return fail(verdictOf(reason, { code: "ENGINE_FAILURE", message: closed, retryable: false }))
      const why = typeof failedWith === "string" && failedWith !== "" ? ` after ${failedWith}` : ""
      fail({ code: "ENGINE_FAILURE", message: `${closed}${why}`, retryable: true })
    })
  })
}

/** The stream's root for a base URL: ws(s)://host[:port], whichever of ws, wss, http, https it was given. */
function streamRoot(baseUrl: string): string {
  const url = new URL(baseUrl.replace(/^http(s?):/i, "ws$1:"))
  if (url.protocol !== "ws:" && url.protocol !== "wss:") throw new TypeError(`${url.protocol} is not a WebSocket URL`)
  return url.href.replace(/\/+$/, "")
}

/** The text as it is sent: control characters and runs of whitespace become one space. */
const speakable = (text: string): string =>
  text
    .replace(/\p{Cc}/gu, " ")
    .replace(/\s+/g, " ")
    .trim()

export function makeElevenLabsStreamingSynth(opts: ElevenLabsStreamOptions): StreamingSynthesizer {
  const root = streamRoot(opts.baseUrl ?? DEFAULT_BASE_URL)
  const model = opts.modelId ?? ELEVENLABS_STREAM_MODEL
  const timeouts: ElevenLabsStreamTimeouts = { ...ELEVENLABS_STREAM_TIMEOUTS, ...opts.timeouts }
  // The key must never reach an error message, even if the API echoes it back.
  const scrub = (s: string): string => (opts.apiKey === "" ? s : s.split(opts.apiKey).join("***"))

  const voiceIdFor = (voice: PhoneVoice): string => {
    if (voice.vendor_voice_id !== undefined && voice.vendor_voice_id !== "") return voice.vendor_voice_id
    const ofGender = opts.defaultVoices?.[voice.gender] ?? []
    if (ofGender.length > 0) return ofGender[Math.abs(Math.trunc(voice.variant ?? 0)) % ofGender.length]!
    if (opts.defaultVoiceId !== undefined) return opts.defaultVoiceId
    throw new SpeechSynthesisError("UNSUPPORTED_VOICE", `no vendor voice is configured for a ${voice.gender} voice`)
  }

  return {
    name: "elevenlabs",

    async speak(text: string, voice: PhoneVoice): Promise<PhoneSpeech> {
      const started = performance.now()
      if (text.length > MAX_SPEECH_TEXT_CHARS)
        throw new SpeechSynthesisError("TEXT_TOO_LONG", `text is ${text.length} characters`)
      const said = speakable(text)
      if (said === "") throw new SpeechSynthesisError("EMPTY_TEXT", "text has nothing to speak")
      const voiceId = voiceIdFor(voice)
      const query = new URLSearchParams({ model_id: model, output_format: "ulaw_8000", auto_mode: "true" })
      const url = `${root}/v1/text-to-speech/${encodeURIComponent(voiceId)}/stream-input?${query}`
      const speed = Math.min(MAX_SPEED, Math.max(MIN_SPEED, Number.isFinite(voice.speed) ? voice.speed : 1))
      const messages = [
        // The opening message is a single space (the vendor's rule), with the voice's settings.
        JSON.stringify({ text: " ", voice_settings: { stability: 0.5, similarity_boost: 0.75, speed } }),
        // The whole sentence at once, flushed: its audio need not wait for more text. Text ends in a space.
        JSON.stringify({ text: `${said} `, flush: true }),
        END_OF_INPUT,
      ]
      const base = opts.outbound?.dispatcher ?? getGlobalDispatcher()
      for (let attempt = 1; ; attempt++) {
        const attemptStarted = performance.now()
        let heard: Heard
        try {
          heard = await streamOnce({
            url,
            apiKey: opts.apiKey,
            base,
            messages,
            timeouts,
            budgetMs: Math.max(1, timeouts.totalMs - (attemptStarted - started)),
            scrub,
          })
        } catch (e) {
          if (!(e instanceof AttemptFailed)) throw e
          const left = timeouts.totalMs - (performance.now() - started)
          // One quick retry, and only before any audio: after it, the caller would hear the start twice.
          const retrying = attempt === 1 && e.retryable && !e.heardAudio && left > 0
          opts.onFailure?.({ code: e.code, message: e.message, attempt, retrying })
          if (!retrying) throw new SpeechSynthesisError(e.code, e.message)
          continue
        }
        const frames = toFrames(heard.audio)
        const firstAudioMs = heard.firstAudioAt - started
        opts.onSpoken?.({
          voice: voiceId,
          attempts: attempt,
          connectMs: heard.openedAt - attemptStarted,
          firstAudioMs,
          totalMs: performance.now() - started,
          frames: frames.length,
        })
        return { frames, durationMs: frames.length * 20, firstAudioMs, voice: voiceId }
      }
    },
  }
}
