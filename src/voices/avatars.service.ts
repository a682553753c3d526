// Cloned voices: a sample received (streamed to disk and hashed), checked (its format from its bytes
// by file-type, its duration by music-metadata), kept by content hash and cloned by the speech
// provider; listed, deleted and assigned to workflows per workspace, or minted for the public demo.
import { createHash, randomUUID } from "node:crypto"
import { createWriteStream } from "node:fs"
import { mkdir, readFile, rename, rm, stat } from "node:fs/promises"
import { join, resolve } from "node:path"
import { type Readable, Transform } from "node:stream"
import { pipeline } from "node:stream/promises"
import { Effect } from "effect"
import { fileTypeFromFile } from "file-type"
import { parseFile } from "music-metadata"
import { requireVerifiedOwner } from "../auth/verified-owner.js"
import { AppConfig } from "../platform/AppConfig.js"
import { Db } from "../platform/Db.js"
import {
  Conflict,
  type DomainError,
  GatewayUnavailable,
  NotFound,
  RateLimited,
  ValidationFailed,
} from "../platform/errors.js"
import { Log } from "../platform/Log.js"
import { iso } from "../platform/time.js"
import { Speech } from "../providers/Speech.js"
import {
  type ClonedVoiceParams,
  type SampleFormat,
  SpeechSynthesisError,
} from "../providers/speech/speech.interface.js"
import * as repo from "./avatars.repo.js"
import { deleteVoiceClips } from "./previews.repo.js"
import { VOICES } from "./voices.catalog.js"
import { WorkflowVoices } from "./WorkflowVoices.js"

export const SAMPLE_MIN_MS = 5_000
export const SAMPLE_MAX_MS = 5 * 60_000
export const NAME_MAX = 100
/** Under DATA_DIR: the samples, each named <sha256>.<format>. */
export const SAMPLE_DIR = "voice-samples"
/** A cloned voice's pitch stays at least this far from every catalogue persona's of its gender. */
const MIN_PITCH_GAP = 0.1
const BUSY_RETRY_AFTER_SECONDS = 2

/** Who a clone belongs to: a workspace, or the public demo (no account; the row expires). */
export type VoiceOwner =
  | { readonly kind: "workspace"; readonly tenantId: number }
  | { readonly kind: "demo"; readonly expiresAt: Date }

/**
 * A streamed multipart form with a `sample` file and a `name` field (api/upload.ts's Upload: the
 * route's declared form refuses a file in any other field before it gets here).
 */
export interface SampleUpload {
  file(): Promise<{ readonly stream: Readable } | undefined>
  /** Call once the file has been read to its end. */
  fields(): Promise<Readonly<Record<string, string>>>
}

/** Runs work that reads an upload, turning the upload's own failures into answers (api/upload.ts). */
export type UploadRunner = <A>(work: () => Promise<A>) => Effect.Effect<A, DomainError>

/** What file-type names → the format we keep it as; anything else is refused. */
const FORMATS: Readonly<Record<string, SampleFormat>> = {
  wav: "wav",
  mp3: "mp3",
  ogg: "ogg",
  oga: "ogg",
  opus: "ogg",
  spx: "ogg",
  webm: "webm",
}

export const avatarView = (r: repo.AvatarRow & { workflow_ids?: number[] }) => ({
  id: r.id,
  name: r.name,
  provider: r.provider,
  provider_voice_id: r.provider_voice_id,
  format: r.format,
  duration_ms: r.duration_ms,
  sample_sha256: r.sample_sha256.toString("hex"),
  sample_bytes: r.sample_bytes,
  params: r.params,
  ...(r.workflow_ids !== undefined && { workflow_ids: r.workflow_ids }),
  ...(r.expires_at !== null && { expires_at: iso(r.expires_at) }),
  created_at: iso(r.created_at),
})
export type AvatarView = ReturnType<typeof avatarView>

const invalid = (field: "sample" | "name", message: string) =>
  new ValidationFailed({ message: `${field}: ${message}`, errors: [{ field, message }] })

