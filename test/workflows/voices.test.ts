// The voice catalogue, the offline speech simulator and the sample-clip cache. MP3s are checked
// by walking their frame headers here, so the suite needs no audio tools on the machine.

import { createHash } from "node:crypto"
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { makeSimSpeech } from "../../src/providers/speech/sim.speech.js"
import {
  MAX_SPEECH_TEXT_CHARS,
  type SpeechProvider,
  type SpeechRequest,
  SpeechSynthesisError,
  type SynthesizedAudio,
} from "../../src/providers/speech/speech.interface.js"
import { makeVoiceSamples } from "../../src/voices/voice-samples.cache.js"
import { findVoice, VOICES } from "../../src/voices/voices.catalog.js"

interface Mp3Summary {
  readonly frames: number
  readonly duration_ms: number
  readonly sampleRate: number
  readonly channels: 1 | 2
}

// Bitrates (kbps) by bitrate index, Layer III; index 0 (free) and 15 (bad) are rejected.
const BITRATES_V1_L3 = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320]
const BITRATES_V2_L3 = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160]
const SAMPLE_RATES: Record<number, readonly number[]> = {
  3: [44100, 48000, 32000], // MPEG-1
  2: [22050, 24000, 16000], // MPEG-2
  0: [11025, 12000, 8000], // MPEG-2.5
}

