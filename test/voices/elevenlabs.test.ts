// The ElevenLabs-style speech adapter against a local fake of the API: the sample uploaded as
// multipart for a voice id, speech by voice id, the xi-api-key header, errors mapped to speech
// codes (and the key kept out of them), retries; and the configuration choosing it.
import { createServer, type IncomingMessage, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import busboy from "busboy"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { loadConfig } from "../../src/platform/config.js"
import { makeSpeech } from "../../src/providers/Speech.js"
import { makeElevenLabsSpeech } from "../../src/providers/speech/elevenlabs.speech.js"
import {
  type SpeechProvider,
  SpeechSynthesisError,
  type SpeechVoice,
} from "../../src/providers/speech/speech.interface.js"
import { mp3, wav } from "./fixtures.js"

const KEY = "sk_test_0123456789abcdef"
const AUDIO = mp3({ hz: 180, seconds: 1 })

interface Seen {
  method: string
  path: string
  key: string | undefined
  accept: string | undefined
  json?: Record<string, unknown>
  fields?: Record<string, string>
  file?: { field: string; filename: string; type: string; bytes: Buffer }
}

const seen: Seen[] = []
const failures = new Map<string, number[]>() // path → statuses to answer first, in order
let server: Server
let base: string

async function readForm(req: IncomingMessage): Promise<Pick<Seen, "fields" | "file">> {
  const fields: Record<string, string> = {}
  let file: Seen["file"]
  await new Promise<void>((resolve, reject) => {
    const form = busboy({ headers: req.headers })
    form.on("field", (name, value) => {
      fields[name] = value
    })
    form.on("file", (field, stream, info) => {
      const chunks: Buffer[] = []
      stream.on("data", (c: Buffer) => chunks.push(c))
      stream.on("end", () => {
        file = { field, filename: info.filename ?? "", type: info.mimeType, bytes: Buffer.concat(chunks) }
      })
    })
    form.on("close", resolve)
    form.on("error", reject)
    req.pipe(form)
  })
  return { fields, ...(file && { file }) }
}

beforeAll(async () => {
  server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://x")
    const entry: Seen = {
      method: req.method ?? "",
      path: url.pathname + url.search,
      key: req.headers["xi-api-key"] as string | undefined,
      accept: req.headers.accept,
    }
    const send = (status: number, body: unknown, type = "application/json") => {
      res.writeHead(status, { "content-type": type })
      res.end(typeof body === "string" || Buffer.isBuffer(body) ? body : JSON.stringify(body))
    }
    if ((req.headers["content-type"] ?? "").startsWith("multipart/")) Object.assign(entry, await readForm(req))
    else {
      const chunks: Buffer[] = []
      for await (const c of req) chunks.push(c as Buffer)
      if (chunks.length > 0) entry.json = JSON.parse(Buffer.concat(chunks).toString())
    }
    seen.push(entry)
    // The key is echoed back, as some APIs do: the adapter must not repeat it.
    if (entry.key !== KEY) return send(401, { detail: { status: "invalid_api_key", message: `bad key ${entry.key}` } })
    const queued = failures.get(url.pathname)?.shift()
    if (queued !== undefined) return send(queued, { detail: { message: `status ${queued}` } })
    if (req.method === "POST" && url.pathname === "/v1/voices/add") {
      if ((entry.file?.bytes.length ?? 0) < 100) return send(400, { detail: { message: "sample is too short" } })
      return send(200, { voice_id: "v_cloned_1", requires_verification: false })
    }
    const tts = /^\/v1\/text-to-speech\/([^/]+)$/.exec(url.pathname)
    if (req.method === "POST" && tts) {
      if (!["v_cloned_1", "v_default"].includes(decodeURIComponent(tts[1]!)))
        return send(404, { detail: { message: "voice_not_found" } })
      return send(200, AUDIO, "audio/mpeg")
    }
    const del = /^\/v1\/voices\/([^/]+)$/.exec(url.pathname)
    if (req.method === "DELETE" && del) return del[1] === "v_cloned_1" ? send(200, { status: "ok" }) : send(404, {})
    send(404, { detail: "no such route" })
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(() => new Promise<void>((r) => server.close(() => r())))

const voice = (extra: Partial<SpeechVoice> = {}): SpeechVoice => ({
  language: "en-US",
  gender: "female",
  pitch: 0,
  speed: 1,
  ...extra,
})
const sample = (bytes: Buffer) => ({
  name: "Priya's voice",
  audio: bytes,
  format: "wav" as const,
  mime: "audio/wav",
  duration_ms: 5000,
})

async function failsWith(p: Promise<unknown>, code: SpeechSynthesisError["code"]): Promise<SpeechSynthesisError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(SpeechSynthesisError)
  expect((err as SpeechSynthesisError).code).toBe(code)
  expect((err as Error).message).not.toContain(KEY)
  return err as SpeechSynthesisError
}

describe("the ElevenLabs-style adapter", () => {
  const speech = () => makeElevenLabsSpeech({ baseUrl: `${base}/`, apiKey: KEY })

  it("clones: the sample uploaded as multipart with its name, key in xi-api-key → the vendor voice id", async () => {
    seen.length = 0
    const bytes = wav({ hz: 220, seconds: 5 })
    const cloned = await speech().cloneVoice!(sample(bytes))
    expect(cloned.vendor_voice_id).toBe("v_cloned_1")
    expect(cloned.params).toMatchObject({ gender: "female", method: "pcm" })
    expect(seen).toHaveLength(1)
    const [req] = seen
    expect(req).toMatchObject({ method: "POST", path: "/v1/voices/add", key: KEY, accept: "application/json" })
    expect(req!.fields).toMatchObject({ name: "Priya's voice" })
    expect(req!.file).toMatchObject({ field: "files", filename: "sample.wav", type: "audio/wav" })
    expect(req!.file!.bytes.equals(bytes)).toBe(true)
  })

  it("speaks by voice id: JSON with the model and a speed in the vendor's range; MP3 back, duration read", async () => {
    seen.length = 0
    const clip = await speech().synthesize({
      text: "  Hello   there. ",
      voice: voice({ vendor_voice_id: "v_cloned_1", speed: 1.6 }),
    })
    expect(Buffer.from(clip.audio).equals(AUDIO)).toBe(true)
    expect(clip.mime).toBe("audio/mpeg")
    expect(clip.sample_rate).toBe(22_050)
    expect(Math.abs(clip.duration_ms - 1000)).toBeLessThan(120)
    expect(seen[0]).toMatchObject({
      method: "POST",
      path: "/v1/text-to-speech/v_cloned_1?output_format=mp3_22050_32",
      key: KEY,
      accept: "audio/mpeg",
      json: { text: "Hello there.", model_id: "eleven_multilingual_v2", voice_settings: { speed: 1.2 } },
    })
  })

  it("a voice naming no vendor voice: the default voice, else the fallback, else UNSUPPORTED_VOICE", async () => {
    seen.length = 0
    await makeElevenLabsSpeech({ baseUrl: base, apiKey: KEY, defaultVoiceId: "v_default" }).synthesize({
      text: "Hi",
      voice: voice(),
    })
    expect(seen[0]!.path).toMatch(/^\/v1\/text-to-speech\/v_default\?/)
    const fallback: SpeechProvider = {
      name: "stub",
      synthesize: async () => ({ audio: new Uint8Array([1]), mime: "audio/mpeg", duration_ms: 1, sample_rate: 1 }),
    }
    const viaFallback = await makeElevenLabsSpeech({ baseUrl: base, apiKey: KEY, fallback }).synthesize({
      text: "Hi",
      voice: voice(),
    })
    expect(viaFallback.duration_ms).toBe(1)
    await failsWith(speech().synthesize({ text: "Hi", voice: voice() }), "UNSUPPORTED_VOICE")
  })

  it("maps the vendor's answers: bad key, unknown voice, a refused sample, busy; retries 5xx", async () => {
    const wrongKey = makeElevenLabsSpeech({ baseUrl: base, apiKey: "sk_wrong_key_123" })
    const err = await failsWith(
      wrongKey.synthesize({ text: "Hi", voice: voice({ vendor_voice_id: "v_cloned_1" }) }),
      "ENGINE_FAILURE",
    )
    expect(err.message).toMatch(/401/)
    expect(err.message).not.toContain("sk_wrong_key_123")
    await failsWith(speech().synthesize({ text: "Hi", voice: voice({ vendor_voice_id: "nope" }) }), "UNSUPPORTED_VOICE")
    await failsWith(speech().cloneVoice!(sample(Buffer.from("tiny"))), "BAD_SAMPLE")
    await failsWith(
      speech().synthesize({ text: " \n ", voice: voice({ vendor_voice_id: "v_cloned_1" }) }),
      "EMPTY_TEXT",
    )

    seen.length = 0
    failures.set("/v1/text-to-speech/v_cloned_1", [503])
    const retried = await speech().synthesize({ text: "Hi", voice: voice({ vendor_voice_id: "v_cloned_1" }) })
    expect(retried.audio.length).toBe(AUDIO.length)
    expect(seen).toHaveLength(2)

    failures.set("/v1/text-to-speech/v_cloned_1", [429, 429, 429])
    await failsWith(speech().synthesize({ text: "Hi", voice: voice({ vendor_voice_id: "v_cloned_1" }) }), "BUSY")
    // An upload is not retried: a second try could leave two voices at the vendor.
    seen.length = 0
    failures.set("/v1/voices/add", [503])
    await failsWith(speech().cloneVoice!(sample(wav({ hz: 200, seconds: 5 }))), "ENGINE_FAILURE")
    expect(seen).toHaveLength(1)
  })

  it("forgets a voice; an unknown one is no error", async () => {
    seen.length = 0
    await speech().deleteVoice!("v_cloned_1")
    await speech().deleteVoice!("v_gone")
    expect(seen.map((r) => [r.method, r.path, r.key])).toEqual([
      ["DELETE", "/v1/voices/v_cloned_1", KEY],
      ["DELETE", "/v1/voices/v_gone", KEY],
    ])
  })
})

describe("choosing the provider", () => {
  it("SPEECH_API_URL and SPEECH_API_KEY choose the adapter; either missing, the simulator", async () => {
    const none = loadConfig({})
    expect(none.speechApi).toBeUndefined()
    const sim = makeSpeech(none)
    expect(sim.name).toBe("sim")
    await sim.close?.()
    expect(loadConfig({ SPEECH_API_URL: base }).speechApi).toBeUndefined()
    const config = loadConfig({ SPEECH_API_URL: `${base}/`, SPEECH_API_KEY: KEY, SPEECH_DEFAULT_VOICE_ID: "v_default" })
    expect(config.speechApi).toEqual({ url: base, apiKey: KEY, defaultVoiceId: "v_default" })
    const real = makeSpeech(config)
    expect(real.name).toBe("elevenlabs")
    seen.length = 0
    await real.synthesize({ text: "Hello", voice: voice() })
    expect(seen[0]).toMatchObject({ key: KEY, path: expect.stringMatching(/^\/v1\/text-to-speech\/v_default/) })
    await real.close?.()
    expect(() => loadConfig({ SPEECH_API_URL: "not a url" })).toThrow(/SPEECH_API_URL/)
  })
})
