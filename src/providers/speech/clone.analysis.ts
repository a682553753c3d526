// What a voice sample says about its voice: WAV decoded to mono PCM, then pitch (normalised
// autocorrelation), syllable rate (peaks of the energy envelope) and level, mapped onto SpeechVoice.
import { createHash } from "node:crypto"
import type { ClonedVoiceParams, SpeechGender, VoiceSample } from "./speech.interface.js"

/** Mono PCM in [-1, 1]. */
export interface MonoPcm {
  readonly samples: Float32Array
  readonly sampleRate: number
}

/** Analysis needs nothing above this: the sample is averaged down to it (a crude low-pass). */
const ANALYSIS_RATE = 16_000
/** Only the first minute is decoded: plenty for pitch and rate, and a bound on the time taken. */
const ANALYSIS_MAX_S = 60
/** The hash that seeds what is not measured covers the length and at most this much of the bytes. */
const SEED_BYTES = 4 * 1024 * 1024
const MIN_F0_HZ = 60
const MAX_F0_HZ = 400
/** Envelope windows: 10 ms. */
const WINDOW_S = 0.01
/** Pitch frames: 40 ms, at most this many spread over the voiced part. */
const FRAME_S = 0.04
const MAX_PITCH_FRAMES = 150
/** A frame is periodic when its best normalised autocorrelation reaches this. */
const VOICING = 0.6
/** Silences longer than this are pauses, not gaps between syllables, and do not count as speaking. */
const PAUSE_S = 0.3
/** Typical conversational English, ~4 syllables a second: the rate SpeechVoice.speed 1 stands for. */
const NORMAL_SYLLABLES_PER_S = 4
/** Median speaking pitch of men and women: SpeechVoice.pitch 0 of each gender. */
const CENTRE_HZ: Record<SpeechGender, number> = { male: 120, female: 210 }
const GENDER_SPLIT_HZ = 160
/** log2 of the pitch ratio from the centre that maps to ±1 (about ±0.7 octave). */
const PITCH_OCTAVES = 0.7

const WAVE_FORMAT_PCM = 1
const WAVE_FORMAT_FLOAT = 3
const WAVE_FORMAT_EXTENSIBLE = 0xfffe

const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x))
const round2 = (x: number) => Math.round(x * 100) / 100

/**
 * Decodes a RIFF/WAVE file of integer PCM (8, 16, 24 or 32 bit) or IEEE float (32 or 64 bit), any
 * channel count, to mono averaged down to at most 16 kHz (its first minute); undefined for anything else.
 */
export function decodeWav(bytes: Uint8Array): MonoPcm | undefined {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const tag = (at: number): string => String.fromCharCode(...bytes.subarray(at, at + 4))
  if (bytes.length < 12 || tag(0) !== "RIFF" || tag(8) !== "WAVE") return undefined
  let fmt: { format: number; channels: number; rate: number; bits: number; align: number } | undefined
  let at = 12
  while (at + 8 <= bytes.length) {
    const id = tag(at)
    const size = view.getUint32(at + 4, true)
    const body = at + 8
    if (id === "fmt ") {
      if (size < 16 || body + 16 > bytes.length) return undefined
      let format = view.getUint16(body, true)
      // WAVE_FORMAT_EXTENSIBLE names the real format in the first two bytes of its sub-format GUID.
      if (format === WAVE_FORMAT_EXTENSIBLE && size >= 40 && body + 26 <= bytes.length)
        format = view.getUint16(body + 24, true)
      fmt = {
        format,
        channels: view.getUint16(body + 2, true),
        rate: view.getUint32(body + 4, true),
        align: view.getUint16(body + 12, true),
        bits: view.getUint16(body + 14, true),
      }
    } else if (id === "data") {
      if (fmt === undefined) return undefined
      // Streamed recorders leave the size at 0 or 0xFFFFFFFF: trust the bytes present.
      const end = size === 0 || body + size > bytes.length ? bytes.length : body + size
      return readFrames(view, body, end, fmt)
    }
    at = body + size + (size % 2)
  }
  return undefined
}

function sampleReader(view: DataView, format: number, bits: number): ((offset: number) => number) | undefined {
  if (format === WAVE_FORMAT_FLOAT && bits === 32) return (o) => view.getFloat32(o, true)
  if (format === WAVE_FORMAT_FLOAT && bits === 64) return (o) => view.getFloat64(o, true)
  if (format !== WAVE_FORMAT_PCM) return undefined
  if (bits === 8) return (o) => (view.getUint8(o) - 128) / 128
  if (bits === 16) return (o) => view.getInt16(o, true) / 32768
  if (bits === 24)
    return (o) => (view.getUint8(o) | (view.getUint8(o + 1) << 8) | (view.getInt8(o + 2) << 16)) / 8388608
  if (bits === 32) return (o) => view.getInt32(o, true) / 2147483648
  return undefined
}

