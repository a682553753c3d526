// The sketched voice of fast simulated calls: as long as the words take at the voice's rate, heard
// as speech by the voice-activity detector (no 500 ms gap inside a sentence), and never as a beep.
import { beforeAll, describe, expect, it } from "vitest"
import { BeepDetector } from "../../src/providers/audio/beep.js"
import { DEFAULT_END_OF_SPEECH, EndOfSpeech } from "../../src/providers/audio/end-of-speech.js"
import { decode } from "../../src/providers/audio/g711.js"
import { Vad } from "../../src/providers/audio/vad.js"
import { sketchSynthesizer } from "../../src/providers/speech/sketch.synth.js"

beforeAll(() => Vad.load())

describe("the sketched voice", () => {
  it("speaks a sentence as one utterance, as long as its words at the voice's rate, with no beep in it", async () => {
    const text = "Thank you for your time today, I am calling about your membership."
    const female = await sketchSynthesizer.speak(text, { gender: "female", speed: 1, variant: 0 })
    const fast = await sketchSynthesizer.speak(text, { gender: "male", speed: 1.5, variant: 1 })
    expect(female.durationMs).toBeGreaterThan(4000)
    expect(female.durationMs).toBeLessThan(6000)
    expect(fast.durationMs).toBeLessThan(female.durationMs * 0.8)
    for (const speech of [female, fast]) {
      const vad = Vad.now()
      const eos = new EndOfSpeech(DEFAULT_END_OF_SPEECH)
      const beeps = new BeepDetector()
      const events: string[] = []
      let beeped = false
      const silence = new Uint8Array(160).fill(0xff)
      for (const f of [...speech.frames, ...Array.from({ length: 40 }, () => silence)]) {
        const pcm = decode(f)
        if (beeps.push(pcm)) beeped = true
        const e = eos.push(vad.voiced(pcm))
        if (e !== undefined) events.push(e.kind)
      }
      vad.free()
      expect(events).toEqual(["speech_start", "speech_end"])
      expect(beeped).toBe(false)
    }
  })
})
