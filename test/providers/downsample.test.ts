// flite's 16 kHz output brought to the phone's 8 kHz: the same samples as the filter written
// plainly (its taps over every input sample, then every other sample), edges included, and 8 kHz
// passed through.
import { describe, expect, it } from "vitest"
import { downsampleToPhone, TAPS } from "../../src/providers/speech/flite.phone.js"

/** The filter written plainly: the 31 taps over every sample, zero outside the signal. */
function reference(pcm: Int16Array): Int16Array {
  const n = TAPS.length
  const taps = TAPS
  const out = new Int16Array(pcm.length >> 1)
  for (let o = 0; o < out.length; o++) {
    let acc = 0
    for (let k = 0; k < n; k++) {
      const i = 2 * o + k - 15
      if (i >= 0 && i < pcm.length) acc += pcm[i]! * taps[k]!
    }
    out[o] = Math.max(-32768, Math.min(32767, Math.round(acc)))
  }
  return out
}

describe("downsampling flite's audio for the phone", () => {
  it("gives the plain filter's samples, at the edges too, and clips at full scale", () => {
    let seed = 7
    const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1
    const pcm = Int16Array.from({ length: 16_003 }, (_, i) =>
      Math.round(20_000 * Math.sin(i / 7) + 12_000 * rand() + (i % 997 === 0 ? 32_767 : 0)),
    )
    const ours = downsampleToPhone({ rate: 16_000, pcm })
    const plain = reference(pcm)
    expect(ours.length).toBe(8001)
    let worst = 0
    for (let i = 0; i < ours.length; i++) worst = Math.max(worst, Math.abs(ours[i]! - plain[i]!))
    expect(worst).toBeLessThanOrEqual(1) // floating-point order of the sums
    const phone = Int16Array.from([1, 2, 3])
    expect(downsampleToPhone({ rate: 8000, pcm: phone })).toBe(phone)
    expect(() => downsampleToPhone({ rate: 22_050, pcm: phone })).toThrow(/8 or 16 kHz/)
  })
})