/** Walks an MP3 frame by frame; throws unless the whole file is Layer III frames back to back. */
function parseMp3(bytes: Uint8Array): Mp3Summary {
  let at = 0
  let frames = 0
  let samples = 0
  let sampleRate = 0
  let channels: 1 | 2 = 1
  while (at < bytes.length) {
    if (at + 4 > bytes.length) throw new Error(`truncated frame header at byte ${at}`)
    const h = ((bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!) >>> 0
    if (h >>> 21 !== 0x7ff) throw new Error(`no frame sync at byte ${at} (frame ${frames})`)
    const version = (h >>> 19) & 3
    const layer = (h >>> 17) & 3
    const bitrateIndex = (h >>> 12) & 15
    const rateIndex = (h >>> 10) & 3
    const padding = (h >>> 9) & 1
    const mode = (h >>> 6) & 3
    if (version === 1) throw new Error(`reserved MPEG version at byte ${at}`)
    if (layer !== 1) throw new Error(`not Layer III at byte ${at}`)
    if (bitrateIndex === 0 || bitrateIndex === 15) throw new Error(`bad bitrate index ${bitrateIndex} at byte ${at}`)
    if (rateIndex === 3) throw new Error(`reserved sample-rate index at byte ${at}`)
    const kbps = (version === 3 ? BITRATES_V1_L3 : BITRATES_V2_L3)[bitrateIndex]!
    const rate = SAMPLE_RATES[version]![rateIndex]!
    if (sampleRate !== 0 && rate !== sampleRate) throw new Error(`sample rate changes at byte ${at}`)
    sampleRate = rate
    channels = mode === 3 ? 1 : 2
    const perFrame = version === 3 ? 1152 : 576
    const length = Math.floor(((perFrame / 8) * kbps * 1000) / rate) + padding
    if (at + length > bytes.length)
      throw new Error(`frame ${frames} overruns the file by ${at + length - bytes.length} bytes`)
    at += length
    frames++
    samples += perFrame
  }
  if (frames === 0) throw new Error("no frames")
  return { frames, duration_ms: (samples * 1000) / sampleRate, sampleRate, channels }
}

const sha1 = (bytes: Uint8Array): string => createHash("sha1").update(bytes).digest("hex")

/** Passes requests through to a provider and counts them. */
function counting(inner: SpeechProvider): SpeechProvider & { readonly calls: () => number } {
  let calls = 0
  return {
    name: inner.name,
    calls: () => calls,
    synthesize(req: SpeechRequest): Promise<SynthesizedAudio> {
      calls++
      return inner.synthesize(req)
    },
  }
}

const speech = makeSimSpeech()
const tempDirs: string[] = []
const tempDir = async (): Promise<string> => {
  const dir = await mkdtemp(join(tmpdir(), "parley-voices-"))
  tempDirs.push(dir)
  return dir
}
afterAll(async () => {
  await Promise.all(tempDirs.map((d) => rm(d, { recursive: true, force: true })))
})

describe("voice catalogue", () => {
  it("has six English personas and one Hindi persona with unique ids", () => {
    expect(VOICES.map((v) => v.id)).toEqual(["amelia", "rohan", "kai", "anya", "leo", "priya", "meera"])
    expect(VOICES.filter((v) => v.language.startsWith("en-"))).toHaveLength(6)
    expect(VOICES.filter((v) => v.language === "hi-IN").map((v) => v.id)).toEqual(["meera"])
    expect(new Set(VOICES.map((v) => v.id)).size).toBe(VOICES.length)
  })

  it("describes each persona fully, with a sample line under the text cap", () => {
    for (const v of VOICES) {
      expect(v.language).toMatch(/^[a-z]{2}-[A-Z]{2}$/)
      expect(v.speech.language).toBe(v.language)
      expect(v.speech.gender).toBe(v.gender)
      expect(v.name).toBeTruthy()
      expect(v.accent).toBeTruthy()
      expect(v.description).toBeTruthy()
      expect(v.sample_text).toContain(v.name)
      expect(v.sample_text.length).toBeLessThan(MAX_SPEECH_TEXT_CHARS)
    }
  })

  it("gives personas of the same language and gender different settings", () => {
    const settings = VOICES.map((v) => JSON.stringify(v.speech))
    expect(new Set(settings).size).toBe(VOICES.length)
  })

  it("finds voices by id", () => {
    expect(findVoice("amelia")?.name).toBe("Amelia")
    expect(findVoice("meera")?.language).toBe("hi-IN")
    expect(findVoice("nobody")).toBeUndefined()
    expect(findVoice("AMELIA")).toBeUndefined()
  })
})

describe("sim speech", () => {
  it.each(VOICES.map((v) => [v.id, v] as const))("renders %s's sample as a valid MP3", async (_id, voice) => {
    const clip = await speech.synthesize({ text: voice.sample_text, voice: voice.speech })
    expect(clip.mime).toBe("audio/mpeg")
    expect(clip.sample_rate).toBe(22050)
    const mp3 = parseMp3(clip.audio)
    expect(mp3.sampleRate).toBe(clip.sample_rate)
    expect(mp3.channels).toBe(1)
    // The frames carry the encoder's start delay and end padding on top of the speech itself.
    expect(Math.abs(mp3.duration_ms - clip.duration_ms) / clip.duration_ms).toBeLessThan(0.1)
    // Sample lines are two sentences, some 20 words: several seconds at a natural pace.
    expect(clip.duration_ms).toBeGreaterThan(3000)
    expect(clip.duration_ms).toBeLessThan(20_000)
  })

  it("is checked by a frame walker that rejects broken MP3s", async () => {
    const clip = await speech.synthesize({ text: "Hello.", voice: findVoice("amelia")!.speech })
    const frames = parseMp3(clip.audio).frames
    expect(frames).toBeGreaterThan(5)
    const lastFrameCut = clip.audio.slice(0, clip.audio.length - 10)
    expect(() => parseMp3(lastFrameCut)).toThrow(/overruns/)
    const badSync = clip.audio.slice()
    badSync[0] = 0x00
    expect(() => parseMp3(badSync)).toThrow(/no frame sync/)
    const badBitrate = clip.audio.slice()
    badBitrate[2] = badBitrate[2]! | 0xf0
    expect(() => parseMp3(badBitrate)).toThrow(/bad bitrate/)
  })

  it("makes each persona sound different on the same line", async () => {
    const text = "Thanks for your time today, I'll send the details by text message."
    const clips = await Promise.all(VOICES.map((v) => speech.synthesize({ text, voice: v.speech })))
    expect(new Set(clips.map((c) => sha1(c.audio))).size).toBe(VOICES.length)
  })

  it("is deterministic for the same text and voice", async () => {
    const voice = findVoice("kai")!.speech
    const a = await speech.synthesize({ text: "Just checking in.", voice })
    const b = await speech.synthesize({ text: "Just checking in.", voice })
    expect(sha1(a.audio)).toBe(sha1(b.audio))
  })

  it("scales duration with the text", async () => {
    const voice = findVoice("anya")!.speech
    const short = await speech.synthesize({ text: "Hello there.", voice })
    const long = await speech.synthesize({ text: "Hello there. ".repeat(10), voice })
    expect(short.duration_ms).toBeGreaterThan(300)
    expect(long.duration_ms).toBeGreaterThan(short.duration_ms * 5)
    expect(parseMp3(long.audio).frames).toBeGreaterThan(parseMp3(short.audio).frames)
  })

  it("accepts text at the cap and refuses text over it", async () => {
    const voice = findVoice("leo")!.speech
    const atCap = "Please call us back. ".repeat(60).slice(0, MAX_SPEECH_TEXT_CHARS)
    const clip = await speech.synthesize({ text: atCap, voice })
    parseMp3(clip.audio)
    const over = speech.synthesize({ text: `${atCap}x`, voice })
    await expect(over).rejects.toBeInstanceOf(SpeechSynthesisError)
    await expect(over).rejects.toMatchObject({ code: "TEXT_TOO_LONG" })
  })

  it("refuses text with nothing to speak", async () => {
    const voice = findVoice("leo")!.speech
    await expect(speech.synthesize({ text: " \n\t ", voice })).rejects.toMatchObject({ code: "EMPTY_TEXT" })
  })

  it("refuses voices it cannot render", async () => {
    const base = findVoice("kai")!.speech
    await expect(speech.synthesize({ text: "Hi.", voice: { ...base, language: "fr-FR" } })).rejects.toMatchObject({
      code: "UNSUPPORTED_VOICE",
    })
    await expect(speech.synthesize({ text: "Hi.", voice: { ...base, pitch: 2 } })).rejects.toMatchObject({
      code: "UNSUPPORTED_VOICE",
    })
    await expect(speech.synthesize({ text: "Hi.", voice: { ...base, speed: Number.NaN } })).rejects.toMatchObject({
      code: "UNSUPPORTED_VOICE",
    })
  })

  it("speaks text that looks like an engine option instead of obeying it", async () => {
    const voice = findVoice("kai")!.speech
    const clip = await speech.synthesize({ text: "--help", voice })
    expect(clip.duration_ms).toBeGreaterThan(200)
    parseMp3(clip.audio)
  })

  // mespeak's engine leaks its heap on every run and crashes the process near the 80th.
  it("survives well past the engine's per-instance run limit", async () => {
    const voice = findVoice("priya")!.speech
    for (let i = 0; i < 100; i++) {
      const clip = await speech.synthesize({ text: `Call ${i}.`, voice })
      expect(clip.duration_ms).toBeGreaterThan(200)
    }
  }, 120_000)
})

describe("voice samples", () => {
  it("returns undefined for an unknown voice without synthesising", async () => {
    const provider = counting(speech)
    const samples = makeVoiceSamples({ speech: provider, cacheDir: undefined })
    expect(await samples.get("nobody")).toBeUndefined()
    expect(await samples.get("../amelia")).toBeUndefined()
    expect(provider.calls()).toBe(0)
  })

  it("shares one synthesis between concurrent first requests and keeps the result", async () => {
    const provider = counting(speech)
    const samples = makeVoiceSamples({ speech: provider, cacheDir: undefined })
    const [a, b] = await Promise.all([samples.get("amelia"), samples.get("amelia")])
    expect(provider.calls()).toBe(1)
    expect(a).toBeDefined()
    expect(b).toBe(a)
    expect(await samples.get("amelia")).toBe(a)
    expect(provider.calls()).toBe(1)
    await samples.get("rohan")
    expect(provider.calls()).toBe(2)
  })

  it("writes the disk cache and a fresh instance reuses it", async () => {
    const dir = await tempDir()
    const first = counting(speech)
    const clip = await makeVoiceSamples({ speech: first, cacheDir: dir }).get("meera")
    expect(first.calls()).toBe(1)
    expect((await readdir(dir)).sort()).toEqual(["meera.json", "meera.mp3"])
    const sidecar = JSON.parse(await readFile(join(dir, "meera.json"), "utf8")) as Record<string, unknown>
    expect(sidecar.duration_ms).toBe(clip!.duration_ms)

    const second = counting(speech)
    const again = await makeVoiceSamples({ speech: second, cacheDir: dir }).get("meera")
    expect(second.calls()).toBe(0)
    expect(sha1(again!.audio)).toBe(sha1(clip!.audio))
    expect(again!.duration_ms).toBe(clip!.duration_ms)
    expect(again!.sample_rate).toBe(clip!.sample_rate)
  })

  it("re-synthesises when the cached files do not match", async () => {
    const dir = await tempDir()
    await makeVoiceSamples({ speech, cacheDir: dir }).get("kai")
    await writeFile(join(dir, "kai.mp3"), new Uint8Array([0xff, 0xf3, 0x60]))
    const provider = counting(speech)
    const clip = await makeVoiceSamples({ speech: provider, cacheDir: dir }).get("kai")
    expect(provider.calls()).toBe(1)
    parseMp3(clip!.audio)
    // ...and the rewrite repairs the cache for the next process.
    const later = counting(speech)
    await makeVoiceSamples({ speech: later, cacheDir: dir }).get("kai")
    expect(later.calls()).toBe(0)
  })

  it("still serves the clip when the cache directory cannot be written", async () => {
    const dir = await tempDir()
    const blocker = join(dir, "not-a-dir")
    await writeFile(blocker, "")
    const clip = await makeVoiceSamples({ speech, cacheDir: join(blocker, "voices") }).get("leo")
    expect(clip).toBeDefined()
    parseMp3(clip!.audio)
  })

  it("does not remember a failed synthesis", async () => {
    let calls = 0
    const flaky: SpeechProvider = {
      name: "flaky",
      synthesize: (req) =>
        ++calls === 1
          ? Promise.reject(new SpeechSynthesisError("ENGINE_FAILURE", "transient"))
          : speech.synthesize(req),
    }
    const samples = makeVoiceSamples({ speech: flaky, cacheDir: undefined })
    await expect(samples.get("anya")).rejects.toMatchObject({ code: "ENGINE_FAILURE" })
    expect(await samples.get("anya")).toBeDefined()
    expect(calls).toBe(2)
  })
})
