// The speech-synthesis provider contract: text plus a provider-neutral voice description in,
// one MP3 out. The offline simulator and any real vendor adapter implement the same interface.

/** Longest text one synthesis accepts; longer prompts must be split by the caller. */
export const MAX_SPEECH_TEXT_CHARS = 1000

export type SpeechGender = "female" | "male"

/**
 * What a provider needs to pick and shape a voice. The fields are hints in the provider's own
 * terms: a provider maps them onto the nearest voice it has, and `vendor_voice_id`, when set,
 * names that vendor's voice outright.
 */
export interface SpeechVoice {
  /** BCP-47 tag of the language and accent to speak, e.g. "en-GB", "hi-IN". */
  readonly language: string
  readonly gender: SpeechGender
  /** Relative pitch from -1 (lowest) through 0 (the voice's natural pitch) to 1 (highest). */
  readonly pitch: number
  /** Speaking-rate multiplier from 0.5 to 2; 1 is the provider's normal rate. */
  readonly speed: number
  /**
   * Timbre slot among a provider's voices of the same language and gender, so two personas that
   * share both still sound different. Providers wrap it around however many timbres they have.
   */
  readonly variant?: number
  /** A real vendor's own voice id; simulators ignore it. */
  readonly vendor_voice_id?: string
}

/**
 * How a request waits when the provider is busy. `normal` (the default): signed-in workspaces and
 * the platform's own work. `low`: anonymous public work (opening-line previews from visitors),
 * taken only when no normal request waits and held to a share of the provider's queue, so a flood
 * of it never makes a normal request wait longer or answer BUSY.
 */
export type SpeechPriority = "normal" | "low"

export interface SpeechRequest {
  readonly text: string
  readonly voice: SpeechVoice
  readonly priority?: SpeechPriority
}

export interface SynthesizedAudio {
  /** A complete MP3 file (mono, constant bitrate, no ID3 tag). */
  readonly audio: Uint8Array
  readonly mime: "audio/mpeg"
  /** Length of the speech as rendered, from its PCM sample count (before MP3 frame padding). */
  readonly duration_ms: number
  readonly sample_rate: number
}

export interface SpeechProvider {
  /** Short stable name ("sim", a vendor name); part of cache keys, so changing it invalidates them. */
  readonly name: string
  /** Rejects with SpeechSynthesisError; never resolves with empty audio. */
  synthesize(req: SpeechRequest): Promise<SynthesizedAudio>
  /** Releases what the provider holds (worker threads, sockets); later calls reject. */
  close?(): Promise<void>
}

export type SpeechErrorCode =
  /** More than MAX_SPEECH_TEXT_CHARS characters. */
  | "TEXT_TOO_LONG"
  /** Nothing speakable once whitespace and control characters are removed. */
  | "EMPTY_TEXT"
  /** Pitch or speed out of range, or a language the provider cannot speak. */
  | "UNSUPPORTED_VOICE"
  /** The engine or vendor failed; retrying may help. */
  | "ENGINE_FAILURE"
  /** Too many syntheses already waiting; retry after a short pause. */
  | "BUSY"

export class SpeechSynthesisError extends Error {
  override readonly name = "SpeechSynthesisError"
  constructor(
    readonly code: SpeechErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options)
  }
}
