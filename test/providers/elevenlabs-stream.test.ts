// The ElevenLabs streaming synthesiser (src/providers/speech/elevenlabs.stream.ts) against a local fake of
// the vendor's stream-input WebSocket: frames, what each request carried, latency, retries and refusals.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type ElevenLabsStreamFailure,
  type ElevenLabsStreamOptions,
  type ElevenLabsStreamTiming,
  makeElevenLabsStreamingSynth,
} from "../../src/providers/speech/elevenlabs.stream.js"
import { MAX_SPEECH_TEXT_CHARS, SpeechSynthesisError } from "../../src/providers/speech/speech.interface.js"
import type { PhoneVoice } from "../../src/providers/speech/streaming.interface.js"
import { type FakeElevenLabsStream, startFakeElevenLabsStream } from "../support/fake-elevenlabs-stream.js"

const KEY = "sk_test_5f1c0a9e77"
const CLONED = "clonedVoice0001"
const DEFAULTS = { female: ["femaleVoice001"], male: ["maleVoice0001", "maleVoice0002"] }
const SENTENCE = "Hello, this is Anya calling from Northwind Gyms about your membership."
const FEMALE: PhoneVoice = { gender: "female", speed: 1, variant: 0 }

let fake: FakeElevenLabsStream
const fakes: FakeElevenLabsStream[] = []
const failures: ElevenLabsStreamFailure[] = []
const timings: ElevenLabsStreamTiming[] = []

const synth = (url: string, extra: Partial<ElevenLabsStreamOptions> = {}) =>
  makeElevenLabsStreamingSynth({
    apiKey: KEY,
    baseUrl: url,
    defaultVoices: DEFAULTS,
    // Roomy: the machine running the suite may be busy; the timeout test sets its own.
    timeouts: { connectMs: 2_000, firstAudioMs: 2_000, idleMs: 2_000, totalMs: 8_000 },
    onFailure: (f) => failures.push(f),
    onSpoken: (t) => timings.push(t),
    ...extra,
  })

/** Runs `f` and says how many connections the fake saw meanwhile. */
async function counting<T>(
  f: () => Promise<T>,
  on = fake,
): Promise<{ result: PromiseSettledResult<T>; opened: number }> {
  const before = on.connections.length
  failures.length = 0
  const [result] = await Promise.allSettled([f()])
  return { result: result!, opened: on.connections.length - before }
}

const rejection = (r: PromiseSettledResult<unknown>): SpeechSynthesisError => {
  expect(r.status).toBe("rejected")
  const reason = (r as PromiseRejectedResult).reason
  expect(reason).toBeInstanceOf(SpeechSynthesisError)
  return reason as SpeechSynthesisError
}

const start = async (opts: Partial<Parameters<typeof startFakeElevenLabsStream>[0]> = {}) => {
  const f = await startFakeElevenLabsStream({
    apiKey: KEY,
    voices: [CLONED, ...DEFAULTS.female, ...DEFAULTS.male],
    ...opts,
  })
  fakes.push(f)
  return f
}

beforeAll(async () => {
  fake = await start()
})
afterAll(() => {
  for (const f of fakes) f.close()
})

