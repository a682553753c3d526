// /api/voice-avatars: a workspace's cloned voices. POST …/clone (multipart, streamed: name + sample),
// GET (list), DELETE …/{voice_id} (admin), PUT …/assign (a workflow's voice, or null to clear it).
import { Effect } from "effect"
import { z } from "zod"
import {
  assignVoice,
  cloneVoice,
  deleteVoice,
  listVoices,
  NAME_MAX,
  SAMPLE_MAX_MS,
  SAMPLE_MIN_MS,
} from "../../src/voices/avatars.service.js"
import type { FilePart } from "../form.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"
import { readingUpload } from "../upload.js"

const BodyId = z.number({ error: "must be a positive integer" }).int("must be a positive integer").positive()

const Params = z.object({ voice_id: Id })

/** The recording a voice is cloned from (here and POST /demo/clone-voice). */
export const SAMPLE_PART: FilePart = {
  kind: "file",
  mediaTypes: ["audio/wav", "audio/mpeg", "audio/ogg", "audio/webm"],
  required: true,
  description:
    `The recording: WAV, MP3, OGG or WebM, detected from its bytes (not its name or type), ` +
    `${SAMPLE_MIN_MS / 1000} s to ${SAMPLE_MAX_MS / 60_000} min long`,
}

const Voice = z.object({
  id: z.number().int(),
  name: z.string(),
  provider: z.string(),
  provider_voice_id: z.string().nullable(),
  format: z.enum(["wav", "mp3", "ogg", "webm"]),
  duration_ms: z.number().int(),
  sample_sha256: z.string(),
  sample_bytes: z.number().int(),
  params: z.object({
    gender: z.enum(["female", "male"]),
    pitch: z.number(),
    speed: z.number(),
    variant: z.number().int(),
    method: z.enum(["pcm", "metadata"]),
    pitch_hz: z.number().nullable(),
    syllables_per_second: z.number().nullable(),
    energy_dbfs: z.number().nullable(),
  }),
  workflow_ids: z.array(z.number().int()).optional(),
  created_at: z.string(),
})

export const voiceAvatarsClone = route({
  method: "POST",
  path: "/api/voice-avatars/clone",
  auth: "jwt",
  summary:
    `Clone a voice from a recording: multipart form with name (1–${NAME_MAX} characters) and sample (a WAV, MP3, ` +
    `OGG or WebM file, detected from its bytes, ${SAMPLE_MIN_MS / 1000} s to ${SAMPLE_MAX_MS / 60_000} min long)`,
  tags: ["voices"],
  body: {
    multipart: "stream",
    form: {
      name: { kind: "text", required: true, maxLength: NAME_MAX, description: "The voice's name" },
      sample: SAMPLE_PART,
    },
  },
  responses: {
    201: { description: "The new voice", schema: Voice },
    413: { description: "PAYLOAD_TOO_LARGE: the form passed UPLOAD_LIMIT_BYTES (refused as soon as it does)" },
    422: {
      description:
        "VALIDATION_FAILED on sample (missing, not WAV/MP3/OGG/WebM by its bytes, unreadable, shorter than 5 s or " +
        "longer than 5 min, refused by the provider) or on name",
    },
    409: {
      description:
        "WORKFLOW_NOT_READY with missing [email_verified]: cloning runs on Parley's speech account and needs the " +
        "owner's verified email",
    },
  },
  handler: ({ principal, upload }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      // A request without a body has no upload: the service answers it as a missing sample.
      const form = upload ?? { file: async () => undefined, fields: async () => ({}) }
      const voice = yield* cloneVoice({ kind: "workspace", tenantId: caller.tenantId }, form, readingUpload)
      return json(voice, 201)
    }),
})

export const voiceAvatarsList = route({
  method: "GET",
  path: "/api/voice-avatars",
  auth: "jwt",
  summary: "The workspace's cloned voices, newest first, each with the workflows it is assigned to",
  tags: ["voices"],
  responses: { 200: { description: "Voices", schema: z.object({ voices: z.array(Voice) }) } },
  handler: ({ principal }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* listVoices(caller.tenantId))
    }),
})

export const voiceAvatarsDelete = route({
  method: "DELETE",
  path: "/api/voice-avatars/{voice_id}",
  auth: "jwt",
  permission: "admin",
  summary:
    "Delete a cloned voice and its sample; the workflows it was assigned to return to their persona's voice " +
    "(409 WORKFLOW_LIVE while a live workflow speaks with it)",
  tags: ["voices"],
  params: Params,
  responses: {
    200: { description: "Deleted", schema: z.object({ id: z.number().int(), deleted: z.literal(true) }) },
    409: { description: "WORKFLOW_LIVE: a live workflow speaks with it (details.workflow_ids); pause it first" },
  },
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* deleteVoice(caller.tenantId, params.voice_id))
    }),
})

export const voiceAvatarsAssign = route({
  method: "PUT",
  path: "/api/voice-avatars/assign",
  auth: "jwt",
  summary:
    "Make a cloned voice a workflow's voice, or with voice_id null return it to its persona's voice " +
    "(409 while the workflow is live or retired)",
  tags: ["voices"],
  body: {
    json: z.object({
      workflow_id: BodyId,
      voice_id: z.union([BodyId, z.null()], { error: "must be a voice id, or null to clear the assignment" }),
    }),
  },
  responses: {
    200: {
      description: "The workflow's voice now",
      schema: z.object({ workflow_id: z.number().int(), voice_id: z.number().int().nullable() }),
    },
    409: { description: "WORKFLOW_LIVE or WORKFLOW_RETIRED" },
  },
  handler: ({ principal, body }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* assignVoice(caller.tenantId, body!.workflow_id, body!.voice_id))
    }),
})
