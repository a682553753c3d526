// The voicemail beep detector (src/providers/audio/beep.ts): a steady tone held 200 ms is a beep,
// found once; speech in any of flite's voices, silence and line noise are not.
import { describe, expect, it } from "vitest"
import { BeepDetector, beepFrames } from "../../src/providers/audio/beep.js"
import { decode, encode } from "../../src/providers/audio/g711.js"
import { speakForPhone } from "../../src/providers/speech/flite.phone.js"

const flite = process.env.REQUIRE_FLITE === "1" || (await import("node:fs")).existsSync("/usr/bin/flite")

/** Frames through the phone line's μ-law, as the detector hears them. */
const phone = (frames: readonly Int16Array[]) => frames.map((f) => decode(encode(f)))

describe("beep detection", () => {
  it("finds a 1 kHz or a 440 Hz tone once it has held 200 ms, once per beep", () => {
    for (const hz of [1000, 440, 1800]) {
      const d = new BeepDetector()
      const hits = phone(beepFrames(600, hz)).map((f) => d.push(f))
      expect(hits.indexOf(true)).toBe(9)
      expect(hits.filter(Boolean)).toHaveLength(1)
    }
  })

  it("hears no beep in silence, in line noise, or a tone too short", () => {
    const d = new BeepDetector()
    let seed = 7
    const noise = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff
      return (seed % 2001) - 1000
    }
    const quiet = Array.from({ length: 50 }, () => new Int16Array(160))
    const hiss = Array.from({ length: 50 }, () => Int16Array.from({ length: 160 }, noise))
    const blip = beepFrames(120)
    expect(phone([...quiet, ...hiss, ...blip, ...quiet]).some((f) => d.push(f))).toBe(false)
  })

  it.skipIf(!flite)("hears no beep in speech, whatever the voice", async () => {
    for (const voice of [
      { gender: "female" as const, speed: 1, variant: 0 },
      { gender: "male" as const, speed: 1, variant: 0 },
      { gender: "male" as const, speed: 0.7, variant: 2 },
    ]) {
      const { frames } = await speakForPhone(
        "Hi, you've reached my voicemail. Please leave a message after the tone. Sorry I missed your call.",
        voice,
      )
      const d = new BeepDetector()
      expect(frames.some((f) => d.push(decode(f)))).toBe(false)
    }
  })
})
