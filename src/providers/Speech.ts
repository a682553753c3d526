// The speech-synthesis provider as a service: the offline simulator, or an ElevenLabs-style API when
// SPEECH_API_URL and SPEECH_API_KEY are set (cloning and cloned voices there; the catalogue personas
// there too with SPEECH_DEFAULT_VOICE_ID, else still on the simulator).
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import type { Config } from "../platform/config.js"
import { outboundFor } from "./outbound.js"
import { makeElevenLabsSpeech } from "./speech/elevenlabs.speech.js"
import { makeSimSpeech } from "./speech/sim.speech.js"
import type { SpeechProvider } from "./speech/speech.interface.js"

export class Speech extends Context.Tag("parley/Speech")<Speech, SpeechProvider>() {
  /** The simulator whatever the configuration (tests), whose worker threads stop with the layer's scope. */
  static readonly sim: Layer.Layer<Speech> = Layer.scoped(
    Speech,
    Effect.gen(function* () {
      const speech = makeSimSpeech()
      yield* Effect.addFinalizer(() => Effect.promise(() => speech.close()))
      return speech
    }),
  )
}

/** The deployment's speech provider for `config`: SPEECH_API_* when set, else the simulator. */
export function makeSpeech(
  config: Pick<Config, "speechApi" | "allowPrivateProviderUrls" | "providerResponseLimitBytes">,
): SpeechProvider {
  const sim = makeSimSpeech()
  if (config.speechApi === undefined) return sim
  return makeElevenLabsSpeech({
    baseUrl: config.speechApi.url,
    apiKey: config.speechApi.apiKey,
    defaultVoiceId: config.speechApi.defaultVoiceId,
    fallback: sim,
    // SPEECH_API_URL is the operator's own: the answer cap, no address guard.
    outbound: outboundFor(config, "platform"),
  })
}

export const SpeechLive: Layer.Layer<Speech, never, AppConfig> = Layer.scoped(
  Speech,
  Effect.gen(function* () {
    const speech = makeSpeech(yield* AppConfig)
    yield* Effect.addFinalizer(() => Effect.promise(async () => speech.close?.()))
    return speech
  }),
)