describe("the ElevenLabs streaming synthesiser", () => {
  it("returns whole 160-byte frames: the fake's audio re-cut across uneven chunks, the last padded", async () => {
    const speech = await synth(fake.url).speak(SENTENCE, { ...FEMALE, vendor_voice_id: CLONED })
    const expected = fake.audioFor(SENTENCE)
    expect(expected.length % 160).not.toBe(0)
    expect(speech.frames.length).toBe(Math.ceil(expected.length / 160))
    expect(speech.frames.every((f) => f.length === 160)).toBe(true)
    const all = Buffer.concat(speech.frames)
    expect(Buffer.compare(all.subarray(0, expected.length), Buffer.from(expected))).toBe(0)
    expect([...all.subarray(expected.length)].every((b) => b === 0xff)).toBe(true)
    expect(speech.durationMs).toBe(speech.frames.length * 20)
    expect(speech.voice).toBe(CLONED)
    const conn = fake.connections.at(-1)!
    expect(conn.audioBytes).toBe(expected.length)
  })

  it("asks with the key, the cloned voice's id, the model, μ-law 8 kHz and the voice's speed (clamped)", async () => {
    await synth(fake.url, { modelId: "eleven_test_model" }).speak(SENTENCE, {
      ...FEMALE,
      speed: 1.5,
      vendor_voice_id: CLONED,
    })
    const conn = fake.connections.at(-1)!
    expect(conn.headers["xi-api-key"]).toBe(KEY)
    expect(conn.voiceId).toBe(CLONED)
    expect(conn.path).toBe(`/v1/text-to-speech/${CLONED}/stream-input`)
    expect(conn.query).toMatchObject({ model_id: "eleven_test_model", output_format: "ulaw_8000" })
    expect(conn.query).not.toHaveProperty("xi_api_key")
    expect(conn.messages).toEqual([
      { text: " ", voice_settings: expect.objectContaining({ speed: 1.2 }) },
      { text: `${SENTENCE} `, flush: true },
      { text: "" },
    ])
    await synth(fake.url).speak("Slowly now.", { gender: "male", speed: 0.5, variant: 1 })
    const slow = fake.connections.at(-1)!
    expect(slow.voiceId).toBe(DEFAULTS.male[1])
    expect(slow.query.model_id).toBe("eleven_flash_v2_5")
    expect(slow.messages[0]).toMatchObject({ voice_settings: { speed: 0.7 } })
    const female = await synth(fake.url).speak("Hi.", { gender: "female", speed: 1 })
    expect(female.voice).toBe(DEFAULTS.female[0])
  })

  it("a voice naming no vendor voice, none for its gender: UNSUPPORTED_VOICE before connecting", async () => {
    const { result, opened } = await counting(() =>
      synth(fake.url, { defaultVoices: { female: ["femaleVoice001"] } }).speak("Hi.", { gender: "male", speed: 1 }),
    )
    expect(rejection(result).code).toBe("UNSUPPORTED_VOICE")
    expect(opened).toBe(0)
  })

  it("reports the first audio's latency from the call to speak, an injected delay included", async () => {
    timings.length = 0
    const quick = await synth(fake.url).speak(SENTENCE, FEMALE)
    fake.delayFirstAudio(600)
    const slow = await synth(fake.url).speak(SENTENCE, FEMALE)
    expect(slow.firstAudioMs).toBeGreaterThanOrEqual(600)
    expect(slow.firstAudioMs).toBeLessThan(600 + 1_500)
    expect(quick.firstAudioMs).toBeLessThan(slow.firstAudioMs - 300)
    const [q] = timings
    expect(q!.connectMs).toBeGreaterThan(0)
    expect(q!.connectMs).toBeLessThanOrEqual(q!.firstAudioMs)
    expect(q!.attempts).toBe(1)
  })

  it("a connection dropped before any audio is retried once, and the sentence comes back whole", async () => {
    fake.dropNext("before_audio")
    const { result, opened } = await counting(() => synth(fake.url).speak(SENTENCE, FEMALE))
    expect(result.status).toBe("fulfilled")
    const speech = (result as PromiseFulfilledResult<{ frames: Uint8Array[] }>).value
    expect(speech.frames.length).toBe(Math.ceil(fake.audioFor(SENTENCE).length / 160))
    expect(opened).toBe(2)
    expect(failures).toMatchObject([{ code: "ENGINE_FAILURE", attempt: 1, retrying: true }])
  })

  it("a connection dropped after audio arrived rejects ENGINE_FAILURE without a retry (no audio twice)", async () => {
    fake.dropNext("after_audio")
    const { result, opened } = await counting(() => synth(fake.url).speak(SENTENCE, FEMALE))
    expect(rejection(result).code).toBe("ENGINE_FAILURE")
    expect(opened).toBe(1)
    expect(failures).toMatchObject([{ attempt: 1, retrying: false }])
  })

  it("a refused key (HTTP 401) rejects at once, saying so, without the key in the message", async () => {
    const { result, opened } = await counting(() =>
      synth(fake.url, { apiKey: "sk_wrong_key_123" }).speak(SENTENCE, FEMALE),
    )
    const e = rejection(result)
    expect(e.code).toBe("ENGINE_FAILURE")
    expect(e.message).toMatch(/401.*key/)
    expect(e.message).not.toContain("sk_wrong_key_123")
    expect(opened).toBe(1)
  })

  it("a refused key as the vendor's error message and close 1008 rejects at once, saying so", async () => {
    const closing = await start({ badKey: "1008" })
    const { result, opened } = await counting(
      () => synth(closing.url, { apiKey: "sk_wrong_key_123" }).speak(SENTENCE, FEMALE),
      closing,
    )
    const e = rejection(result)
    expect(e.code).toBe("ENGINE_FAILURE")
    expect(e.message).toMatch(/refused its key/)
    expect(opened).toBe(1)
  })

  it("an unknown voice id rejects UNSUPPORTED_VOICE without a retry", async () => {
    const { result, opened } = await counting(() =>
      synth(fake.url).speak(SENTENCE, { ...FEMALE, vendor_voice_id: "noSuchVoice" }),
    )
    expect(rejection(result).code).toBe("UNSUPPORTED_VOICE")
    expect(opened).toBe(1)
    expect(fake.connections.at(-1)!.closed?.code).toBe(1008)
  })

  it("HTTP 429 on the upgrade rejects BUSY without a retry", async () => {
    fake.refuseNext(1, 429)
    const { result, opened } = await counting(() => synth(fake.url).speak(SENTENCE, FEMALE))
    expect(rejection(result).code).toBe("BUSY")
    expect(opened).toBe(1)
  })

  it("a stalled first audio times out: one retry, then ENGINE_FAILURE", async () => {
    fake.delayFirstAudio(5_000, 2)
    const { result, opened } = await counting(() =>
      synth(fake.url, { timeouts: { firstAudioMs: 150, totalMs: 5_000 } }).speak(SENTENCE, FEMALE),
    )
    const e = rejection(result)
    expect(e.code).toBe("ENGINE_FAILURE")
    expect(e.message).toMatch(/no audio within 150 ms/)
    expect(opened).toBe(2)
  })

  it("a message that is not JSON is a failure, not an exception", async () => {
    fake.garbleNext(1)
    const { result, opened } = await counting(() => synth(fake.url).speak(SENTENCE, FEMALE))
    const e = rejection(result)
    expect(e.code).toBe("ENGINE_FAILURE")
    expect(e.message).toMatch(/not JSON/)
    expect(opened).toBe(1)
  })

  it("an answer longer than 60 s of audio is cut off and rejected", async () => {
    const verbose = await start({ bytesPerChar: 8_000, chunkSizes: [16_001, 23_999], chunkGapMs: 5 })
    const { result } = await counting(() => synth(verbose.url).speak("x".repeat(120), FEMALE), verbose)
    const e = rejection(result)
    expect(e.code).toBe("ENGINE_FAILURE")
    expect(e.message).toMatch(/more than 60 s/)
    // 120 s offered; the client hung up about halfway.
    expect(verbose.connections.at(-1)!.audioBytes).toBeLessThan(120 * 8_000)
  })

  it("empty and too-long text reject before connecting", async () => {
    const s = synth(fake.url)
    const empty = await counting(() => s.speak(" \n\t\u0007 ", FEMALE))
    expect(rejection(empty.result).code).toBe("EMPTY_TEXT")
    const long = await counting(() => s.speak("a".repeat(MAX_SPEECH_TEXT_CHARS + 1), FEMALE))
    expect(rejection(long.result).code).toBe("TEXT_TOO_LONG")
    expect(empty.opened + long.opened).toBe(0)
  })
})