function readFrames(
  view: DataView,
  start: number,
  end: number,
  fmt: { format: number; channels: number; rate: number; bits: number; align: number },
): MonoPcm | undefined {
  const read = sampleReader(view, fmt.format, fmt.bits)
  const width = fmt.bits / 8
  if (read === undefined || fmt.channels < 1 || fmt.rate < 4000 || fmt.align < fmt.channels * width) return undefined
  const frames = Math.min(Math.floor((end - start) / fmt.align), ANALYSIS_MAX_S * fmt.rate)
  const factor = Math.max(1, Math.ceil(fmt.rate / ANALYSIS_RATE))
  const samples = new Float32Array(Math.floor(frames / factor))
  for (let out = 0; out < samples.length; out++) {
    let sum = 0
    for (let k = 0; k < factor; k++) {
      const frame = start + (out * factor + k) * fmt.align
      for (let c = 0; c < fmt.channels; c++) sum += read(frame + c * width)
    }
    samples[out] = sum / (factor * fmt.channels)
  }
  return { samples, sampleRate: fmt.rate / factor }
}

/** RMS of each 10 ms window. */
function envelope(pcm: MonoPcm): { rms: Float32Array; size: number } {
  const size = Math.max(1, Math.round(pcm.sampleRate * WINDOW_S))
  const rms = new Float32Array(Math.floor(pcm.samples.length / size))
  for (let w = 0; w < rms.length; w++) {
    let sum = 0
    for (let i = w * size; i < (w + 1) * size; i++) sum += pcm.samples[i]! ** 2
    rms[w] = Math.sqrt(sum / size)
  }
  return { rms, size }
}

