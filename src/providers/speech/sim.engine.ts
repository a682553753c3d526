// The offline speech simulator's engine: eSpeak (mespeak, compiled to JS) renders 22.05 kHz PCM
// and @breezystack/lamejs encodes it to mono MP3. Synchronous and CPU-bound: it runs in sim.worker.ts.
import { createRequire } from "node:module"
import { Mp3Encoder } from "@breezystack/lamejs"
import {
  MAX_SPEECH_TEXT_CHARS,
  type SpeechRequest,
  SpeechSynthesisError,
  type SpeechVoice,
  type SynthesizedAudio,
} from "./speech.interface.js"

const MP3_KBPS = 48

/*
 * mespeak's eSpeak build has a bump allocator whose free() does nothing, and every run
 * re-initialises the engine, so each call leaks ~600 kB of its fixed 50 MB heap whatever the text
 * length. Around the 80th call the heap overflows, the dictionary reads back as garbage and the
 * following call aborts V8 itself (an uncatchable fatal error that kills the process). mespeak's
 * own recovery hook for this is never wired up, so we replace the engine well before that point.
 */
const RUNS_PER_ENGINE = 40

/*
 * mespeak ships British (en, en-rp, en-n, en-sc, en-wm) and American (en-us) English only.
 * Indian and Australian English have no voice of their own, so each gets the nearest one:
 * Scottish English shares Indian English's tapped, rhotic r and its monophthong vowels in
 * "face" and "goat"; West Midlands English has the wide, shifted diphthongs of broad Australian.
 *
 * There is no Hindi voice in mespeak at all. Hindi text (written romanised) is read by the
 * Scottish English voice with English spelling rules: it keeps r tapped and vowels pure, which is
 * nearer Hindi than the other voices, but it is an English voice reading Hindi words, audibly
 * foreign to a Hindi speaker. Real Hindi needs a real provider.
 */
const VOICE_FILE_BY_LANGUAGE: Readonly<Record<string, string>> = {
  en: "en/en",
  "en-gb": "en/en-rp",
  "en-us": "en/en-us",
  "en-in": "en/en-sc",
  "en-au": "en/en-wm",
  "en-nz": "en/en-wm",
  "en-scotland": "en/en-sc",
  hi: "en/en-sc",
  "hi-in": "en/en-sc",
}

/** en/en first: it carries the en_dict dictionary the other English voice files only point at. */
const VOICE_FILES = ["en/en", "en/en-us", "en/en-rp", "en/en-sc", "en/en-n", "en/en-wm"] as const

/** eSpeak's built-in timbre variants, the pool that SpeechVoice.variant indexes into. */
const VARIANTS = {
  female: ["f1", "f2", "f3", "f4", "f5"],
  male: ["m1", "m2", "m3", "m4", "m5", "m6", "m7"],
} as const

const DEFAULT_WPM = 175

export interface MeSpeakArgs {
  readonly rawdata: "array"
  readonly voice: string
  readonly variant: string
  /** 0–99, 50 neutral. */
  readonly pitch: number
  /** Words per minute, 80–450. */
  readonly speed: number
}

/** The part of mespeak's CommonJS API used here; it ships no types. */
interface MeSpeak {
  loadConfig(data: unknown): void
  loadVoice(data: unknown): void
  /** With rawdata "array": the WAV file as unsigned byte values, or null when not ready. */
  speak(text: string, args: MeSpeakArgs): number[] | null
}

interface Engine {
  readonly lib: MeSpeak
  runs: number
}

const requireCjs = createRequire(import.meta.url)

let engineData: { config: unknown; voices: unknown[] } | undefined
let engine: Engine | undefined

/*
 * mespeak writes diagnostics with console.* (including a warning on every load in Node), and its
 * eSpeak build captures console.warn once, at construction, as its stdout/stderr printer. While
 * the engine runs, console is pointed at this one stable function, which collects into the
 * current call's list: the product's output stays clean and engine complaints become signals.
 */
let engineMessages: string[] | undefined
const engineConsole = (...args: unknown[]): void => {
  engineMessages?.push(args.map(String).join(" "))
}

