// G.711 μ-law (PCMU), the audio of a telephone media stream: 8 kHz mono, one byte per sample,
// 160 bytes per 20 ms frame. Encoding follows ITU-T G.711 (bias 0x84, 14-bit magnitude, the
// byte inverted); decoding is a 256-entry table, so a frame costs 160 lookups either way.

/** Samples per second of a telephone stream, and per 20 ms frame. */
export const PHONE_RATE = 8_000
export const FRAME_SAMPLES = 160

const BIAS = 0x84
const CLIP = 32_635

/** One 16-bit linear sample → its μ-law byte. */
export function encodeSample(sample: number): number {
  let s = Math.max(-32_768, Math.min(32_767, Math.round(sample)))
  const sign = s < 0 ? 0x80 : 0
  if (sign !== 0) s = -s
  if (s > CLIP) s = CLIP
  s += BIAS
  let exponent = 7
  for (let mask = 0x4000; (s & mask) === 0 && exponent > 0; mask >>= 1) exponent--
  const mantissa = (s >> (exponent + 3)) & 0x0f
  return ~(sign | (exponent << 4) | mantissa) & 0xff
}

const DECODE = new Int16Array(256)
for (let b = 0; b < 256; b++) {
  const u = ~b & 0xff
  const exponent = (u >> 4) & 0x07
  const magnitude = ((((u & 0x0f) << 3) + BIAS) << exponent) - BIAS
  DECODE[b] = u & 0x80 ? -magnitude : magnitude
}

/** One μ-law byte → its 16-bit linear sample. */
export const decodeSample = (byte: number): number => DECODE[byte & 0xff]!

/** Linear 16-bit samples → μ-law bytes. */
export function encode(samples: Int16Array): Uint8Array {
  const out = new Uint8Array(samples.length)
  for (let i = 0; i < samples.length; i++) out[i] = encodeSample(samples[i]!)
  return out
}

/**
 * μ-law bytes → linear 16-bit samples, into `out` when given (a per-frame path reuses one array
 * rather than allocating 50 a second per call); `out` must hold `bytes.length` samples.
 */
export function decode(bytes: Uint8Array, out = new Int16Array(bytes.length)): Int16Array {
  if (out.length < bytes.length) throw new RangeError(`${bytes.length} samples do not fit in ${out.length}`)
  for (let i = 0; i < bytes.length; i++) out[i] = DECODE[bytes[i]!]!
  return out
}

/**
 * Cuts μ-law audio into 20 ms frames (160 bytes), the last padded with μ-law silence (0xff) so
 * every frame sent is whole.
 */
export function frames(bytes: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = []
  for (let at = 0; at < bytes.length; at += FRAME_SAMPLES) {
    const frame = new Uint8Array(FRAME_SAMPLES).fill(0xff)
    frame.set(bytes.subarray(at, Math.min(at + FRAME_SAMPLES, bytes.length)))
    out.push(frame)
  }
  return out
}

/** Two μ-law signals of one length heard together: their samples summed (clipped), as μ-law. */
export function mix(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length !== b.length) throw new RangeError(`cannot mix ${a.length} bytes with ${b.length}`)
  const out = new Uint8Array(a.length)
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!
    const y = b[i]!
    // Silence on either side (the common case: one side talks at a time) is the other side as it is.
    out[i] = x === 0xff || x === 0x7f ? y : y === 0xff || y === 0x7f ? x : encodeSample(DECODE[x]! + DECODE[y]!)
  }
  return out
}
