// When the callee starts and stops speaking, from one voice-activity verdict per 20 ms frame:
// speech starts after `minSpeechMs` of mostly voiced frames (a click or a cough is not a turn), and
// ends once `silenceMs` have passed without speech (the workflow's end-of-speech window, ~500 ms by
// default). Pure: frames in, events out, no clock but the frames' own count.

export const FRAME_MS = 20

export interface EndOfSpeechSettings {
  /** Silence after speech that ends an utterance. */
  readonly silenceMs: number
  /** Voiced audio, within a short window, that starts one. */
  readonly minSpeechMs: number
}

export const DEFAULT_END_OF_SPEECH: EndOfSpeechSettings = { silenceMs: 500, minSpeechMs: 120 }

export type SpeechEvent =
  /** `atMs`: where speech began (the first voiced frame of the run that started it). */
  | { readonly kind: "speech_start"; readonly atMs: number }
  /** `atMs`: where it ended (after the last voiced frame); `durationMs`: start to end. */
  | { readonly kind: "speech_end"; readonly atMs: number; readonly durationMs: number }

/** Frames allowed unvoiced inside the run that starts speech (a dip between syllables). */
const START_GAP_FRAMES = 2

export class EndOfSpeech {
  private frame = 0
  private speaking = false
  /** Voiced frames in the current candidate run, and where it began. */
  private run = 0
  private runStart = 0
  private gap = 0
  /** Where the current utterance began, and its last voiced frame. */
  private startedAt = 0
  private lastVoiced = 0

  constructor(private readonly settings: EndOfSpeechSettings = DEFAULT_END_OF_SPEECH) {}

  /** True while an utterance is under way (started, not yet ended). */
  get inSpeech(): boolean {
    return this.speaking
  }

  /** One frame's verdict; the event it completes, if any. */
  push(voiced: boolean): SpeechEvent | undefined {
    const f = this.frame++
    if (!this.speaking) {
      if (voiced) {
        if (this.run === 0) this.runStart = f
        this.run++
        this.gap = 0
        if (this.run * FRAME_MS >= this.settings.minSpeechMs) {
          this.speaking = true
          this.startedAt = this.runStart
          this.lastVoiced = f
          this.run = 0
          return { kind: "speech_start", atMs: this.startedAt * FRAME_MS }
        }
      } else if (this.run > 0 && ++this.gap > START_GAP_FRAMES) {
        this.run = 0
        this.gap = 0
      }
      return undefined
    }
    if (voiced) {
      this.lastVoiced = f
      return undefined
    }
    if ((f - this.lastVoiced) * FRAME_MS >= this.settings.silenceMs) {
      this.speaking = false
      const endMs = (this.lastVoiced + 1) * FRAME_MS
      return { kind: "speech_end", atMs: endMs, durationMs: endMs - this.startedAt * FRAME_MS }
    }
    return undefined
  }
}
