// GET /voices: the persona voices (6 English, 1 Hindi), each with a sample MP3 this server serves.
import { Effect } from "effect"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { VOICES } from "../../src/voices/voices.catalog.js"
import { baseUrl } from "../base-url.js"
import { json } from "../reply.js"
import { route } from "../route.js"

export default route({
  method: "GET",
  path: "/voices",
  auth: "public",
  summary: "Persona voices with sample MP3 URLs",
  tags: ["voices"],
  handler: ({ headers }) =>
    Effect.map(AppConfig, (config) => {
      const base = baseUrl(config, headers)
      return json({
        voices: VOICES.map((v) => ({
          id: v.id,
          name: v.name,
          language: v.language,
          gender: v.gender,
          accent: v.accent,
          description: v.description,
          sample_text: v.sample_text,
          sample_mp3_url: `${base}/voices/${v.id}/sample.mp3`,
        })),
      })
    }),
})
