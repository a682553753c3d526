// The speech-synthesis provider contract: text plus a provider-neutral voice description in,
// one MP3 out; and voice cloning, a sample in and a voice out. The offline simulator and any real
// vendor adapter implement the same interface.

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

/** The audio containers a voice sample may come in (detected from its bytes by the caller). */
export type SampleFormat = "wav" | "mp3" | "ogg" | "webm"

/** A recording of someone speaking, already checked by the caller (format, 5 s to 5 min). */
export interface VoiceSample {
  /** What the voice is called; vendors show it in their own consoles. */
  readonly name: string
  readonly audio: Uint8Array
  readonly format: SampleFormat
  readonly mime: string
  readonly duration_ms: number
  /** From the container's headers, when it says. */
  readonly sample_rate?: number | undefined
  readonly bitrate?: number | undefined
}

/**
 * What a sample says about its voice, in SpeechVoice's terms (language aside: a cloned voice speaks
 * whatever language it is asked to). `method` says how it was found: "pcm" when pitch, syllable
 * rate and energy were measured on the decoded audio (WAV), "metadata" when the sample could not
 * be decoded here (MP3, OGG, WebM) and the values are derived from its headers and a hash of its
 * bytes: stable per sample, but not a measurement of the voice.
 */
export interface ClonedVoiceParams {
  readonly gender: SpeechGender
  readonly pitch: number
  readonly speed: number
  readonly variant: number
  readonly method: "pcm" | "metadata"
  /** The median fundamental frequency of the voiced frames; null without decoded audio. */
  readonly pitch_hz: number | null
  readonly syllables_per_second: number | null
  /** RMS level of the voiced frames, in dB below full scale. */
  readonly energy_dbfs: number | null
}

export interface ClonedVoice {
  /** The vendor's id for the new voice; null when the params alone are the voice (the simulator). */
  readonly vendor_voice_id: string | null
  readonly params: ClonedVoiceParams
}

/** The SpeechVoice a cloned voice speaks `language` with. */
export const clonedSpeechVoice = (
  params: Pick<ClonedVoiceParams, "gender" | "pitch" | "speed" | "variant">,
  language: string,
  vendorVoiceId: string | null,
): SpeechVoice => ({
  language,
  gender: params.gender,
  pitch: params.pitch,
  speed: params.speed,
  variant: params.variant,
  ...(vendorVoiceId !== null && { vendor_voice_id: vendorVoiceId }),
})

export interface SpeechProvider {
  /** Short stable name ("sim", a vendor name); part of cache keys, so changing it invalidates them. */
  readonly name: string
  /** Rejects with SpeechSynthesisError; never resolves with empty audio. */
  synthesize(req: SpeechRequest): Promise<SynthesizedAudio>
  /**
   * Makes a voice from a sample; synthesis with clonedSpeechVoice(params, …, vendor_voice_id) then
   * speaks in it. Rejects with SpeechSynthesisError. Absent: the provider cannot clone.
   */
  cloneVoice?(sample: VoiceSample): Promise<ClonedVoice>
  /** Forgets a cloned voice at the vendor (best effort: an unknown id is not an error). */
  deleteVoice?(vendorVoiceId: string): Promise<void>
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
  /** A voice sample the provider refused (unreadable, too noisy, too short for it). */
  | "BAD_SAMPLE"
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
