// The speech contracts of a call heard as audio: a recogniser fed the callee's 20 ms μ-law frames as
// they come (partial hypotheses on the way, the final one when the utterance is over) and a
// synthesiser that renders one sentence at a time into frames, saying how long the first took. The
// offline engines (PocketSphinx, flite) implement them; a hosted vendor's streaming adapter does too.
import type { SpeechVoice } from "./speech.interface.js"

/** One call's recogniser: one utterance at a time. */
export interface StreamingRecognizer {
  /** Hears one 20 ms frame of the callee's speech (μ-law, 160 bytes); an utterance starts with its first. */
  frame(mulaw: Uint8Array): void
  /** The best hypothesis of the utterance so far ("" for none). */
  partial(): string
  /** The utterance is over: its final transcript ("" when nothing was recognised). */
  end(): Promise<string>
  /** The call is over: whatever the recogniser holds is given back. */
  free(): void
}

/** The parts of a voice description a phone renderer uses. */
export type PhoneVoice = Pick<SpeechVoice, "gender" | "speed" | "variant"> &
  Partial<Pick<SpeechVoice, "pitch" | "vendor_voice_id">>

/** One sentence, ready to send. */
export interface PhoneSpeech {
  /** μ-law, 20 ms a frame (the last padded with silence). */
  readonly frames: Uint8Array[]
  readonly durationMs: number
  /** How long rendering took before the first frame existed. */
  readonly firstAudioMs: number
  /** The engine's voice that spoke. */
  readonly voice: string
}

export interface StreamingSynthesizer {
  readonly name: string
  /** `text` (one sentence) spoken in `voice` for the phone. */
  speak(text: string, voice: PhoneVoice): Promise<PhoneSpeech>
}
