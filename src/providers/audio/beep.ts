// A voicemail's beep, in phone audio: a steady tone (about 400 to 2,000 Hz) held for at least
// 200 ms. Speech is neither: its pitch and loudness move from one 20 ms frame to the next, while
// a beep's zero crossings and level stay put. Pure: one frame of 16-bit samples in, a verdict out.

/** Frames a tone must hold (10 × 20 ms). */
const BEEP_FRAMES = 10
/** A frame's zero crossings for 400–2,000 Hz at 8 kHz (two a cycle, 160 samples a frame). */
const MIN_CROSSINGS = 16
const MAX_CROSSINGS = 80
/** Loud enough to be a beep (RMS, about -30 dBFS). */
const MIN_RMS = 1000

export class BeepDetector {
  private held = 0
  private crossings = -1
  private rms = 0

  /** Judges one frame; true on the frame that completes a beep (once per beep). */
  push(pcm: Int16Array): boolean {
    let sum = 0
    let zc = 0
    for (let i = 0; i < pcm.length; i++) {
      const x = pcm[i]!
      sum += x * x
      if (i > 0 && x >= 0 !== pcm[i - 1]! >= 0) zc++
    }
    const rms = Math.sqrt(sum / pcm.length)
    const steady =
      rms >= MIN_RMS &&
      zc >= MIN_CROSSINGS &&
      zc <= MAX_CROSSINGS &&
      (this.held === 0 || (Math.abs(zc - this.crossings) <= 2 && Math.abs(rms - this.rms) <= 0.25 * this.rms))
    if (!steady) {
      this.held = rms >= MIN_RMS && zc >= MIN_CROSSINGS && zc <= MAX_CROSSINGS ? 1 : 0
      this.crossings = zc
      this.rms = rms
      return false
    }
    if (this.held === 0) {
      this.crossings = zc
      this.rms = rms
    }
    this.held++
    return this.held === BEEP_FRAMES
  }
}

/** A beep as the simulator plays it: `ms` of a `hz` tone at about -12 dBFS, as 16-bit frames of 160. */
export function beepFrames(ms = 500, hz = 1000): Int16Array[] {
  const frames: Int16Array[] = []
  for (let f = 0; f < ms / 20; f++)
    frames.push(
      Int16Array.from({ length: 160 }, (_, i) =>
        Math.round(8000 * Math.sin((2 * Math.PI * hz * (f * 160 + i)) / 8000)),
      ),
    )
  return frames
}
