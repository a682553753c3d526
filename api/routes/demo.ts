// The public demo, no account needed: POST /demo/call (Parley calls you; a real call through the
// runtime), GET /demo/feed (that call's events, by its token), POST /demo/clone-voice (an
// ephemeral voice from your recording) and POST /demo/voice-preview (hear it speak).
import { Effect } from "effect"
import { z } from "zod"
import { demoFeed, FEED_KINDS } from "../../src/demo/demo.feed.js"
import { DEMO_PERSONAS } from "../../src/demo/demo.rulebook.js"
import { placeDemoCall } from "../../src/demo/demo.service.js"
import { cloneDemoVoice, demoVoicePreview } from "../../src/demo/demo.voices.js"
import { NAME_MAX } from "../../src/voices/avatars.service.js"
import { MAX_PREVIEW_TEXT_CHARS } from "../../src/voices/previews.service.js"
import { bytes, json } from "../reply.js"
import { route } from "../route.js"
import { QueryInt } from "../schemas.js"
import { readingUpload } from "../upload.js"
import { SAMPLE_PART } from "./voice-avatars.js"

/** What the agent calls the visitor: a first name, not a message (it is said to whoever answers). */
const FirstName = z
  .string()
  .trim()
  .min(1, "must not be empty")
  .max(40, "must be at most 40 characters")
  .regex(/^[\p{L}\p{M}][\p{L}\p{M} .'’-]*$/u, "must be a name: letters, spaces, apostrophes, hyphens and dots")

const DemoCallRequest = z.object({
  phone: z
    .string({ error: "is required: the number to call, with its country code" })
    .trim()
    .min(1, "is required")
    .max(40, "must be at most 40 characters"),
  name: FirstName.optional(),
  persona: z.enum(DEMO_PERSONAS, { error: `must be one of ${DEMO_PERSONAS.join(", ")}` }).optional(),
  altcha: z.string().max(4096).optional(),
})

const TOO_MANY =
  "RATE_LIMITED with Retry-After: DEMO_CALLS_PER_IP_DAY from this address or DEMO_CALLS_PER_NUMBER_DAY to this " +
  "number were used today, or the number had a call in the last 7 days (the cool-down)"

export const demoCall = route({
  method: "POST",
  path: "/demo/call",
  auth: "public",
  summary:
    "Get a demo call: Parley's agent calls the number now (a real call, at most DEMO_MAX_CALL_SECONDS); " +
    "watch it with GET /demo/feed and the token",
  tags: ["demo"],
  body: { json: DemoCallRequest },
  responses: {
    202: {
      description: "Queued: {call_id, status: queued, feed_token (the feed's only credential), expires_at}",
      schema: z.object({
        call_id: z.number().int(),
        status: z.literal("queued"),
        feed_token: z.string(),
        expires_at: z.string(),
      }),
    },
    400: { description: "CHALLENGE_REQUIRED or CHALLENGE_FAILED (ALTCHA_REQUIRED): field altcha" },
    422: {
      description:
        "VALIDATION_FAILED on phone: not a valid number, a country demos do not call, not a mobile or landline, " +
        "or a number on the demo's do-not-call list or the national registry",
    },
    429: { description: TOO_MANY },
  },
  handler: ({ body, clientIp }) =>
    Effect.gen(function* () {
      const b = body!
      const accepted = yield* placeDemoCall({ ...b, ip: clientIp })
      return json(accepted, 202)
    }),
})

const FeedEvent = z.object({
  seq: z.number().int(),
  at: z.string(),
  kind: z.enum(FEED_KINDS),
  text: z.string().optional(),
  speaker: z.enum(["agent", "callee", "system"]).optional(),
  outcome: z.string().optional(),
})

export const demoFeedGet = route({
  method: "GET",
  path: "/demo/feed",
  auth: "public",
  summary:
    "A demo call's events after seq `after`: queued, ringing, answered, turn (text with phone numbers and emails " +
    "masked), ended; done once it ended. The token is the only credential and lives DEMO_FEED_TTL_SECONDS",
  tags: ["demo"],
  query: z.object({
    token: z.string().min(1, "is required").max(200),
    after: QueryInt(0, Number.MAX_SAFE_INTEGER).default(0),
  }),
  responses: {
    200: { description: "Events in seq order", schema: z.object({ events: z.array(FeedEvent), done: z.boolean() }) },
    404: { description: "NOT_FOUND: an unknown or expired token" },
  },
  handler: ({ query }) =>
    Effect.map(demoFeed(query.token, query.after), (feed) => json(feed, 200, { "Cache-Control": "no-store" })),
})

export const demoCloneVoice = route({
  method: "POST",
  path: "/demo/clone-voice",
  auth: "public",
  summary:
    "Clone a voice without an account: multipart form with sample (WAV, MP3, OGG or WebM, 5 s to 5 min) and an " +
    "optional name; the voice is removed DEMO_CLONE_TTL_MINUTES later. {voice_id, script, expires_at}",
  tags: ["demo"],
  body: {
    multipart: "stream",
    form: {
      name: { kind: "text", required: false, maxLength: NAME_MAX, description: "The voice's name" },
      sample: SAMPLE_PART,
    },
  },
  responses: {
    200: {
      description: "The demo voice's id (for /demo/voice-preview only) and a line to hear it say",
      schema: z.object({ voice_id: z.string(), script: z.string(), expires_at: z.string() }),
    },
    413: { description: "PAYLOAD_TOO_LARGE: the form passed UPLOAD_LIMIT_BYTES" },
    422: {
      description: "VALIDATION_FAILED on sample (missing, not audio by its bytes, too short or too long) or name",
    },
    429: { description: "RATE_LIMITED with Retry-After: DEMO_CLONES_PER_IP_DAY clones from this address today" },
  },
  handler: ({ upload, clientIp }) =>
    Effect.gen(function* () {
      // A request without a body has no upload: the service answers it as a missing sample.
      const form = upload ?? { file: async () => undefined, fields: async () => ({}) }
      return json(yield* cloneDemoVoice(form, readingUpload, clientIp))
    }),
})

export const demoVoicePreviewPost = route({
  method: "POST",
  path: "/demo/voice-preview",
  auth: "public",
  summary:
    "Hear a demo voice (a voice_id from /demo/clone-voice) say `text`, or its script: audio/mpeg. Voices of " +
    "workspaces, and unknown or expired ids, are 404",
  tags: ["demo"],
  body: {
    json: z.object({
      voice_id: z.union([z.string().max(200), z.number()], { error: "must be a demo voice id" }).transform(String),
      text: z
        .string()
        .trim()
        .min(1, "must not be empty")
        .max(MAX_PREVIEW_TEXT_CHARS, `must be at most ${MAX_PREVIEW_TEXT_CHARS} characters`)
        .refine((t) => /[\p{L}\p{N}]/u.test(t), "must contain something to speak")
        .optional(),
    }),
  },
  responses: {
    200: { description: "MP3 audio", contentType: "audio/mpeg" },
    404: { description: "NOT_FOUND: not a voice the demo minted, or it expired" },
    422: { description: "VALIDATION_FAILED on text: longer than DEMO_PREVIEW_TEXT_MAX_CHARS" },
    429: { description: "RATE_LIMITED with Retry-After: PREVIEWS_ANON_PER_IP_HOUR, or synthesis is busy" },
  },
  handler: ({ body, clientIp }) =>
    Effect.gen(function* () {
      const clip = yield* demoVoicePreview({ voiceId: body!.voice_id, text: body!.text, ip: clientIp })
      return bytes("audio/mpeg", clip.audio, 200, {
        "Cache-Control": "no-store",
        "X-Duration-Ms": String(clip.duration_ms),
      })
    }),
})