/**
 * Moves a measured voice's pitch away from the catalogue personas of its gender, so a clone never
 * renders exactly like one of them on a provider that speaks by parameters (the simulator).
 */
export function distinctFromCatalogue(params: ClonedVoiceParams): ClonedVoiceParams {
  const taken = VOICES.filter((v) => v.speech.gender === params.gender).map((v) => v.speech.pitch)
  const clear = (p: number) => taken.every((t) => Math.abs(t - p) >= MIN_PITCH_GAP - 1e-9)
  if (clear(params.pitch)) return params
  for (let step = 1; step <= 40; step++) {
    for (const sign of [1, -1]) {
      const pitch = Math.round((params.pitch + sign * step * 0.05) * 100) / 100
      if (pitch >= -1 && pitch <= 1 && clear(pitch)) return { ...params, pitch }
    }
  }
  return params
}

interface Received {
  readonly tmp: string
  readonly sha256: Buffer
  readonly bytes: number
}

/** Streams the form's file to `tmp`, hashing it on the way; then the form's fields. */
async function receive(
  upload: SampleUpload,
  tmp: string,
): Promise<{ file: Received | undefined; fields: Readonly<Record<string, string>> }> {
  const part = await upload.file()
  if (part === undefined) return { file: undefined, fields: await upload.fields() }
  const hash = createHash("sha256")
  let bytes = 0
  const tap = new Transform({
    transform(chunk: Buffer, _enc, done) {
      hash.update(chunk)
      bytes += chunk.length
      done(null, chunk)
    },
  })
  try {
    await pipeline(part.stream, tap, createWriteStream(tmp, { flags: "wx" }))
    const fields = await upload.fields()
    return { file: { tmp, sha256: hash.digest(), bytes }, fields }
  } catch (e) {
    await rm(tmp, { force: true })
    throw e
  }
}

/** The sample's format and duration, or why it is refused (422 on `sample`). */
async function inspect(path: string): Promise<{ format: SampleFormat; mime: string; meta: SampleMeta } | string> {
  const type = await fileTypeFromFile(path)
  const format = type === undefined ? undefined : FORMATS[type.ext]
  if (type === undefined || format === undefined) {
    const seen = type === undefined ? "no known file type" : `${type.mime}`
    return `is not a WAV, MP3, OGG or WebM recording (its bytes show ${seen})`
  }
  let meta: SampleMeta
  try {
    const { format: f } = await parseFile(path, { duration: true, skipCovers: true })
    meta = { duration: f.duration, sampleRate: f.sampleRate, bitrate: f.bitrate }
  } catch (e) {
    return `could not be read as ${format.toUpperCase()}: ${e instanceof Error ? e.message : String(e)}`
  }
  const seconds = meta.duration
  if (seconds === undefined || !Number.isFinite(seconds) || seconds <= 0)
    return `has no readable duration (a ${format.toUpperCase()} file that does not say how long it is)`
  const ms = Math.round(seconds * 1000)
  if (ms < SAMPLE_MIN_MS || ms > SAMPLE_MAX_MS)
    return `is ${(ms / 1000).toFixed(1)} s long; a sample must be 5 s to 5 min of speech`
  return { format, mime: type.mime, meta }
}

interface SampleMeta {
  readonly duration: number | undefined
  readonly sampleRate: number | undefined
  readonly bitrate: number | undefined
}

const cloneFailure = (err: unknown): Effect.Effect<never, ValidationFailed | RateLimited | GatewayUnavailable> => {
  if (!(err instanceof SpeechSynthesisError)) return Effect.die(err)
  switch (err.code) {
    case "BAD_SAMPLE":
      return Effect.fail(invalid("sample", `was refused by the speech provider: ${err.message}`))
    case "BUSY":
      return Effect.fail(
        new RateLimited({
          message: "voice cloning is busy; retry shortly",
          retryAfterSeconds: BUSY_RETRY_AFTER_SECONDS,
        }),
      )
    default:
      return Effect.fail(new GatewayUnavailable({ message: `voice cloning failed: ${err.message}` }))
  }
}

