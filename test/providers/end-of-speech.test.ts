// End of speech (src/providers/audio/end-of-speech.ts) over voice activity (src/providers/audio/vad.ts,
// WebRTC's VAD): the rules on hand-made verdicts, then the whole path on real speech synthesised by
// flite and sent through the phone's μ-law, with silence and line noise between the utterances.
import { execFileSync } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import {
  DEFAULT_END_OF_SPEECH,
  EndOfSpeech,
  FRAME_MS,
  type SpeechEvent,
} from "../../src/providers/audio/end-of-speech.js"
import { decode, encode, FRAME_SAMPLES, PHONE_RATE } from "../../src/providers/audio/g711.js"
import { Vad } from "../../src/providers/audio/vad.js"

const FLITE = "/usr/bin/flite"
/** CI installs flite (.ci/run) and sets this, so the speech tests cannot skip there. */
const requireFlite = process.env.REQUIRE_FLITE === "1"

const run = (verdicts: boolean[], eos = new EndOfSpeech()) =>
  verdicts.flatMap((v) => {
    const e = eos.push(v)
    return e === undefined ? [] : [e]
  })
const frames = (ms: number, voiced: boolean) => Array.from({ length: ms / FRAME_MS }, () => voiced)

describe("EndOfSpeech", () => {
  it("starts after the minimum of speech and ends after the silence window", () => {
    const events = run([...frames(400, false), ...frames(1000, true), ...frames(600, false)])
    expect(events).toEqual([
      { kind: "speech_start", atMs: 400 },
      { kind: "speech_end", atMs: 1400, durationMs: 1000 },
    ])
  })

  it("ignores a cough shorter than the minimum, and keeps one utterance through pauses under the window", () => {
    const events = run([
      ...frames(200, false),
      ...frames(60, true), // a cough: 60 ms < 120 ms
      ...frames(500, false),
      ...frames(600, true),
      ...frames(300, false), // a pause inside the sentence
      ...frames(400, true),
      ...frames(600, false),
    ])
    expect(events).toEqual([
      { kind: "speech_start", atMs: 760 },
      { kind: "speech_end", atMs: 2060, durationMs: 1300 },
    ])
  })

  it("lets a dip of two frames between syllables count towards the start, and follows its own window", () => {
    const dip = [true, true, true, false, false, true, true, true]
    expect(run(dip)).toEqual([{ kind: "speech_start", atMs: 0 }])
    const eos = new EndOfSpeech({ silenceMs: 200, minSpeechMs: 40 })
    expect(run([true, true, ...frames(200, false)], eos)).toEqual([
      { kind: "speech_start", atMs: 0 },
      { kind: "speech_end", atMs: 40, durationMs: 40 },
    ])
  })
})

/** flite's speech for `text` at 8 kHz (its voices speak 16 kHz; every other sample, pairs averaged). */
function speak(text: string, dir: string): Int16Array {
  const wav = join(dir, "line.wav")
  execFileSync(FLITE, ["-voice", "slt", "-t", text, "-o", wav])
  const b = readFileSync(wav)
  const rate = b.readUInt32LE(24)
  const data = b.indexOf("data", 12)
  const pcm = new Int16Array(b.buffer.slice(b.byteOffset + data + 8, b.byteOffset + b.length))
  if (rate === PHONE_RATE) return pcm
  const step = rate / PHONE_RATE
  return Int16Array.from({ length: Math.floor(pcm.length / step) }, (_, i) => {
    const j = Math.floor(i * step)
    return Math.round((pcm[j]! + (pcm[j + 1] ?? pcm[j]!)) / 2)
  })
}

/** Where a clip is audible, in ms from its start (flite pads its lines with quiet). */
function audible(pcm: Int16Array): { fromMs: number; toMs: number } {
  let first = -1
  let last = -1
  for (let i = 0; i < pcm.length; i++)
    if (Math.abs(pcm[i]!) > 800) {
      if (first < 0) first = i
      last = i
    }
  return { fromMs: (first / PHONE_RATE) * 1000, toMs: (last / PHONE_RATE) * 1000 }
}

