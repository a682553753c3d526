// Each persona's sample clip: synthesised once on first request, then served from memory and,
// given a cache directory, from <dir>/<id>.mp3 (+ <id>.json) by later processes too.
import { createHash, randomBytes } from "node:crypto"
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises"
import { join } from "node:path"
import type { SpeechProvider, SynthesizedAudio } from "../providers/speech/speech.interface.js"
import { findVoice, type Voice } from "./voices.catalog.js"

export interface VoiceSamples {
  /** The voice's sample clip; undefined for an unknown id. Rejects when synthesis fails. */
  get(id: string): Promise<SynthesizedAudio | undefined>
}

/** The JSON sidecar next to each cached MP3. */
interface Sidecar {
  readonly version: 1
  /** Provider, text and voice settings the clip was made from; any change re-synthesises. */
  readonly fingerprint: string
  readonly bytes: number
  readonly duration_ms: number
  readonly sample_rate: number
}

function fingerprint(providerName: string, voice: Voice): string {
  return createHash("sha256")
    .update(JSON.stringify([providerName, voice.sample_text, voice.speech]))
    .digest("hex")
}

function isSidecar(value: unknown): value is Sidecar {
  if (typeof value !== "object" || value === null) return false
  const v = value as Record<string, unknown>
  return (
    v.version === 1 &&
    typeof v.fingerprint === "string" &&
    Number.isSafeInteger(v.bytes) &&
    typeof v.duration_ms === "number" &&
    Number.isFinite(v.duration_ms) &&
    Number.isSafeInteger(v.sample_rate)
  )
}

async function readCached(dir: string, id: string, expected: string): Promise<SynthesizedAudio | undefined> {
  try {
    const meta: unknown = JSON.parse(await readFile(join(dir, `${id}.json`), "utf8"))
    if (!isSidecar(meta) || meta.fingerprint !== expected) return undefined
    const audio = new Uint8Array(await readFile(join(dir, `${id}.mp3`)))
    // A size mismatch means the MP3 and its sidecar come from different writes.
    if (audio.length !== meta.bytes || audio.length === 0) return undefined
    return { audio, mime: "audio/mpeg", duration_ms: meta.duration_ms, sample_rate: meta.sample_rate }
  } catch {
    return undefined
  }
}

/** Write-then-rename, so another process never reads a half-written file. */
async function writeAtomically(path: string, data: Uint8Array | string): Promise<void> {
  const tmp = `${path}.${randomBytes(6).toString("hex")}.tmp`
  try {
    await writeFile(tmp, data)
    await rename(tmp, path)
  } catch (err) {
    await rm(tmp, { force: true }).catch(() => undefined) // tidying a temporary file: `err` below is the failure
    throw err
  }
}

async function writeCached(dir: string, id: string, print: string, clip: SynthesizedAudio): Promise<void> {
  const meta: Sidecar = {
    version: 1,
    fingerprint: print,
    bytes: clip.audio.length,
    duration_ms: clip.duration_ms,
    sample_rate: clip.sample_rate,
  }
  try {
    await mkdir(dir, { recursive: true })
    await writeAtomically(join(dir, `${id}.mp3`), clip.audio)
    // The sidecar goes last: it is what marks the MP3 as complete and current.
    await writeAtomically(join(dir, `${id}.json`), `${JSON.stringify(meta)}\n`)
  } catch {
    // The disk cache only saves a later process some CPU; the clip in hand is still good.
  }
}

export function makeVoiceSamples(opts: { speech: SpeechProvider; cacheDir: string | undefined }): VoiceSamples {
  const { speech, cacheDir } = opts
  // Holds the in-flight promise too, so concurrent first requests share one synthesis.
  const clips = new Map<string, Promise<SynthesizedAudio>>()

  const load = async (voice: Voice): Promise<SynthesizedAudio> => {
    const print = fingerprint(speech.name, voice)
    if (cacheDir !== undefined) {
      const cached = await readCached(cacheDir, voice.id, print)
      if (cached) return cached
    }
    const clip = await speech.synthesize({ text: voice.sample_text, voice: voice.speech })
    if (cacheDir !== undefined) await writeCached(cacheDir, voice.id, print, clip)
    return clip
  }

  return {
    get(id: string): Promise<SynthesizedAudio | undefined> {
      const voice = findVoice(id)
      if (voice === undefined) return Promise.resolve(undefined)
      let clip = clips.get(id)
      if (clip === undefined) {
        const pending = load(voice)
        clips.set(id, pending)
        // A failure is not remembered: the next request tries again.
        pending.catch(() => {
          if (clips.get(id) === pending) clips.delete(id)
        })
        clip = pending
      }
      return clip
    },
  }
}