/**
 * Clones a voice from an uploaded form (`name`, `sample`) for `owner`: 422 on `sample` for a file
 * that is not WAV/MP3/OGG/WebM by its bytes or not 5 s to 5 min long, 413 (from `run`) past the
 * upload limit, 409 WORKFLOW_NOT_READY (missing email_verified) for a workspace whose owner has not
 * verified their email. `defaultName` stands in for a missing name (the demo asks for none).
 */
export const cloneVoice = (
  owner: VoiceOwner,
  upload: SampleUpload,
  run: UploadRunner,
  opts: { readonly defaultName?: string } = {},
): Effect.Effect<AvatarView, DomainError, Db | Speech | AppConfig> =>
  Effect.gen(function* () {
    // Cloning runs on Parley's speech account: a workspace's needs its owner's verified email (the
    // anonymous demo's are capped per address and expire). Refused before the upload is read.
    if (owner.kind === "workspace") yield* requireVerifiedOwner(owner.tenantId, "cloning a voice")
    const config = yield* AppConfig
    const dir = resolve(config.dataDir, SAMPLE_DIR)
    yield* Effect.promise(() => mkdir(dir, { recursive: true }))
    const tmp = join(dir, `.incoming-${randomUUID()}`)
    const { file, fields } = yield* run(() => receive(upload, tmp))
    const checked = yield* Effect.promise(() => checkReceived(file, fields, opts.defaultName))
    if (typeof checked === "string" || "field" in checked) {
      if (file !== undefined) yield* Effect.promise(() => rm(file.tmp, { force: true }))
      return yield* Effect.fail(
        typeof checked === "string" ? invalid("sample", checked) : invalid(checked.field, checked.message),
      )
    }
    const { name, format, mime, meta } = checked
    const received = file!
    const sha = received.sha256.toString("hex")
    const relative = `${SAMPLE_DIR}/${sha}.${format}`
    const path = resolve(config.dataDir, relative)
    // Same bytes, same name: a file already there is this one.
    yield* Effect.promise(async () => {
      const exists = await stat(path).then(
        () => true,
        () => false,
      )
      if (exists) await rm(received.tmp, { force: true })
      else await rename(received.tmp, path)
    })
    const audio = yield* Effect.promise(() => readFile(path))
    const speech = yield* Speech
    if (speech.cloneVoice === undefined)
      return yield* Effect.fail(new GatewayUnavailable({ message: `speech provider ${speech.name} cannot clone` }))
    const clone = speech.cloneVoice.bind(speech)
    const cloned = yield* Effect.tryPromise({
      try: () =>
        clone({
          name,
          audio,
          format,
          mime,
          duration_ms: Math.round(meta.duration! * 1000),
          sample_rate: meta.sampleRate,
          bitrate: meta.bitrate,
        }),
      catch: (e) => e,
    }).pipe(
      Effect.catchAll(cloneFailure),
      Effect.tapError(() => dropUnusedSample(received.sha256, path)),
    )
    const { sql } = yield* Db
    const row = yield* Effect.promise(() =>
      repo.insertAvatar(sql, {
        tenantId: owner.kind === "workspace" ? owner.tenantId : null,
        name,
        sampleSha256: received.sha256,
        samplePath: relative,
        sampleBytes: received.bytes,
        format,
        mime,
        durationMs: Math.round(meta.duration! * 1000),
        provider: speech.name,
        providerVoiceId: cloned.vendor_voice_id,
        // A vendor voice is the voice; without one the params are, and must not be a persona's.
        params: cloned.vendor_voice_id === null ? distinctFromCatalogue(cloned.params) : cloned.params,
        expiresAt: owner.kind === "demo" ? owner.expiresAt : null,
      }),
    )
    return avatarView(row)
  })

type Checked =
  | { name: string; format: SampleFormat; mime: string; meta: SampleMeta }
  | { field: "name"; message: string }
  | string

