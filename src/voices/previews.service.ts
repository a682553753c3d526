// Opening-line previews: a persona speaks a campaign's first line before the campaign exists, or a
// workflow's own voice (its cloned voice when one is assigned) speaks it. Each clip is synthesised
// once, stored by content hash in Postgres, and served by any api process.
import { createHash } from "node:crypto"
import { isIP } from "node:net"
import { Effect } from "effect"
import { ownerEmailVerified } from "../auth/auth.repo.js"
import { ownerNotVerified } from "../auth/verified-owner.js"
import { AppConfig } from "../platform/AppConfig.js"
import { Clock } from "../platform/Clock.js"
import { Db, query } from "../platform/Db.js"
import { type Conflict, GatewayUnavailable, NotFound, RateLimited, ValidationFailed } from "../platform/errors.js"
import { HOUR_MS, hit } from "../platform/rate-counters.repo.js"
import { Speech } from "../providers/Speech.js"
import {
  clonedSpeechVoice,
  type SpeechPriority,
  type SpeechProvider,
  SpeechSynthesisError,
  type SpeechVoice,
  type SynthesizedAudio,
} from "../providers/speech/speech.interface.js"
import { type AvatarRow, workflowVoice } from "./avatars.repo.js"
import { findClip, findClipMeta, insertClip, touchClip } from "./previews.repo.js"
import { findVoice, type Voice } from "./voices.catalog.js"

/** An opening line is a sentence or two; this also bounds a clip at about 30 s (~180 KB). */
export const MAX_PREVIEW_TEXT_CHARS = 500

/**
 * Previews one workspace may ask for in an hour, whoever in it asks: generous for people trying
 * lines, but a leaked or scripted key cannot fill the clip store (the sweeper's caps do the rest).
 */
export const WORKSPACE_PREVIEWS_PER_HOUR = 600

/**
 * Who asks for a preview. The endpoint is public; a caller presenting a valid session or API key
 * is its workspace (own budget, normal synthesis priority), anyone else is their client address.
 * A workspace whose owner has not verified their email shares its address's anonymous budget.
 */
export type PreviewCaller =
  | { readonly kind: "anonymous"; readonly ip: string }
  | { readonly kind: "workspace"; readonly tenantId: number; readonly ip: string }

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

export interface PreviewResult extends PreviewClip {
  /** The cloned voice that spoke it; null for the persona's own voice. */
  readonly voice_id: number | null
}

export interface PreviewAudio extends PreviewClip {
  readonly audio: Uint8Array
}

const sha256 = (data: string): Buffer => createHash("sha256").update(data, "utf8").digest()

/*
 * The id covers everything the audio depends on: the provider, who speaks (a persona, or a cloned
 * voice as "voice:<id>") and the voice settings it renders with (so a retuned persona gets new
 * clips rather than stale ones), and the text.
 */
function clipId(provider: string, speaker: string, speech: SpeechVoice, text: string): string {
  return sha256(JSON.stringify(["preview-opening/1", provider, speaker, speech, text]))
    .subarray(0, 16)
    .toString("hex")
}

// Concurrent requests for the same clip in this process share one synthesis; per provider, since
// tests run several servers (each with its own provider) in one process.
const inFlight = new WeakMap<SpeechProvider, Map<string, Promise<SynthesizedAudio>>>()

function synthesizeOnce(
  speech: SpeechProvider,
  id: string,
  voice: SpeechVoice,
  text: string,
  priority: SpeechPriority,
): Promise<SynthesizedAudio> {
  let pending = inFlight.get(speech)
  if (pending === undefined) inFlight.set(speech, (pending = new Map()))
  const existing = pending.get(id)
  if (existing !== undefined) return existing
  const clip = speech.synthesize({ text, voice, priority })
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
      return new RateLimited({
        message: "speech synthesis is busy; retry shortly",
        retryAfterSeconds: BUSY_RETRY_AFTER_SECONDS,
      })
    case "EMPTY_TEXT":
    case "TEXT_TOO_LONG":
      return new ValidationFailed({
        message: `invalid request body: text: ${err.message}`,
        errors: [{ field: "text", message: err.message }],
      })
    case "UNSUPPORTED_VOICE":
    case "ENGINE_FAILURE":
    case "BAD_SAMPLE":
      return new GatewayUnavailable({ message: `speech synthesis failed: ${err.message}` })
  }
}

/**
 * The address an anonymous budget is kept under: an IPv4 address itself, an IPv6 address by its
 * /64 (one subscriber's network hands out any number of addresses within it).
 */
