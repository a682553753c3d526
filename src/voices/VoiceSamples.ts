// The persona sample clips as a service: synthesised once per voice by the speech provider and
// cached in memory and under DATA_DIR/voices, so a restart does not synthesise again.
import { join, resolve } from "node:path"
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import { Speech } from "../providers/Speech.js"
import { makeVoiceSamples } from "./voice-samples.cache.js"

export class VoiceSamples extends Context.Tag("parley/VoiceSamples")<
  VoiceSamples,
  ReturnType<typeof makeVoiceSamples>
>() {}

export const VoiceSamplesLive: Layer.Layer<VoiceSamples, never, AppConfig | Speech> = Layer.effect(
  VoiceSamples,
  Effect.gen(function* () {
    const config = yield* AppConfig
    const speech = yield* Speech
    return makeVoiceSamples({ speech, cacheDir: resolve(join(config.dataDir, "voices")) })
  }),
)
