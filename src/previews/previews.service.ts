// Opening-line previews: a persona speaks a campaign's first line before the campaign exists.
// Each clip is synthesised once, stored by content hash in Postgres, and served by any api process.
import { createHash } from "node:crypto"
import { Effect } from "effect"
import { GatewayUnavailable, NotFound, RateLimited, ValidationFailed } from "../errors.js"
import { Speech } from "../providers/Speech.js"
import {
  SpeechSynthesisError,
  type SpeechProvider,
  type SynthesizedAudio,
} from "../providers/speech/speech.interface.js"
import { Clock } from "../services/Clock.js"
import type { Db } from "../services/Db.js"
import { findVoice, type Voice } from "../voices/voices.catalog.js"
import { findClip, findClipMeta, insertClip, touchClip } from "./previews.repo.js"

export const MAX_PREVIEW_TEXT_CHARS = 500

/** A clip id: the first 128 bits of the content hash, in hex. */
export const CLIP_ID = /^[0-9a-f]{32}$/

/** How stale last_used_at may get before a read refreshes it: one write per clip per hour at most. */
const TOUCH_AFTER_SECONDS = 3600

/** What a client waiting on a full synthesis queue should wait before trying again. */
const BUSY_RETRY_AFTER_SECONDS = 2

export interface PreviewClip {
  readonly clip_id: string
  readonly persona: string
  readonly duration_ms: number
}

export interface PreviewAudio extends PreviewClip {
  readonly audio: Uint8Array
}

const sha256 = (data: string): Buffer => createHash("sha256").update(data, "utf8").digest()

/*
 * The id covers everything the audio depends on: the provider, the persona and the voice settings
 * it renders with (so a retuned persona gets new clips rather than stale ones), and the text.
 */
function clipId(provider: string, voice: Voice, text: string): string {
  return sha256(JSON.stringify(["preview-opening/1", provider, voice.id, voice.speech, text])).subarray(0, 16).toString("hex")
}

// Concurrent requests for the same clip in this process share one synthesis; per provider, since
// tests run several servers (each with its own provider) in one process.
const inFlight = new WeakMap<SpeechProvider, Map<string, Promise<SynthesizedAudio>>>()

function synthesizeOnce(speech: SpeechProvider, id: string, voice: Voice, text: string): Promise<SynthesizedAudio> {
  let pending = inFlight.get(speech)
  if (pending === undefined) inFlight.set(speech, (pending = new Map()))
  const existing = pending.get(id)
  if (existing !== undefined) return existing
  const clip = speech.synthesize({ text, voice: voice.speech })
  pending.set(id, clip)
  const forget = () => {
    if (pending.get(id) === clip) pending.delete(id)
  }
  clip.then(forget, forget)
  return clip
}

type SynthesisFailure = ValidationFailed | RateLimited | GatewayUnavailable

function toDomainError(err: unknown): SynthesisFailure {
  if (!(err instanceof SpeechSynthesisError)) return new GatewayUnavailable({ message: "speech synthesis failed" })
  switch (err.code) {
    case "BUSY":
      return new RateLimited({ message: "speech synthesis is busy; retry shortly", retryAfterSeconds: BUSY_RETRY_AFTER_SECONDS })
    case "EMPTY_TEXT":
    case "TEXT_TOO_LONG":
      return new ValidationFailed({ message: `invalid request body: text: ${err.message}`, errors: [{ field: "text", message: err.message }] })
    case "UNSUPPORTED_VOICE":
    case "ENGINE_FAILURE":
      return new GatewayUnavailable({ message: `speech synthesis failed: ${err.message}` })
  }
}

/**
 * The persona speaking `text` (already trimmed and validated by the route): the stored clip when
 * one exists, else a fresh synthesis, stored before it is answered.
 */
export const previewOpening = (input: { text: string; persona: string }): Effect.Effect<PreviewClip, SynthesisFailure, Db | Speech> =>
  Effect.gen(function* () {
    const voice = findVoice(input.persona)
    if (voice === undefined) {
      return yield* Effect.fail(
        new ValidationFailed({ message: `invalid request body: persona: unknown persona`, errors: [{ field: "persona", message: "unknown persona" }] }),
      )
    }
    const speech = yield* Speech
    const id = clipId(speech.name, voice, input.text)
    const stored = yield* findClipMeta(id)
    if (stored !== undefined) return { clip_id: id, persona: voice.id, duration_ms: stored.duration_ms }

    const clip = yield* Effect.tryPromise({
      try: () => synthesizeOnce(speech, id, voice, input.text),
      catch: toDomainError,
    })
    yield* insertClip({
      id,
      provider: speech.name,
      persona: voice.id,
      text_sha256: sha256(input.text),
      audio: Buffer.from(clip.audio.buffer, clip.audio.byteOffset, clip.audio.byteLength),
      duration_ms: clip.duration_ms,
    })
    return { clip_id: id, persona: voice.id, duration_ms: clip.duration_ms }
  })

/** A stored clip's audio; NotFound for an id never stored. */
export const previewAudio = (id: string): Effect.Effect<PreviewAudio, NotFound, Db | Clock> =>
  Effect.gen(function* () {
    const clip = CLIP_ID.test(id) ? yield* findClip(id) : undefined
    if (clip === undefined) return yield* Effect.fail(new NotFound({ message: `preview clip ${id} not found` }))
    const clock = yield* Clock
    if (clock.nowMs() - clip.last_used_at.getTime() > TOUCH_AFTER_SECONDS * 1000) yield* touchClip(id, TOUCH_AFTER_SECONDS)
    return { clip_id: clip.id, persona: clip.persona, duration_ms: clip.duration_ms, audio: clip.audio }
  })
