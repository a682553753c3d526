// Offline speech for the phone line (src/providers/speech/flite.phone.ts): flite's WASI build renders
// a sentence as 8 kHz μ-law frames, which the voice-activity detector hears as one utterance; a
// persona's gender, variant and speed choose and shape the voice.
import { describe, expect, it } from "vitest"
import { EndOfSpeech } from "../../src/providers/audio/end-of-speech.js"
import { decode } from "../../src/providers/audio/g711.js"
import { Vad } from "../../src/providers/audio/vad.js"
import { fliteVoiceFor, speakForPhone } from "../../src/providers/speech/flite.phone.js"

const LINE = "Hello, this is Anya calling from Northwind Gyms about your membership."

/** The median pitch (Hz) of the loud frames, by autocorrelation between 60 and 400 Hz. */
function medianPitch(frames: Uint8Array[]): number {
  const pitches: number[] = []
  for (let i = 0; i + 2 < frames.length; i += 2) {
    const x = Int16Array.from([...decode(frames[i]!), ...decode(frames[i + 1]!), ...decode(frames[i + 2]!)])
    if (x.reduce((m, s) => Math.max(m, Math.abs(s)), 0) < 3000) continue
    let best = 0
    let lag = 0
    for (let l = 20; l <= 133; l++) {
      let r = 0
      for (let k = 0; k + l < x.length; k++) r += x[k]! * x[k + l]!
      if (r > best) {
        best = r
        lag = l
      }
    }
    if (lag > 0) pitches.push(8000 / lag)
  }
  pitches.sort((a, b) => a - b)
  return pitches[Math.floor(pitches.length / 2)] ?? 0
}

describe("speech for the phone line (flite)", () => {
  it("renders a sentence as 20 ms μ-law frames that the detector hears as one utterance", async () => {
    const s = await speakForPhone(LINE, { gender: "female", speed: 1 })
    expect(s.voice).toBe("slt")
    expect(s.frames.every((f) => f.length === 160)).toBe(true)
    expect(s.durationMs).toBeGreaterThan(2000)
    expect(s.durationMs).toBeLessThan(8000)
    const vad = await Vad.create()
    const eos = new EndOfSpeech()
    const silence = Array.from({ length: 40 }, () => new Uint8Array(160).fill(0xff))
    const events = [...silence, ...s.frames, ...silence].flatMap((f) => {
      const e = eos.push(vad.voiced(decode(f)))
      return e === undefined ? [] : [e]
    })
    vad.free()
    expect(events.map((e) => e.kind)).toEqual(["speech_start", "speech_end"])
  })

  it("gives women and men different voices, a man's by variant, and speaks slower when asked", async () => {
    expect(fliteVoiceFor({ gender: "male", speed: 1, variant: 0 }).name).toBe("rms")
    expect(fliteVoiceFor({ gender: "male", speed: 1, variant: 1 }).name).toBe("awb")
    expect(fliteVoiceFor({ gender: "female", speed: 4 })).toEqual({ name: "slt", stretch: 0.5 })
    const [woman, man, slow] = await Promise.all([
      speakForPhone(LINE, { gender: "female", speed: 1 }),
      speakForPhone(LINE, { gender: "male", speed: 1, variant: 0 }),
      speakForPhone(LINE, { gender: "female", speed: 0.5 }),
    ])
    expect(medianPitch(woman.frames) - medianPitch(man.frames)).toBeGreaterThan(40)
    expect(slow.durationMs / woman.durationMs).toBeGreaterThan(1.5)
  })

  it("renders with flite's WASI build from npm where Debian's flite is not installed", async () => {
    const s = await speakForPhone(LINE, { gender: "female", speed: 1 }, "wasi")
    expect(s.voice).toBe("slt")
    expect(s.durationMs).toBeGreaterThan(2000)
    expect(medianPitch(s.frames)).toBeGreaterThan(120)
  })

  it("refuses a sentence longer than the speech limit", async () => {
    await expect(speakForPhone("a".repeat(1001), { gender: "female", speed: 1 })).rejects.toThrow(RangeError)
  })
})
