// The adapter for an ElevenLabs-style voice API: a sample uploaded (multipart) becomes a vendor
// voice id, and text is spoken by voice id as MP3; the key goes in the vendor's xi-api-key header.
import { parseBuffer } from "music-metadata"
import { FormData } from "undici"
import { type Attempt, ProviderCallError, withRetries } from "../http.util.js"
import { type Outbound, PLATFORM_DEFAULT, retryableStatus, vendorAttempt } from "../outbound.js"
import { deriveVoiceParams } from "./clone.analysis.js"
import {
  type ClonedVoice,
  MAX_SPEECH_TEXT_CHARS,
  type SpeechErrorCode,
  type SpeechProvider,
  type SpeechRequest,
  SpeechSynthesisError,
  type SynthesizedAudio,
  type VoiceSample,
} from "./speech.interface.js"

export interface ElevenLabsOptions {
  /** The API root, without the version: https://api.elevenlabs.io (paths are /v1/…). */
  readonly baseUrl: string
  readonly apiKey: string
  /** The synthesis model; default eleven_multilingual_v2. */
  readonly model?: string | undefined
  /** The vendor voice that speaks a voice naming none (the catalogue personas). */
  readonly defaultVoiceId?: string | undefined
  /** Speaks a voice naming no vendor voice when there is no default (the simulator); else UNSUPPORTED_VOICE. */
  readonly fallback?: SpeechProvider | undefined
  /** Limit for each attempt, the answer included; default 30 000 ms (cloning uploads minutes of audio). */
  readonly timeoutMs?: number | undefined
  /** Replaces undici's fetch (tests). */
  readonly fetch?: typeof fetch
  readonly outbound?: Outbound
}

export const ELEVENLABS_DEFAULT_MODEL = "eleven_multilingual_v2"
/** 22.05 kHz mono MP3, the simulator's shape; 32 kbps is plenty for a phone line. */
const OUTPUT_FORMAT = "mp3_22050_32"
const ERROR_DETAIL_CHARS = 200

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null

/** The API's error text: {detail: {message}} or {detail: "…"}, else the body itself. */
function errorDetail(text: string): string {
  let detail = text
  try {
    const body: unknown = JSON.parse(text)
    const d = isObject(body) ? body.detail : undefined
    if (typeof d === "string") detail = d
    else if (isObject(d) && typeof d.message === "string") detail = d.message
  } catch {
    // not JSON: the text as sent
  }
  return detail.replace(/\s+/g, " ").trim().slice(0, ERROR_DETAIL_CHARS)
}

/** A failed call to the API, with the speech error code it means when its status says one. */
class SpeechApiError extends ProviderCallError {
  constructor(
    message: string,
    retryable: boolean,
    readonly speechCode: SpeechErrorCode | undefined,
    options?: { cause?: unknown; status?: number },
  ) {
    super(message, retryable, options)
  }
}

/** A non-2xx answer: 404 is `notFound`'s code (an unknown voice), 429 BUSY; 429 and 5xx are retried. */
function failure(status: number, text: string, what: string, notFound: SpeechErrorCode): SpeechApiError {
  const detail = errorDetail(text)
  const message = `speech API answered ${status} to ${what}${detail === "" ? "" : `: ${detail}`}`
  const code = status === 404 ? notFound : status === 429 ? "BUSY" : undefined
  return new SpeechApiError(message, retryableStatus(status), code, { status })
}

const speechError = (e: unknown, fallback: SpeechErrorCode): SpeechSynthesisError => {
  if (e instanceof SpeechSynthesisError) return e
  const code = e instanceof SpeechApiError ? (e.speechCode ?? fallback) : fallback
  return new SpeechSynthesisError(code, e instanceof Error ? e.message : String(e))
}