async function checkReceived(
  file: Received | undefined,
  fields: Readonly<Record<string, string>>,
  defaultName: string | undefined,
): Promise<Checked> {
  if (file === undefined) return "is required: a WAV, MP3, OGG or WebM file in form field sample"
  const name = (fields["name"] ?? "").trim() || defaultName
  if (name === undefined || name === "") return { field: "name", message: "is required" }
  if (name.length > NAME_MAX) return { field: "name", message: `must be at most ${NAME_MAX} characters` }
  if (file.bytes === 0) return "is empty"
  const inspected = await inspect(file.tmp)
  return typeof inspected === "string" ? inspected : { name, ...inspected }
}

/** Removes a sample file no live voice uses (a failed clone, a deleted voice). */
const dropUnusedSample = (sha256: Buffer, path: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    if (!(yield* Effect.promise(() => repo.sampleInUse(sql, sha256))))
      yield* Effect.promise(() => rm(path, { force: true }))
  })

export const listVoices = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const rows = yield* Effect.promise(() => repo.listAvatars(sql, tenantId))
    return { voices: rows.map(avatarView) }
  })

const voiceNotFound = (id: number) => new NotFound({ message: `voice ${id} not found` })

/**
 * Deletes a workspace's voice: 409 WORKFLOW_LIVE while a live workflow speaks with it; otherwise
 * the workflows it was assigned to go back to their persona's voice, its preview clips go, its
 * sample goes unless another voice has the same bytes, and the vendor forgets it (best effort).
 */
export const deleteVoice = (tenantId: number, id: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const workflows = yield* WorkflowVoices
    const outcome = yield* Effect.promise(() => repo.deleteAvatar(sql, tenantId, id, workflows))
    if (outcome.kind === "not_found") return yield* Effect.fail(voiceNotFound(id))
    if (outcome.kind === "live")
      return yield* Effect.fail(
        new Conflict({
          code: "WORKFLOW_LIVE",
          message: `voice ${id} is speaking for live workflow ${outcome.workflowIds.join(", ")}: pause it first`,
          details: { workflow_ids: outcome.workflowIds },
        }),
      )
    const { row } = outcome
    yield* deleteVoiceClips(id)
    if (!outcome.sampleInUse) {
      const config = yield* AppConfig
      yield* Effect.promise(() => rm(resolve(config.dataDir, row.sample_path), { force: true }))
    }
    yield* forgetAtVendor(row)
    return { id, deleted: true as const }
  })

const forgetAtVendor = (row: repo.AvatarRow) =>
  Effect.gen(function* () {
    const speech = yield* Speech
    const vendorId = row.provider_voice_id
    if (vendorId === null || row.provider !== speech.name || speech.deleteVoice === undefined) return
    const forget = speech.deleteVoice.bind(speech)
    const log = yield* Log
    yield* Effect.tryPromise(() => forget(vendorId)).pipe(
      Effect.catchAll((e) =>
        Effect.sync(() => log.warn({ err: e.error, voice: row.id }, "the speech provider did not forget a voice")),
      ),
    )
  })

/** Sets or (voiceId null) clears the workflow's cloned voice; 409 while the workflow is live or retired. */
export const assignVoice = (tenantId: number, workflowId: number, voiceId: number | null) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const workflows = yield* WorkflowVoices
    const outcome = yield* Effect.promise(() => repo.assignAvatar(sql, tenantId, workflowId, voiceId, workflows))
    switch (outcome.kind) {
      case "no_workflow":
        return yield* Effect.fail(new NotFound({ message: `workflow ${workflowId} not found` }))
      case "no_voice":
        return yield* Effect.fail(voiceNotFound(voiceId!))
      case "refused":
        return yield* Effect.fail(
          outcome.status === "live"
            ? new Conflict({
                code: "WORKFLOW_LIVE",
                message: `workflow ${workflowId} is live: pause it before you change its voice`,
              })
            : new Conflict({
                code: "WORKFLOW_RETIRED",
                message: `workflow ${workflowId} is retired and cannot change`,
              }),
        )
      case "assigned":
        return { workflow_id: workflowId, voice_id: voiceId }
    }
  })