/** Line noise at about -50 dBFS, deterministic. */
function noise(ms: number, seed: number): Int16Array {
  let x = seed
  return Int16Array.from({ length: (ms / 1000) * PHONE_RATE }, () => {
    // xorshift32: white, and exact in 32-bit integer arithmetic.
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    return ((x >>> 0) % 200) - 100
  })
}

describe.skipIf(!requireFlite && !existsSync(FLITE))("voice activity on speech over a phone line", () => {
  it("finds each utterance's start and its end within the silence window after it, and nothing in noise", async () => {
    const dir = mkdtempSync(join(tmpdir(), "parley-eos-"))
    try {
      const lines = [speak("Yes, I would like to renew my membership.", dir), speak("Can you do it for less?", dir)]
      // Line noise all through (about -50 dBFS), the two lines spoken over it 1 s and 1.5 s apart.
      const offsets = [1000, 1000 + (lines[0]!.length / PHONE_RATE) * 1000 + 1500]
      const end = offsets[1]! + (lines[1]!.length / PHONE_RATE) * 1000 + 1200
      const audio = noise(end - (end % FRAME_MS), 1)
      for (const [k, line] of lines.entries()) {
        const at = (offsets[k]! / 1000) * PHONE_RATE
        for (let i = 0; i < line.length; i++)
          audio[at + i] = Math.max(-32768, Math.min(32767, audio[at + i]! + line[i]!))
      }
      // As the carrier hands it over: μ-law bytes, 20 ms at a time, decoded for the detector.
      const vad = await Vad.create()
      const eos = new EndOfSpeech()
      const events: SpeechEvent[] = []
      for (let i = 0; i + FRAME_SAMPLES <= audio.length; i += FRAME_SAMPLES) {
        const frame = decode(encode(audio.subarray(i, i + FRAME_SAMPLES)))
        const e = eos.push(vad.voiced(frame))
        if (e !== undefined) events.push(e)
      }
      vad.free()

      expect(events.map((e) => e.kind)).toEqual(["speech_start", "speech_end", "speech_start", "speech_end"])
      for (const [k, line] of [lines[0]!, lines[1]!].entries()) {
        const spoken = audible(line)
        const from = offsets[k]! + spoken.fromMs
        const to = offsets[k]! + spoken.toMs
        const start = events[k * 2]!
        const end = events[k * 2 + 1]!
        expect(Math.abs(start.atMs - from), `utterance ${k + 1} start`).toBeLessThanOrEqual(200)
        // The end is said once the silence window has passed after the last voiced frame.
        expect(end.atMs, `utterance ${k + 1} end`).toBeGreaterThanOrEqual(to - 200)
        expect(end.atMs, `utterance ${k + 1} end`).toBeLessThanOrEqual(to + 300)
        expect(end.kind === "speech_end" && end.durationMs).toBeGreaterThan(500)
      }
      // Noise alone is never speech.
      const quiet = await Vad.create()
      const alone = new EndOfSpeech()
      const n = noise(3000, 9)
      let heard = 0
      for (let i = 0; i + FRAME_SAMPLES <= n.length; i += FRAME_SAMPLES)
        if (alone.push(quiet.voiced(decode(encode(n.subarray(i, i + FRAME_SAMPLES))))) !== undefined) heard++
      quiet.free()
      expect(heard).toBe(0)
      expect(DEFAULT_END_OF_SPEECH.silenceMs).toBe(500)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("refuses a frame of the wrong size and a detector used after free", async () => {
    const vad = await Vad.create()
    expect(() => vad.voiced(new Int16Array(100))).toThrow(RangeError)
    vad.free()
    expect(() => vad.voiced(new Int16Array(FRAME_SAMPLES))).toThrow(/after free/)
  })
})
