// GET /voices/{voice_id}/sample.mp3: the persona's sample clip, synthesised on first request.
import { Effect } from "effect"
import { z } from "zod"
import { NotFound } from "../../src/platform/errors.js"
import { VoiceSamples } from "../../src/voices/VoiceSamples.js"
import { bytes } from "../reply.js"
import { route } from "../route.js"

export default route({
  method: "GET",
  path: "/voices/{voice_id}/sample.mp3",
  auth: "public",
  summary: "A persona voice's sample clip (audio/mpeg)",
  tags: ["voices"],
  params: z.object({ voice_id: z.string().regex(/^[a-z][a-z0-9_-]{0,39}$/, "must be a voice id such as amelia") }),
  responses: { 200: { description: "MP3 audio", contentType: "audio/mpeg" } },
  handler: ({ params }) =>
    Effect.gen(function* () {
      const samples = yield* VoiceSamples
      const clip = yield* Effect.promise(() => samples.get(params.voice_id))
      if (!clip) return yield* Effect.fail(new NotFound({ message: `voice ${params.voice_id} not found` }))
      return bytes("audio/mpeg", clip.audio, 200, {
        "Cache-Control": "public, max-age=86400",
        "X-Duration-Ms": String(clip.duration_ms),
      })
    }),
})
