// POST /api/workflows/preview-opening: a persona, or a workflow's voice (its cloned voice when one
// is assigned), speaks an opening line (synthesised once, stored by content hash);
// GET /api/workflows/preview-opening/{clip_id}: that clip's MP3, immutable.
import { Effect } from "effect"
import { z } from "zod"
import { Auth } from "../../src/auth/Auth.js"
import { AppConfig } from "../../src/platform/AppConfig.js"
import {
  CLIP_ID,
  MAX_PREVIEW_TEXT_CHARS,
  type PreviewCaller,
  previewAudio,
  previewOpening,
} from "../../src/voices/previews.service.js"
import { VOICES } from "../../src/voices/voices.catalog.js"
import { baseUrl } from "../base-url.js"
import { bytes, json } from "../reply.js"
import { route } from "../route.js"

const PERSONAS = VOICES.map((v) => v.id)

const PreviewRequest = z
  .object({
    text: z
      .string()
      .trim()
      .min(1, "must not be empty")
      .max(MAX_PREVIEW_TEXT_CHARS, `must be at most ${MAX_PREVIEW_TEXT_CHARS} characters`)
      // Punctuation alone renders as silence: ask for words instead of serving an empty clip.
      .refine((t) => /[\p{L}\p{N}]/u.test(t), "must contain something to speak"),
    persona: z.enum(PERSONAS, { error: `must be one of ${PERSONAS.join(", ")}` }).optional(),
    /** The caller's workflow: its assigned cloned voice speaks (in the persona's language). */
    workflow_id: z.number({ error: "must be a workflow id" }).int().positive().optional(),
  })
  .refine((b) => b.persona !== undefined || b.workflow_id !== undefined, {
    message: "is required (or give workflow_id)",
    path: ["persona"],
  })

/**
 * Who is asking, on a public route: the workspace of a valid session (bearer or cookie, which must
 * pass the same CSRF check as anywhere else) or API key of any scope; otherwise, including for an
 * invalid, expired or revoked credential, an anonymous client at its address. Refusing a stale
 * credential with 401 would break a page that works without one; counting it as anonymous cannot
 * be used to escape the per-address budget.
 */
const previewCaller = (req: {
  method: string
  headers: Readonly<Record<string, string>>
  clientIp: string
}): Effect.Effect<PreviewCaller, never, Auth> =>
  Effect.gen(function* () {
    const anonymous: PreviewCaller = { kind: "anonymous", ip: req.clientIp }
    const auth = yield* Auth
    const checked = auth.authenticate(req, { level: "jwt", permission: "read" })
    const principal = checked instanceof Promise ? yield* Effect.promise(() => checked) : checked
    return principal instanceof Error
      ? anonymous
      : { kind: "workspace", tenantId: principal.tenantId, ip: req.clientIp }
  })

export const previewOpeningCreate = route({
  method: "POST",
  path: "/api/workflows/preview-opening",
  auth: "public",
  summary:
    "Hear a persona, or a workflow's voice (workflow_id: its cloned voice when assigned), speak an opening line: " +
    "{mp3_url, duration_ms, persona, clip_id, voice_id (with workflow_id)}",
  tags: ["workflows"],
  body: { json: PreviewRequest },
  responses: {
    200: {
      description: "The clip, stored and ready to fetch",
      schema: z.object({
        mp3_url: z.string(),
        duration_ms: z.number().int(),
        persona: z.string(),
        /** With workflow_id: the cloned voice that spoke (null: the persona's own voice). */
        voice_id: z.number().int().nullable().optional(),
        clip_id: z.string(),
      }),
    },
    404: { description: "NOT_FOUND: workflow_id is not one of the signed-in caller's workflows" },
    429: {
      description:
        "RATE_LIMITED with Retry-After: the hourly budget is spent (anonymous callers: PREVIEWS_ANON_PER_IP_HOUR " +
        "per address; signed-in: 600 per workspace), or synthesis is busy",
    },
    409: {
      description:
        "WORKFLOW_NOT_READY with missing [email_verified]: a signed-in workspace whose owner has not verified their " +
        "email shares its address's anonymous budget, and has spent it",
    },
  },
  handler: ({ body, headers, method, clientIp }) =>
    Effect.gen(function* () {
      const caller = yield* previewCaller({ method, headers, clientIp })
      const { text, persona, workflow_id } = body!
      const clip = yield* previewOpening({ text, persona, workflowId: workflow_id, caller })
      const base = baseUrl(yield* AppConfig, headers)
      return json({
        mp3_url: `${base}/api/workflows/preview-opening/${clip.clip_id}`,
        duration_ms: clip.duration_ms,
        persona: clip.persona,
        ...(workflow_id !== undefined && { voice_id: clip.voice_id }),
        clip_id: clip.clip_id,
      })
    }),
})

export const previewOpeningAudio = route({
  method: "GET",
  path: "/api/workflows/preview-opening/{clip_id}",
  auth: "public",
  summary: "A preview clip's MP3 (audio/mpeg); the clip never changes",
  tags: ["workflows"],
  params: z.object({ clip_id: z.string().regex(CLIP_ID, "must be a preview clip id") }),
  responses: { 200: { description: "MP3 audio", contentType: "audio/mpeg" } },
  handler: ({ params }) =>
    Effect.map(previewAudio(params.clip_id), (clip) =>
      bytes("audio/mpeg", clip.audio, 200, {
        // The id is a hash of everything the audio is made from: a URL's bytes never change.
        "Cache-Control": "public, max-age=31536000, immutable",
        "X-Duration-Ms": String(clip.duration_ms),
      }),
    ),
})
