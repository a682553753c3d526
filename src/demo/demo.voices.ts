// POST /demo/clone-voice and /demo/voice-preview: an anonymous visitor clones a voice from a
// recording (ephemeral: swept DEMO_CLONE_TTL_MINUTES later; DEMO_CLONES_PER_IP_DAY per address)
// and hears it speak. A demo voice's public id is a random token, so no visitor can reach another's
// voice by counting, and a workspace's voice (a numeric id) is never one.
import { randomBytes } from "node:crypto"
import { Effect } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import { Clock } from "../platform/Clock.js"
import { Db } from "../platform/Db.js"
import { type DomainError, NotFound, ValidationFailed } from "../platform/errors.js"
import type { Speech } from "../providers/Speech.js"
import { type AvatarRow, findAvatar } from "../voices/avatars.repo.js"
import { cloneVoice, type SampleUpload, type UploadRunner } from "../voices/avatars.service.js"
import { addressBucket, previewAudio, previewOpening } from "../voices/previews.service.js"
import { tokenHash } from "./demo.feed.js"
import { findDemoVoice, insertDemoVoice } from "./demo.repo.js"
import { spendDayBudget } from "./demo.service.js"

/** What a fresh clone says when the visitor gives no text of their own. */
export const DEMO_SCRIPT =
  "Hi! This is my voice, cloned by Parley a moment ago. I can call your customers, answer their questions " +
  "and book the next step, sounding just like this."

/** A demo voice id: "dv_" and 256 random bits in base64url. */
export const DEMO_VOICE_ID = /^dv_[A-Za-z0-9_-]{43}$/

/** Who speaks a cloned voice's language: the demo speaks US English, in the clone's gender. */
const PREVIEW_PERSONA = { female: "anya", male: "kai" } as const

export interface DemoVoice {
  readonly voice_id: string
  readonly script: string
  readonly expires_at: string
}

/**
 * Clones an uploaded `sample` (`name` optional) for nobody: 429 past the address's day cap (counted
 * before the upload is read), 422/413 as for a workspace's clone, then the voice and its token.
 */
export const cloneDemoVoice = (
  upload: SampleUpload,
  run: UploadRunner,
  ip: string,
): Effect.Effect<DemoVoice, DomainError, Db | Clock | AppConfig | Speech> =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const clock = yield* Clock
    const cap = config.demo.clonesPerIpDay
    yield* spendDayBudget(
      `demo:clone:ip:${addressBucket(ip)}`,
      cap,
      `at most ${cap} demo voice clones a day from one address; try again later`,
    )
    const expiresAt = new Date(clock.nowMs() + config.demo.cloneTtlMinutes * 60_000)
    const voice = yield* cloneVoice({ kind: "demo", expiresAt }, upload, run, { defaultName: "Demo voice" })
    const token = `dv_${randomBytes(32).toString("base64url")}`
    const { sql } = yield* Db
    yield* Effect.promise(() => insertDemoVoice(sql, tokenHash(token), voice.id))
    return { voice_id: token, script: DEMO_SCRIPT, expires_at: expiresAt.toISOString() }
  })

/** The live demo voice a public id names; NotFound for anything else (a workspace's id included). */
const demoAvatar = (voiceId: string): Effect.Effect<AvatarRow, NotFound, Db | Clock> =>
  Effect.gen(function* () {
    const missing = new NotFound({ message: "no demo voice with this id (unknown or expired)" })
    if (!DEMO_VOICE_ID.test(voiceId)) return yield* Effect.fail(missing)
    const { sql } = yield* Db
    const clock = yield* Clock
    const avatarId = yield* Effect.promise(() => findDemoVoice(sql, tokenHash(voiceId)))
    const avatar = avatarId === undefined ? undefined : yield* Effect.promise(() => findAvatar(sql, null, avatarId))
    if (avatar === undefined || avatar.expires_at === null || avatar.expires_at.getTime() <= clock.nowMs())
      return yield* Effect.fail(missing)
    return avatar
  })

/**
 * `text` (default: the clone's script; at most DEMO_PREVIEW_TEXT_MAX_CHARS, else 422) spoken in a
 * demo voice, as MP3: synthesised once and stored like any preview clip, within the address's
 * anonymous preview budget (PREVIEWS_ANON_PER_IP_HOUR).
 */
export const demoVoicePreview = (input: { voiceId: string; text: string | undefined; ip: string }) =>
  Effect.gen(function* () {
    const avatar = yield* demoAvatar(input.voiceId)
    const config = yield* AppConfig
    const text = input.text ?? DEMO_SCRIPT
    const max = config.demo.previewTextMaxChars
    if (text.length > max)
      return yield* Effect.fail(
        new ValidationFailed({
          message: `invalid request body: text: must be at most ${max} characters`,
          errors: [{ field: "text", message: `must be at most ${max} characters` }],
        }),
      )
    const clip = yield* previewOpening({
      text,
      persona: PREVIEW_PERSONA[avatar.params.gender],
      avatar,
      caller: { kind: "anonymous", ip: input.ip },
    })
    return yield* previewAudio(clip.clip_id)
  })