export function addressBucket(ip: string): string {
  if (isIP(ip) !== 6) return ip
  const [head = "", tail = ""] = ip.toLowerCase().split("::")
  const left = head === "" ? [] : head.split(":")
  const right = ip.includes("::") ? (tail === "" ? [] : tail.split(":")) : []
  const groups = ip.includes("::")
    ? [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill("0"), ...right]
    : left
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ""))
    .join(":")}::/64`
}

/**
 * Counts this request against the caller's hourly budget; RateLimited once it is spent. Synthesis
 * runs on Parley's speech account, so previews beyond an address's anonymous budget need a
 * verified owner: an unverified workspace spends that budget and is then refused as for any spend
 * (requireVerifiedOwner's 409), since verifying is what lifts it.
 */
const spendBudget = (caller: PreviewCaller): Effect.Effect<void, RateLimited | Conflict, Db | AppConfig | Clock> =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const clock = yield* Clock
    const verified = caller.kind === "workspace" && (yield* query((sql) => ownerEmailVerified(sql, caller.tenantId)))
    const [key, limit] = verified
      ? [`preview:tenant:${caller.tenantId}`, WORKSPACE_PREVIEWS_PER_HOUR]
      : [`preview:ip:${addressBucket(caller.ip)}`, config.previewsAnonPerIpHour]
    const verdict = yield* query((sql) => hit(sql, key, { limit, windowMs: HOUR_MS }, clock.now()))
    if (verdict.allowed) return
    if (caller.kind === "workspace" && !verified)
      return yield* Effect.fail(ownerNotVerified(`making more than ${limit} previews an hour from one address`))
    return yield* Effect.fail(
      new RateLimited({
        message:
          caller.kind === "anonymous"
            ? `at most ${limit} previews an hour from one address without signing in; sign in (a verified account) ` +
              "for more, or retry later"
            : `this workspace has made ${limit} previews this hour; retry later`,
        retryAfterSeconds: verdict.retryAfterSeconds,
      }),
    )
  })

const unknownPersona = (message: string) =>
  new ValidationFailed({
    message: `invalid request body: persona: ${message}`,
    errors: [{ field: "persona", message }],
  })

/**
 * Who speaks: the persona asked for, or with a workflow (the caller's own: NotFound otherwise, and
 * for anonymous callers) its cloned voice when one is assigned, in the language of the persona
 * asked for or else the workflow's. A cloned voice given as `avatar` (the public demo's, which the
 * caller has already found) speaks in the persona's language.
 */
const speakerOf = (input: {
  persona?: string | undefined
  workflowId?: number | undefined
  avatar?: AvatarRow | undefined
  caller: PreviewCaller
}) =>
  Effect.gen(function* () {
    let personaId = input.persona
    let avatar: AvatarRow | null = input.avatar ?? null
    if (input.workflowId !== undefined) {
      const workflowId = input.workflowId
      const missing = new NotFound({ message: `workflow ${workflowId} not found` })
      if (input.caller.kind === "anonymous") return yield* Effect.fail(missing)
      const tenantId = input.caller.tenantId
      const { sql } = yield* Db
      const wf = yield* Effect.promise(() => workflowVoice(sql, tenantId, workflowId))
      if (wf === undefined) return yield* Effect.fail(missing)
      personaId ??= wf.persona
      avatar = wf.avatar
    }
    if (personaId === undefined) return yield* Effect.fail(unknownPersona("is required (or give workflow_id)"))
    const voice = findVoice(personaId)
    if (voice === undefined) return yield* Effect.fail(unknownPersona("unknown persona"))
    return avatar === null
      ? { persona: voice, avatar, key: voice.id, speech: voice.speech }
      : {
          persona: voice,
          avatar,
          key: `voice:${avatar.id}`,
          speech: clonedSpeechVoice(avatar.params, voice.language, avatar.provider_voice_id),
        }
  })

/**
 * `text` (already trimmed and validated by the route) spoken for `caller`, within its budget, by a
 * persona or a workflow's voice (speakerOf): the stored clip when one exists (marked used), else a
 * fresh synthesis at the caller's priority, stored before it is answered.
 */
export const previewOpening = (input: {
  text: string
  persona?: string | undefined
  workflowId?: number | undefined
  avatar?: AvatarRow | undefined
  caller: PreviewCaller
}): Effect.Effect<PreviewResult, SynthesisFailure | NotFound | Conflict, Db | Speech | AppConfig | Clock> =>
  Effect.gen(function* () {
    const speaker = yield* speakerOf(input)
    const voice: Voice = speaker.persona
    const voiceId = speaker.avatar?.id ?? null
    yield* spendBudget(input.caller)
    const anonymous = input.caller.kind === "anonymous"
    const speech = yield* Speech
    const id = clipId(speech.name, speaker.key, speaker.speech, input.text)
    const stored = yield* findClipMeta(id)
    if (stored !== undefined) {
      const clock = yield* Clock
      const stale = clock.nowMs() - stored.last_used_at.getTime() > TOUCH_AFTER_SECONDS * 1000
      if (stale || (stored.anonymous && !anonymous)) yield* touchClip(id, TOUCH_AFTER_SECONDS, !anonymous)
      return { clip_id: id, persona: voice.id, duration_ms: stored.duration_ms, voice_id: voiceId }
    }

    const priority: SpeechPriority = anonymous ? "low" : "normal"
    const clip = yield* Effect.tryPromise({
      try: () => synthesizeOnce(speech, id, speaker.speech, input.text, priority),
      catch: toDomainError,
    })
    yield* insertClip({
      id,
      provider: speech.name,
      persona: voice.id,
      text_sha256: sha256(input.text),
      audio: Buffer.from(clip.audio.buffer, clip.audio.byteOffset, clip.audio.byteLength),
      duration_ms: clip.duration_ms,
      anonymous,
      voice_avatar_id: voiceId,
    })
    return { clip_id: id, persona: voice.id, duration_ms: clip.duration_ms, voice_id: voiceId }
  })

/** A stored clip's audio; NotFound for an id never stored. */
export const previewAudio = (id: string): Effect.Effect<PreviewAudio, NotFound, Db | Clock> =>
  Effect.gen(function* () {
    const clip = CLIP_ID.test(id) ? yield* findClip(id) : undefined
    if (clip === undefined) return yield* Effect.fail(new NotFound({ message: `preview clip ${id} not found` }))
    const clock = yield* Clock
    if (clock.nowMs() - clip.last_used_at.getTime() > TOUCH_AFTER_SECONDS * 1000)
      yield* touchClip(id, TOUCH_AFTER_SECONDS)
    return { clip_id: clip.id, persona: clip.persona, duration_ms: clip.duration_ms, audio: clip.audio }
  })