export function makeElevenLabsSpeech(opts: ElevenLabsOptions): SpeechProvider {
  const base = `${opts.baseUrl.replace(/\/+$/, "")}/v1`
  const timeoutMs = opts.timeoutMs ?? 30_000
  const outbound = opts.outbound ?? PLATFORM_DEFAULT
  const model = opts.model ?? ELEVENLABS_DEFAULT_MODEL
  // The key must never reach an error message, even if the API echoes it back.
  const scrub = (s: string): string => s.split(opts.apiKey).join("***")

  /** One request; the answer's bytes on 2xx, else a ProviderCallError saying whether to retry. */
  const call = (
    method: "POST" | "DELETE",
    path: string,
    body: string | FormData | undefined,
    what: string,
    notFound: SpeechErrorCode,
  ): Promise<Attempt<{ bytes: Uint8Array; type: string }, SpeechApiError>> =>
    vendorAttempt({
      url: `${base}${path}`,
      init: {
        method,
        headers: {
          "xi-api-key": opts.apiKey,
          accept: path.startsWith("/text-to-speech/") ? "audio/mpeg" : "application/json",
          ...(typeof body === "string" && { "content-type": "application/json" }),
        },
        // undici's own FormData, which its fetch encodes as multipart/form-data.
        ...(body !== undefined && { body: body as unknown as RequestInit["body"] }),
      },
      timeoutMs,
      outbound,
      fetch: opts.fetch,
      unreachable: (f) =>
        new SpeechApiError(
          `speech API ${scrub(f.message)}`,
          f.retryable,
          undefined,
          f.status === undefined ? {} : { status: f.status },
        ),
      answered: ({ bytes, headers }) => ({ ok: true, value: { bytes, type: headers.get("content-type") ?? "" } }),
      refused: ({ status, text }) => failure(status, scrub(text), what, notFound),
    })

  const once = async <T>(attempt: Promise<Attempt<T, SpeechApiError>>): Promise<T> => {
    const result = await attempt
    if (result.ok) return result.value
    throw result.error
  }

  return {
    name: "elevenlabs",

    async synthesize(req: SpeechRequest): Promise<SynthesizedAudio> {
      if (req.text.length > MAX_SPEECH_TEXT_CHARS)
        throw new SpeechSynthesisError("TEXT_TOO_LONG", `text is ${req.text.length} characters`)
      const text = req.text.replace(/\s+/g, " ").trim()
      if (text === "") throw new SpeechSynthesisError("EMPTY_TEXT", "text has nothing to speak")
      const voiceId = req.voice.vendor_voice_id ?? opts.defaultVoiceId
      if (voiceId === undefined) {
        if (opts.fallback !== undefined) return opts.fallback.synthesize(req)
        throw new SpeechSynthesisError("UNSUPPORTED_VOICE", "the voice names no vendor voice and none is configured")
      }
      const body = JSON.stringify({
        text,
        model_id: model,
        // The vendor's speed runs 0.7–1.2; SpeechVoice's 0.5–2 is clamped into it.
        voice_settings: {
          stability: 0.5,
          similarity_boost: 0.75,
          speed: Math.min(1.2, Math.max(0.7, req.voice.speed)),
        },
      })
      const path = `/text-to-speech/${encodeURIComponent(voiceId)}?output_format=${OUTPUT_FORMAT}`
      let answer: { bytes: Uint8Array; type: string }
      try {
        answer = await withRetries(
          () => call("POST", path, body, "a synthesis", "UNSUPPORTED_VOICE"),
          (message, cause) =>
            new SpeechApiError(message, true, cause.speechCode, {
              cause,
              ...(cause.status !== undefined && { status: cause.status }),
            }),
        )
      } catch (e) {
        throw speechError(e, "ENGINE_FAILURE")
      }
      if (answer.bytes.length === 0) throw new SpeechSynthesisError("ENGINE_FAILURE", "speech API answered no audio")
      let info: { duration?: number | undefined; sampleRate?: number | undefined }
      try {
        info = (await parseBuffer(answer.bytes, { mimeType: "audio/mpeg" }, { duration: true })).format
      } catch (e) {
        throw new SpeechSynthesisError("ENGINE_FAILURE", "speech API answered something that is not MP3", { cause: e })
      }
      return {
        audio: answer.bytes,
        mime: "audio/mpeg",
        duration_ms: Math.round((info.duration ?? 0) * 1000),
        sample_rate: info.sampleRate ?? 22_050,
      }
    },

    // One attempt: a retried upload could leave two voices at the vendor.
    async cloneVoice(sample: VoiceSample): Promise<ClonedVoice> {
      const form = new FormData()
      form.set("name", sample.name)
      form.set("description", "Cloned in Parley")
      form.set("files", new Blob([sample.audio], { type: sample.mime }), `sample.${sample.format}`)
      let answer: { bytes: Uint8Array }
      try {
        answer = await once(call("POST", "/voices/add", form, "a voice upload", "ENGINE_FAILURE"))
      } catch (e) {
        const status = e instanceof ProviderCallError ? e.status : undefined
        // 400 and 422: the vendor refused this sample; anything else is the vendor's trouble.
        throw speechError(e, status === 400 || status === 422 ? "BAD_SAMPLE" : "ENGINE_FAILURE")
      }
      let id: unknown
      try {
        id = (JSON.parse(new TextDecoder().decode(answer.bytes)) as { voice_id?: unknown }).voice_id
      } catch {
        id = undefined
      }
      if (typeof id !== "string" || id === "")
        throw new SpeechSynthesisError("ENGINE_FAILURE", "speech API answered a voice upload without a voice_id")
      return { vendor_voice_id: id, params: deriveVoiceParams(sample) }
    },

    async deleteVoice(vendorVoiceId: string): Promise<void> {
      const result = await call(
        "DELETE",
        `/voices/${encodeURIComponent(vendorVoiceId)}`,
        undefined,
        "a voice deletion",
        "ENGINE_FAILURE",
      )
      if (!result.ok && result.error.status !== 404) throw speechError(result.error, "ENGINE_FAILURE")
    },

    close: async () => {
      await opts.fallback?.close?.()
    },
  }
}
