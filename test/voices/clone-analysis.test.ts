// The simulator's voice "cloning": WAV decoded and measured (pitch by autocorrelation, syllable
// rate from the level's pulses), other formats derived from their bytes, and the voice it makes
// rendering differently from the catalogue personas.
import { afterAll, describe, expect, it } from "vitest"
import { analysePcm, decodeWav, deriveVoiceParams } from "../../src/providers/speech/clone.analysis.js"
import { makeSimSpeech } from "../../src/providers/speech/sim.speech.js"
import { clonedSpeechVoice } from "../../src/providers/speech/speech.interface.js"
import { distinctFromCatalogue } from "../../src/voices/avatars.service.js"
import { findVoice, VOICES } from "../../src/voices/voices.catalog.js"
import { mp3, wav } from "./fixtures.js"

describe("measuring a WAV sample", () => {
  it.each([
    { hz: 110, gender: "male" },
    { hz: 95, gender: "male", sampleRate: 8000 },
    { hz: 220, gender: "female" },
    { hz: 180, gender: "female", sampleRate: 44_100, channels: 2 },
  ] as const)("a $hz Hz voice at $sampleRate Hz: its pitch and gender", ({ hz, gender, ...rest }) => {
    const p = deriveVoiceParams({ audio: wav({ hz, seconds: 6, ...rest }), format: "wav" })
    expect(p.method).toBe("pcm")
    expect(p.pitch_hz).toBeGreaterThan(hz * 0.98)
    expect(p.pitch_hz).toBeLessThan(hz * 1.02)
    expect(p.gender).toBe(gender)
    expect(p.energy_dbfs).toBeLessThan(0)
  })

  it("syllable rate sets the speed; a held tone has no rate and normal speed", () => {
    const slow = deriveVoiceParams({ audio: wav({ hz: 120, seconds: 8, syllablesPerSecond: 3 }), format: "wav" })
    const fast = deriveVoiceParams({ audio: wav({ hz: 120, seconds: 8, syllablesPerSecond: 6 }), format: "wav" })
    expect(slow.syllables_per_second).toBeCloseTo(3, 0)
    expect(fast.syllables_per_second).toBeCloseTo(6, 0)
    expect(slow.speed).toBeLessThan(1)
    expect(fast.speed).toBeGreaterThan(1.3)
    const held = deriveVoiceParams({ audio: wav({ hz: 120, seconds: 6, syllablesPerSecond: 0 }), format: "wav" })
    expect(held).toMatchObject({ syllables_per_second: null, speed: 1, method: "pcm" })
  })

  it("higher voices of a gender get a higher pitch; the same bytes always give the same voice", () => {
    const low = deriveVoiceParams({ audio: wav({ hz: 95, seconds: 6 }), format: "wav" })
    const high = deriveVoiceParams({ audio: wav({ hz: 150, seconds: 6 }), format: "wav" })
    expect(low.pitch).toBeLessThan(high.pitch)
    const again = deriveVoiceParams({ audio: wav({ hz: 95, seconds: 6 }), format: "wav" })
    expect(again).toEqual(low)
  })

  it("decodes 8-bit, 24-bit and float WAV; refuses what is not WAV", () => {
    const base = wav({ hz: 200, seconds: 1 })
    const samples = new Int16Array(base.buffer.slice(base.byteOffset + 44, base.byteOffset + base.length))
    const reencode = (format: number, bits: number, write: (b: Buffer, i: number, v: number) => void) => {
      const width = bits / 8
      const out = Buffer.alloc(44 + samples.length * width)
      base.copy(out, 0, 0, 44)
      out.writeUInt16LE(format, 20)
      out.writeUInt32LE(22_050 * width, 28)
      out.writeUInt16LE(width, 32)
      out.writeUInt16LE(bits, 34)
      out.writeUInt32LE(samples.length * width, 40)
      for (const [i, v] of samples.entries()) write(out, 44 + i * width, v / 32768)
      return out
    }
    const variants = [
      reencode(1, 8, (b, at, v) => b.writeUInt8(Math.round(v * 127 + 128), at)),
      reencode(1, 24, (b, at, v) => b.writeIntLE(Math.round(v * 8_388_607), at, 3)),
      reencode(3, 32, (b, at, v) => b.writeFloatLE(v, at)),
    ]
    for (const bytes of variants) {
      const pcm = decodeWav(bytes)
      expect(pcm?.sampleRate).toBe(11_025) // averaged down to at most 16 kHz
      expect(analysePcm(pcm!).pitchHz).toBeCloseTo(200, -1)
    }
    expect(decodeWav(Buffer.from("RIFF....WAVEjunk"))).toBeUndefined()
    expect(decodeWav(Buffer.from("just some text, renamed .wav"))).toBeUndefined()
  })
})

describe("samples that are not decoded here (MP3, OGG, WebM)", () => {
  it("derive their voice from the bytes: stable, and different samples differ", () => {
    const a = mp3({ hz: 110, seconds: 6 })
    const p = deriveVoiceParams({ audio: a, format: "mp3" })
    expect(p).toMatchObject({ method: "metadata", pitch_hz: null, syllables_per_second: null, energy_dbfs: null })
    expect(p.pitch).toBeGreaterThanOrEqual(-0.6)
    expect(p.pitch).toBeLessThanOrEqual(0.6)
    expect(deriveVoiceParams({ audio: a, format: "mp3" })).toEqual(p)
    const others = [150, 190, 230, 270].map((hz) =>
      deriveVoiceParams({ audio: mp3({ hz, seconds: 6 }), format: "mp3" }),
    )
    expect(new Set([p, ...others].map((x) => JSON.stringify(x))).size).toBe(5)
  })
})

describe("a cloned voice is never a catalogue persona's", () => {
  it("moves the pitch off every persona of its gender by at least 0.1", () => {
    for (const v of VOICES) {
      const params = deriveVoiceParams({ audio: wav({ hz: 200, seconds: 6 }), format: "wav" })
      const moved = distinctFromCatalogue({ ...params, gender: v.speech.gender, pitch: v.speech.pitch })
      for (const other of VOICES.filter((o) => o.speech.gender === v.speech.gender))
        expect(Math.abs(moved.pitch - other.speech.pitch)).toBeGreaterThanOrEqual(0.0999)
    }
  })

  const sim = makeSimSpeech({ workers: 1 })
  afterAll(() => sim.close())

  it("the simulator speaks a clone in a voice that differs from the persona's", async () => {
    const anya = findVoice("anya")!
    const cloned = await sim.cloneVoice({
      name: "Sine",
      audio: wav({ hz: 230, seconds: 6 }),
      format: "wav",
      mime: "audio/wav",
      duration_ms: 6000,
    })
    expect(cloned.vendor_voice_id).toBeNull()
    const text = "Hello, this is a quick call about your account."
    const persona = await sim.synthesize({ text, voice: anya.speech })
    const clone = await sim.synthesize({
      text,
      voice: clonedSpeechVoice(distinctFromCatalogue(cloned.params), anya.language, null),
    })
    expect(Buffer.from(clone.audio).equals(Buffer.from(persona.audio))).toBe(false)
    expect(clone.duration_ms).toBeGreaterThan(500)
  })
})
