// The speech-synthesis provider as a service. Only the offline simulator exists so far; real
// vendor adapters plug in here behind the same interface.
import { Context, Effect, Layer } from "effect"
import { makeSimSpeech } from "./speech/sim.speech.js"
import type { SpeechProvider } from "./speech/speech.interface.js"

export class Speech extends Context.Tag("parley/Speech")<Speech, SpeechProvider>() {
  /** The simulator, whose worker threads stop with the layer's scope. */
  static readonly sim: Layer.Layer<Speech> = Layer.scoped(
    Speech,
    Effect.gen(function* () {
      const speech = makeSimSpeech()
      yield* Effect.addFinalizer(() => Effect.promise(() => speech.close()))
      return speech
    }),
  )
}