function quietly<T>(run: () => T): { value: T; messages: string[] } {
  const saved = { log: console.log, info: console.info, warn: console.warn, error: console.error }
  const messages: string[] = []
  engineMessages = messages
  Object.assign(console, { log: engineConsole, info: engineConsole, warn: engineConsole, error: engineConsole })
  try {
    return { value: run(), messages }
  } finally {
    Object.assign(console, saved)
    engineMessages = undefined
  }
}

function loadEngineData(): { config: unknown; voices: unknown[] } {
  engineData ??= {
    config: requireCjs("mespeak/src/mespeak_config.json"),
    voices: VOICE_FILES.map((file) => requireCjs(`mespeak/voices/${file}.json`)),
  }
  return engineData
}

function newEngine(): Engine {
  const data = loadEngineData()
  // mespeak holds its one eSpeak instance in module scope: a fresh module is a fresh engine.
  const entry = requireCjs.resolve("mespeak")
  delete requireCjs.cache[entry]
  const { value: lib } = quietly(() => {
    const lib = requireCjs(entry) as MeSpeak
    lib.loadConfig(data.config)
    for (const voice of data.voices) lib.loadVoice(voice)
    return lib
  })
  return { lib, runs: 0 }
}

interface Pcm {
  readonly samples: Int16Array
  readonly sampleRate: number
}

/** Reads eSpeak's WAV output; undefined when it is not the 16-bit mono PCM eSpeak writes. */
function parseWav(bytes: Uint8Array): Pcm | undefined {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const tag = (at: number): string => String.fromCharCode(...bytes.subarray(at, at + 4))
  if (bytes.length < 12 || tag(0) !== "RIFF" || tag(8) !== "WAVE") return undefined
  let sampleRate = 0
  let at = 12
  while (at + 8 <= bytes.length) {
    const id = tag(at)
    const size = view.getUint32(at + 4, true)
    const body = at + 8
    if (id === "fmt ") {
      if (size < 16 || body + 16 > bytes.length) return undefined
      const format = view.getUint16(body, true)
      const channels = view.getUint16(body + 2, true)
      const bits = view.getUint16(body + 14, true)
      if (format !== 1 || channels !== 1 || bits !== 16) return undefined
      sampleRate = view.getUint32(body + 4, true)
    } else if (id === "data") {
      if (sampleRate === 0) return undefined
      // eSpeak streams the file, so trust the bytes present over the declared size.
      const count = Math.floor(Math.min(size, bytes.length - body) / 2)
      const samples = new Int16Array(count)
      for (let i = 0; i < count; i++) samples[i] = view.getInt16(body + i * 2, true)
      return { samples, sampleRate }
    }
    at = body + size + (size % 2)
  }
  return undefined
}

function encodeMp3(pcm: Pcm): Uint8Array {
  const encoder = new Mp3Encoder(1, pcm.sampleRate, MP3_KBPS)
  const parts: Uint8Array[] = []
  // lamejs hands back Int8Array views despite its typings; copy them out as unsigned bytes.
  const keep = (chunk: ArrayBufferView): void => {
    if (chunk.byteLength > 0) parts.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength).slice())
  }
  const block = 1152
  for (let i = 0; i < pcm.samples.length; i += block) keep(encoder.encodeBuffer(pcm.samples.subarray(i, i + block)))
  keep(encoder.flush())
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

function voiceFileFor(language: string): string | undefined {
  const tag = language.trim().toLowerCase().replace(/_/g, "-")
  return VOICE_FILE_BY_LANGUAGE[tag] ?? VOICE_FILE_BY_LANGUAGE[tag.split("-")[0] ?? ""]
}

