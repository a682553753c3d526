// A stand-in voice for simulated calls whose audio runs much faster than real time (a time scale
// under 0.2, test suites at 0.01): rendering a sentence with flite takes ~0.1 s of CPU, more than
// the whole scaled sentence lasts, so at that pace the agent's lines and the simulated callee's are
// sketched instead: a voiced buzz at the voice's pitch, in syllable-length bursts, lasting as long
// as the words take at the voice's speaking rate. It is speech to a voice-activity detector, so
// frames, end of speech, pacing, marks and barge-in all run as with a real voice; only a
// recogniser could not read it (at such a pace the simulated callee's script stand-in listens).
import { encode, FRAME_SAMPLES, PHONE_RATE } from "../audio/g711.js"
import type { PhoneSpeech, PhoneVoice, StreamingSynthesizer } from "./streaming.interface.js"

/** Words a second at speed 1 (flite's voices run about this fast). */
const WORDS_PER_SECOND = 2.6
/** A syllable's burst and the dip after it, in frames (200 ms + 60 ms). */
const BURST_FRAMES = 10
const DIP_FRAMES = 3
/** Silence before and after a sentence, in frames (flite leads and trails with about this much). */
const EDGE_FRAMES = 5

const SILENCE = new Uint8Array(FRAME_SAMPLES).fill(0xff)

/** One frame of a buzz at `hz` (a few harmonics, as a voice has), phase-continuous by frame index. */
function buzzFrame(hz: number, index: number, gain: number): Uint8Array {
  const pcm = new Int16Array(FRAME_SAMPLES)
  for (let i = 0; i < FRAME_SAMPLES; i++) {
    const t = (index * FRAME_SAMPLES + i) / PHONE_RATE
    const w = 2 * Math.PI * hz * t
    const v = Math.sin(w) + 0.6 * Math.sin(2 * w) + 0.4 * Math.sin(3 * w) + 0.25 * Math.sin(5 * w)
    pcm[i] = Math.round(v * gain * 4000)
  }
  return encode(pcm)
}

/** A burst's frames by pitch, rendered once: every sentence reuses them. */
const bursts = new Map<number, Uint8Array[]>()
function burst(hz: number): Uint8Array[] {
  let b = bursts.get(hz)
  if (b === undefined) {
    b = Array.from({ length: BURST_FRAMES }, (_, i) => {
      // Rising and falling within the syllable, as speech does.
      const envelope = 0.5 + 0.5 * Math.sin((Math.PI * (i + 0.5)) / BURST_FRAMES)
      return buzzFrame(hz, i, envelope)
    })
    bursts.set(hz, b)
  }
  return b
}

/** The voice's pitch: a woman's or a man's, its variant and pitch shift on top. */
const pitchOf = (voice: PhoneVoice): number =>
  Math.round((voice.gender === "male" ? 120 : 210) * (1 + 0.05 * (voice.variant ?? 0)) * 2 ** ((voice.pitch ?? 0) / 12))

export const sketchSynthesizer: StreamingSynthesizer = {
  name: "sketch",
  async speak(text: string, voice: PhoneVoice): Promise<PhoneSpeech> {
    const words = Math.max(1, text.split(/\s+/).filter((w) => w !== "").length)
    const speed = voice.speed > 0 ? voice.speed : 1
    const voicedFrames = Math.round(((words / (WORDS_PER_SECOND * speed)) * 1000) / 20)
    const b = burst(pitchOf(voice))
    const frames: Uint8Array[] = Array.from({ length: EDGE_FRAMES }, () => SILENCE)
    for (let at = 0; at < voicedFrames; at += BURST_FRAMES + DIP_FRAMES) {
      frames.push(...b.slice(0, Math.min(BURST_FRAMES, voicedFrames - at)))
      for (let d = 0; d < DIP_FRAMES; d++) frames.push(SILENCE)
    }
    for (let e = 0; e < EDGE_FRAMES; e++) frames.push(SILENCE)
    return { frames, durationMs: frames.length * 20, firstAudioMs: 0, voice: `sketch-${voice.gender}` }
  },
}
