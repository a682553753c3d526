// G.711 μ-law against the standard's fixed points and its own inverse over every value.
import { describe, expect, it } from "vitest"
import { decode, decodeSample, encode, encodeSample, FRAME_SAMPLES, frames } from "../../src/providers/audio/g711.js"

describe("G.711 μ-law", () => {
  it("meets the standard's fixed points", () => {
    expect(encodeSample(0)).toBe(0xff)
    expect(encodeSample(-1)).toBe(0x7f)
    expect(encodeSample(32_767)).toBe(0x80)
    expect(encodeSample(-32_768)).toBe(0x00)
    expect(decodeSample(0xff)).toBe(0)
    expect(decodeSample(0x80)).toBe(32_124)
    expect(decodeSample(0x00)).toBe(-32_124)
    expect(decodeSample(0xf0)).toBe(120)
  })

  it("decodes then encodes every byte back to itself (but the two zeros)", () => {
    for (let b = 0; b < 256; b++) {
      const again = encodeSample(decodeSample(b))
      expect(again, `byte ${b}`).toBe(b === 0x7f ? 0xff : b)
    }
  })

  it("keeps every 16-bit sample within about half its segment's step", () => {
    for (let x = -32_768; x <= 32_767; x++) {
      const b = encodeSample(x)
      const step = 1 << ((((~b & 0xff) >> 4) & 0x07) + 3)
      const clipped = Math.max(-32_635, Math.min(32_635, x))
      const error = Math.abs(decodeSample(b) - clipped)
      if (error > step / 2 + 4) throw new Error(`x=${x} → ${decodeSample(b)} (step ${step})`)
    }
  })

  it("encodes and decodes whole buffers and cuts 20 ms frames, the last padded with silence", () => {
    const tone = new Int16Array(400).map((_, i) => Math.round(8_000 * Math.sin((2 * Math.PI * 440 * i) / 8_000)))
    const bytes = encode(tone)
    expect(bytes).toHaveLength(400)
    expect(Array.from(decode(bytes)).every((v, i) => Math.abs(v - tone[i]!) <= 256)).toBe(true)
    const cut = frames(bytes)
    expect(cut.map((f) => f.length)).toEqual([FRAME_SAMPLES, FRAME_SAMPLES, FRAME_SAMPLES])
    expect(Array.from(cut[2]!.subarray(80))).toEqual(new Array(80).fill(0xff))
    expect(Buffer.concat(cut).subarray(0, 400).equals(Buffer.from(bytes))).toBe(true)
  })

  it("decodes into an array it is given (a per-frame path reuses one), and refuses one too short", () => {
    const frame = encode(new Int16Array(FRAME_SAMPLES).map((_, i) => i * 50))
    const out = new Int16Array(FRAME_SAMPLES)
    expect(decode(frame, out)).toBe(out)
    expect(Array.from(out)).toEqual(Array.from(decode(frame)))
    expect(() => decode(frame, new Int16Array(10))).toThrow(RangeError)
  })
})