function engineArgs(voice: SpeechVoice): MeSpeakArgs {
  const file = voiceFileFor(voice.language)
  if (file === undefined) {
    throw new SpeechSynthesisError("UNSUPPORTED_VOICE", `the simulator has no voice for language "${voice.language}"`)
  }
  if (!Number.isFinite(voice.pitch) || voice.pitch < -1 || voice.pitch > 1) {
    throw new SpeechSynthesisError("UNSUPPORTED_VOICE", `pitch must be between -1 and 1, got ${voice.pitch}`)
  }
  if (!Number.isFinite(voice.speed) || voice.speed < 0.5 || voice.speed > 2) {
    throw new SpeechSynthesisError("UNSUPPORTED_VOICE", `speed must be between 0.5 and 2, got ${voice.speed}`)
  }
  const pool = VARIANTS[voice.gender]
  const slot = Math.abs(Math.trunc(voice.variant ?? 0)) % pool.length
  return {
    rawdata: "array",
    voice: file,
    variant: pool[slot] ?? pool[0],
    pitch: Math.round(50 + voice.pitch * 40),
    speed: Math.round(DEFAULT_WPM * voice.speed),
  }
}

/** What eSpeak should read: one line of printable text that cannot be taken for an option. */
function speakableText(text: string): string {
  const flat = text
    .normalize("NFC")
    .replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]+/gu, " ")
    .replace(/\s+/g, " ")
    .trim()
  // The text reaches eSpeak as its last command-line argument.
  return flat.startsWith("-") ? ` ${flat}` : flat
}

/**
 * One eSpeak run. A healthy run prints nothing; any complaint (e.g. "Bad data" from an exhausted
 * heap) means the engine's state is suspect and its next run could abort the process, so the
 * engine is dropped. Output from a suspect run is discarded unless the engine was fresh.
 */
function render(text: string, args: MeSpeakArgs): Pcm | undefined {
  if (engine !== undefined && engine.runs >= RUNS_PER_ENGINE) engine = undefined
  if (engine === undefined) {
    try {
      engine = newEngine()
    } catch (err) {
      throw new SpeechSynthesisError("ENGINE_FAILURE", "could not load the mespeak engine", { cause: err })
    }
  }
  const current = engine
  current.runs++
  let run: { value: number[] | null; messages: string[] } | undefined
  try {
    run = quietly(() => current.lib.speak(text, args))
  } catch {
    run = undefined
  }
  const pcm = run?.value ? parseWav(Uint8Array.from(run.value)) : undefined
  if (pcm === undefined || run === undefined || run.messages.length > 0) {
    engine = undefined
    return pcm !== undefined && current.runs === 1 ? pcm : undefined
  }
  return pcm
}

/** A request checked and turned into engine input; plain data, so it can cross to a worker. */
export interface PreparedSpeech {
  readonly text: string
  readonly args: MeSpeakArgs
}

/** The cheap checks, without touching the engine. Throws SpeechSynthesisError. */
export function prepareSpeech(req: SpeechRequest): PreparedSpeech {
  if (req.text.length > MAX_SPEECH_TEXT_CHARS) {
    throw new SpeechSynthesisError(
      "TEXT_TOO_LONG",
      `text is ${req.text.length} characters; the limit is ${MAX_SPEECH_TEXT_CHARS}`,
    )
  }
  const text = speakableText(req.text)
  if (text === "") throw new SpeechSynthesisError("EMPTY_TEXT", "text has nothing to speak")
  return { text, args: engineArgs(req.voice) }
}

/** Renders and encodes a prepared request; blocks for as long as eSpeak runs (~200–400 ms a line). */
export function renderSpeech(prepared: PreparedSpeech): SynthesizedAudio {
  const { text, args } = prepared
  // A suspect run is retried once, on a fresh engine since render() dropped the old one.
  const pcm = render(text, args) ?? render(text, args)
  if (pcm === undefined) throw new SpeechSynthesisError("ENGINE_FAILURE", "eSpeak produced no usable audio")
  if (pcm.samples.length === 0) throw new SpeechSynthesisError("EMPTY_TEXT", "text has nothing to speak")
  return {
    audio: encodeMp3(pcm),
    mime: "audio/mpeg",
    duration_ms: Math.round((pcm.samples.length * 1000) / pcm.sampleRate),
    sample_rate: pcm.sampleRate,
  }
}