function percentile(values: Float32Array, p: number): number {
  if (values.length === 0) return 0
  const sorted = Float32Array.from(values).sort()
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

/**
 * The fundamental frequency of one frame by normalised autocorrelation: the first lag whose peak
 * comes within 90% of the best one (later peaks at multiples of the period are as high), refined
 * by a parabola through its neighbours. Undefined for a frame that is not periodic.
 */
export function framePitch(x: Float32Array, sampleRate: number): number | undefined {
  const n = x.length
  const minLag = Math.max(2, Math.floor(sampleRate / MAX_F0_HZ))
  const maxLag = Math.min(Math.ceil(sampleRate / MIN_F0_HZ), Math.floor(n / 2))
  if (maxLag <= minLag + 2) return undefined
  let mean = 0
  for (let i = 0; i < n; i++) mean += x[i]!
  mean /= n
  const y = new Float32Array(n)
  const squares = new Float64Array(n + 1)
  for (let i = 0; i < n; i++) {
    y[i] = x[i]! - mean
    squares[i + 1] = squares[i]! + y[i]! ** 2
  }
  const r = new Float64Array(maxLag + 2)
  let best = 0
  for (let lag = minLag - 1; lag <= maxLag + 1; lag++) {
    let cross = 0
    for (let i = 0; i + lag < n; i++) cross += y[i]! * y[i + lag]!
    const norm = Math.sqrt(squares[n - lag]! * (squares[n]! - squares[lag]!))
    r[lag] = norm > 0 ? cross / norm : 0
    if (lag >= minLag && lag <= maxLag && r[lag]! > best) best = r[lag]!
  }
  if (best < VOICING) return undefined
  for (let lag = minLag; lag <= maxLag; lag++) {
    const v = r[lag]!
    if (v < 0.9 * best || v < r[lag - 1]! || v < r[lag + 1]!) continue
    const a = r[lag - 1]!
    const c = r[lag + 1]!
    const denom = a - 2 * v + c
    const shift = denom === 0 ? 0 : clamp((0.5 * (a - c)) / denom, -0.5, 0.5)
    return sampleRate / (lag + shift)
  }
  return undefined
}

export interface PcmAnalysis {
  /** Median F0 of the periodic frames; undefined when fewer than three were found. */
  readonly pitchHz: number | undefined
  readonly syllablesPerSecond: number | undefined
  readonly energyDbfs: number | undefined
}

/** Pitch, syllable rate and level of a recording of one voice. */
export function analysePcm(pcm: MonoPcm): PcmAnalysis {
  const { rms, size } = envelope(pcm)
  const loud = percentile(rms, 0.95)
  const threshold = Math.max(loud * 0.25, 1e-4)
  const voiced: number[] = []
  let power = 0
  for (let w = 0; w < rms.length; w++) {
    if (rms[w]! <= threshold) continue
    voiced.push(w)
    power += rms[w]! ** 2
  }
  if (voiced.length === 0) return { pitchHz: undefined, syllablesPerSecond: undefined, energyDbfs: undefined }
  const energyDbfs = round2(10 * Math.log10(power / voiced.length))

  const frame = Math.round(pcm.sampleRate * FRAME_S)
  const step = Math.max(1, Math.floor(voiced.length / MAX_PITCH_FRAMES))
  const pitches: number[] = []
  for (let k = 0; k < voiced.length; k += step) {
    const start = voiced[k]! * size
    if (start + frame > pcm.samples.length) break
    const f0 = framePitch(pcm.samples.subarray(start, start + frame), pcm.sampleRate)
    if (f0 !== undefined) pitches.push(f0)
  }
  const pitchHz = pitches.length >= 3 ? round2(median(pitches)) : undefined
  return { pitchHz, syllablesPerSecond: syllableRate(rms, threshold), energyDbfs }
}

/**
 * Syllables a second while speaking: peaks of the smoothed envelope above the voicing threshold,
 * each separated from the last by a dip to under 75% of the lower of the two, over the time spent
 * speaking (long pauses left out).
 */
function syllableRate(rms: Float32Array, threshold: number): number | undefined {
  const smooth = new Float32Array(rms.length)
  for (let w = 0; w < rms.length; w++) {
    let sum = 0
    let n = 0
    for (let k = Math.max(0, w - 2); k <= Math.min(rms.length - 1, w + 2); k++, n++) sum += rms[k]!
    smooth[w] = sum / n
  }
  let peaks = 0
  let lastPeak = -1
  let dip = Number.POSITIVE_INFINITY
  for (let w = 1; w < smooth.length - 1; w++) {
    const v = smooth[w]!
    dip = Math.min(dip, v)
    if (v <= threshold || v < smooth[w - 1]! || v < smooth[w + 1]!) continue
    if (lastPeak >= 0 && dip >= 0.75 * Math.min(v, smooth[lastPeak]!)) {
      // No dip between them: one syllable, whose peak is the higher of the two.
      if (v > smooth[lastPeak]!) {
        lastPeak = w
        dip = v
      }
      continue
    }
    peaks++
    lastPeak = w
    dip = v
  }
  const pauseWindows = Math.round(PAUSE_S / WINDOW_S)
  let speaking = 0
  let silentRun = 0
  for (let w = 0; w < rms.length; w++) {
    if (rms[w]! > threshold) {
      speaking += silentRun < pauseWindows ? silentRun + 1 : 1
      silentRun = 0
    } else silentRun++
  }
  const seconds = speaking * WINDOW_S
  // Fewer than one pulse a second is no syllable rhythm at all (a held tone, music): unmeasured.
  const rate = seconds < 1 ? 0 : peaks / seconds
  return peaks < 3 || rate < 1 ? undefined : round2(rate)
}

/** SpeechVoice.pitch for a measured F0: ±0.7 octave around the gender's centre maps to ±1. */
export const pitchFromHz = (hz: number, gender: SpeechGender): number =>
  round2(clamp(Math.log2(hz / CENTRE_HZ[gender]) / PITCH_OCTAVES, -1, 1))

export const genderFromHz = (hz: number): SpeechGender => (hz < GENDER_SPLIT_HZ ? "male" : "female")

/**
 * The voice a sample describes. WAV is measured; other formats (and a WAV with no periodic frame)
 * are not decoded here, so what cannot be measured is derived from a hash of the bytes: the same
 * sample always gives the same voice, and different samples are spread over the parameter space.
 */
export function deriveVoiceParams(sample: Pick<VoiceSample, "audio" | "format">): ClonedVoiceParams {
  const h = createHash("sha256")
    .update(String(sample.audio.length))
    .update(sample.audio.subarray(0, SEED_BYTES))
    .digest()
  const pcm = sample.format === "wav" ? decodeWav(sample.audio) : undefined
  const measured = pcm === undefined ? undefined : analysePcm(pcm)
  const hz = measured?.pitchHz
  const gender: SpeechGender = hz !== undefined ? genderFromHz(hz) : (h[0]! & 1) === 1 ? "female" : "male"
  const rate = measured?.syllablesPerSecond
  return {
    gender,
    pitch: hz !== undefined ? pitchFromHz(hz, gender) : round2((h[1]! / 255) * 1.2 - 0.6),
    speed:
      rate !== undefined
        ? round2(clamp(rate / NORMAL_SYLLABLES_PER_S, 0.75, 1.35))
        : pcm !== undefined
          ? 1
          : round2(0.85 + (h[2]! / 255) * 0.3),
    variant: h[3]! % 16,
    method: measured === undefined ? "metadata" : "pcm",
    pitch_hz: hz ?? null,
    syllables_per_second: rate ?? null,
    energy_dbfs: measured?.energyDbfs ?? null,
  }
}
