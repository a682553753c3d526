// POST /api/workflows/preview-opening and GET .../{clip_id} through the real server, plus the
// speech worker pool behind them: synthesis off the event loop, a bounded queue, dead workers.
import { randomBytes } from "node:crypto"
import { Effect, Exit } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Speech } from "../../src/providers/Speech.js"
import { prepareSpeech, renderSpeech } from "../../src/providers/speech/sim.engine.js"
import { makeSimSpeech } from "../../src/providers/speech/sim.speech.js"
import { type SpeechProvider, SpeechSynthesisError } from "../../src/providers/speech/speech.interface.js"
import { type PreviewCaller, previewOpening } from "../../src/voices/previews.service.js"
import { findVoice } from "../../src/voices/voices.catalog.js"
import { api } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

interface Preview {
  readonly mp3_url: string
  readonly duration_ms: number
  readonly persona: string
  readonly clip_id: string
}

const BITRATES_V1_L3 = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320]
const BITRATES_V2_L3 = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160]
const SAMPLE_RATES: Record<number, readonly number[]> = {
  3: [44100, 48000, 32000],
  2: [22050, 24000, 16000],
  0: [11025, 12000, 8000],
}

/** Walks Layer III frame headers back to back (the sim writes no ID3 tag); throws on anything else. */
function walkMp3(bytes: Uint8Array): { frames: number; sampleRate: number; duration_ms: number } {
  let at = 0
  let frames = 0
  let samples = 0
  let sampleRate = 0
  while (at < bytes.length) {
    if (at + 4 > bytes.length) throw new Error(`truncated frame header at byte ${at}`)
    const h = ((bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!) >>> 0
    if (h >>> 21 !== 0x7ff) throw new Error(`no frame sync at byte ${at}`)
    const version = (h >>> 19) & 3
    const bitrateIndex = (h >>> 12) & 15
    const rateIndex = (h >>> 10) & 3
    if (version === 1 || ((h >>> 17) & 3) !== 1 || bitrateIndex === 0 || bitrateIndex === 15 || rateIndex === 3)
      throw new Error(`bad frame header at byte ${at}`)
    const rate = SAMPLE_RATES[version]![rateIndex]!
    const kbps = (version === 3 ? BITRATES_V1_L3 : BITRATES_V2_L3)[bitrateIndex]!
    // 1152 samples a frame in MPEG-1 Layer III, 576 in MPEG-2/2.5 (the sim's 22.05 kHz is MPEG-2).
    const perFrame = version === 3 ? 1152 : 576
    at += Math.floor(((perFrame / 8) * kbps * 1000) / rate) + ((h >>> 9) & 1)
    if (at > bytes.length) throw new Error(`frame ${frames} overruns the file`)
    sampleRate = rate
    frames++
    samples += perFrame
  }
  if (frames === 0) throw new Error("no frames")
  return { frames, sampleRate, duration_ms: (samples * 1000) / sampleRate }
}

/** Something new to say, so each test synthesises rather than finding an earlier clip. */
const fresh = (line: string): string => `${line} Reference ${randomBytes(3).readUIntBE(0, 3)}.`

let srv: TestServer
let client: ReturnType<typeof api>

beforeAll(async () => {
  srv = await startTestServer()
  client = api(srv)
})
afterAll(async () => {
  await srv?.stop()
})

const preview = (body: unknown) => client.call("POST", "/api/workflows/preview-opening", { body })

async function previewOk(text: string, persona: string): Promise<Preview> {
  const res = await preview({ text, persona })
  expect(res.status, await res.clone().text()).toBe(200)
  return (await res.json()) as Preview
}

const rowsFor = async (id: string): Promise<number> => {
  const [row] = await srv.sql<{ n: number }[]>`select count(*)::int as n from speech_clips where id = ${id}`
  return row!.n
}

describe("POST /api/workflows/preview-opening", () => {
  it("answers with an absolute mp3_url, the duration, the persona and the clip id", async () => {
    const body = await previewOk(fresh("Hi, this is Amelia from Harbourside Energy."), "amelia")
    expect(Object.keys(body).sort()).toEqual(["clip_id", "duration_ms", "mp3_url", "persona"])
    expect(body.persona).toBe("amelia")
    expect(body.clip_id).toMatch(/^[0-9a-f]{32}$/)
    expect(body.mp3_url).toBe(`${srv.url}/api/workflows/preview-opening/${body.clip_id}`)
    expect(Number.isInteger(body.duration_ms)).toBe(true)
    expect(body.duration_ms).toBeGreaterThan(500)
    expect(body.duration_ms).toBeLessThan(20_000)
  })

  it("serves a valid MP3 at mp3_url whose frames add up to duration_ms", async () => {
    const body = await previewOk(fresh("Hello, this is Rohan calling from Sunrise Home Loans."), "rohan")
    const res = await fetch(body.mp3_url)
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toBe("audio/mpeg")
    expect(res.headers.get("cache-control")).toMatch(/immutable/)
    expect(res.headers.get("x-duration-ms")).toBe(String(body.duration_ms))
    const audio = new Uint8Array(await res.arrayBuffer())
    // Frame sync: eleven set bits, and MPEG version 2 (the sim encodes 22.05 kHz) makes it 0xFFE.
    expect(audio[0]).toBe(0xff)
    expect(audio[1]! & 0xe0).toBe(0xe0)
    const mp3 = walkMp3(audio)
    expect(mp3.sampleRate).toBe(22050)
    // The frames also carry the encoder's start delay and end padding.
    expect(Math.abs(mp3.duration_ms - body.duration_ms)).toBeLessThan(Math.max(150, body.duration_ms * 0.1))
  })

  it("synthesises a line once: the same text and persona give the same clip and one row", async () => {
    const text = fresh("Hey there, this is Kai from Summit Auto Care.")
    const first = await previewOk(text, "kai")
    // Concurrent repeats, and the same text with surrounding whitespace, all land on that clip.
    const again = await Promise.all([previewOk(text, "kai"), previewOk(text, "kai"), previewOk(`  ${text}\n`, "kai")])
    for (const b of again) expect(b).toEqual(first)
    expect(await rowsFor(first.clip_id)).toBe(1)
    const [row] = await srv.sql<
      { provider: string; persona: string }[]
    >`select provider, persona from speech_clips where id = ${first.clip_id}`
    expect(row).toEqual({ provider: "sim", persona: "kai" })
  })

  it("makes a different clip for a different persona", async () => {
    const text = fresh("Thanks for taking my call today.")
    const anya = await previewOk(text, "anya")
    const leo = await previewOk(text, "leo")
    expect(leo.clip_id).not.toBe(anya.clip_id)
    expect(leo.persona).toBe("leo")
    expect(await rowsFor(anya.clip_id)).toBe(1)
    expect(await rowsFor(leo.clip_id)).toBe(1)
    const [a, b] = await Promise.all([fetch(anya.mp3_url), fetch(leo.mp3_url)])
    expect(Buffer.compare(Buffer.from(await a.arrayBuffer()), Buffer.from(await b.arrayBuffer()))).not.toBe(0)
  })

  it("also answers under /v1", async () => {
    const res = await client.call("POST", "/v1/api/workflows/preview-opening", {
      body: { text: "Hello from version one.", persona: "priya" },
    })
    expect(res.status).toBe(200)
    const body = (await res.json()) as Preview
    expect((await fetch(`${srv.url}/v1/api/workflows/preview-opening/${body.clip_id}`)).status).toBe(200)
  })

  it.each([
    ["an unknown persona", { text: "Hello there.", persona: "nobody" }, "persona"],
    ["a missing persona", { text: "Hello there." }, "persona"],
    ["a persona in the wrong case", { text: "Hello there.", persona: "Amelia" }, "persona"],
    ["empty text", { text: "", persona: "amelia" }, "text"],
    ["whitespace-only text", { text: " \n\t ", persona: "amelia" }, "text"],
    ["text with nothing to speak", { text: "... !?", persona: "amelia" }, "text"],
    ["text over 500 characters", { text: "a".repeat(501), persona: "amelia" }, "text"],
    ["text that is not a string", { text: 42, persona: "amelia" }, "text"],
  ])("refuses %s with 422 naming the field", async (_what, body, field) => {
    const res = await preview(body)
    expect(res.status).toBe(422)
    expect(await res.json()).toMatchObject({ code: "VALIDATION_FAILED", field })
  })

  it("accepts exactly 500 characters once trimmed", async () => {
    const text = "Please call us back about your renewal. ".repeat(13).slice(0, 500)
    expect(text.length).toBe(500)
    const res = await preview({ text: `   ${text}   `, persona: "meera" })
    expect(res.status).toBe(200)
  })
})

describe("GET /api/workflows/preview-opening/{clip_id}", () => {
  it("is 404 for a well-formed id that was never stored", async () => {
    const res = await fetch(`${srv.url}/api/workflows/preview-opening/${"0".repeat(32)}`)
    expect(res.status).toBe(404)
    expect(await res.json()).toMatchObject({ code: "NOT_FOUND" })
  })

  it.each(["xyz", "0".repeat(31), "0".repeat(33), "A".repeat(32), "..%2F..%2Fetc"])(
    "is 422 for the malformed id %s",
    async (id) => {
      const res = await fetch(`${srv.url}/api/workflows/preview-opening/${id}`)
      expect(res.status).toBe(422)
      expect(await res.json()).toMatchObject({ code: "VALIDATION_FAILED", field: "clip_id" })
    },
  )

  it("refreshes last_used_at only when it has gone stale", async () => {
    const body = await previewOk(fresh("Just checking in."), "anya")
    const usedAt = async () => {
      const [row] = await srv.sql<
        { last_used_at: Date }[]
      >`select last_used_at from speech_clips where id = ${body.clip_id}`
      return row!.last_used_at.getTime()
    }
    const created = await usedAt()
    await fetch(body.mp3_url)
    expect(await usedAt()).toBe(created)
    await srv.sql`update speech_clips set last_used_at = now() - interval '2 hours' where id = ${body.clip_id}`
    const stale = await usedAt()
    await fetch(body.mp3_url)
    expect(await usedAt()).toBeGreaterThan(stale)
  })
})

describe("synthesis off the event loop", () => {
  it("keeps the server's event loop responsive while a long line is synthesised", async () => {
    const voice = findVoice("leo")!.speech
    const line = "I'm calling about your policy renewal and a few options that could lower your premium this year. "
    // What the same work costs when it runs on this thread: the blocking the workers remove.
    const t0 = performance.now()
    renderSpeech(prepareSpeech({ text: fresh(line.repeat(4)).slice(0, 480), voice }))
    const inline = performance.now() - t0
    expect(inline).toBeGreaterThan(200)

    let last = performance.now()
    let maxGap = 0
    const timer = setInterval(() => {
      const now = performance.now()
      maxGap = Math.max(maxGap, now - last)
      last = now
    }, 5)
    try {
      const started = performance.now()
      await previewOk(fresh(line.repeat(4)).slice(0, 480), "leo")
      const took = performance.now() - started
      // The server (in this process) was busy for as long as the inline run blocked, yet ticked.
      expect(took).toBeGreaterThan(150)
      expect(maxGap).toBeLessThan(150)
    } finally {
      clearInterval(timer)
    }
  })
})

describe("sim speech worker pool", () => {
  const voice = findVoice("kai")!.speech

  it("refuses work beyond its queue bound with BUSY and finishes what it accepted", async () => {
    const speech = makeSimSpeech({ workers: 1, maxQueue: 1 })
    try {
      const running = speech.synthesize({ text: "First in line.", voice })
      const waiting = speech.synthesize({ text: "Second in line.", voice })
      const refused = speech.synthesize({ text: "Third in line.", voice })
      await expect(refused).rejects.toBeInstanceOf(SpeechSynthesisError)
      await expect(refused).rejects.toMatchObject({ code: "BUSY" })
      const [a, b] = await Promise.all([running, waiting])
      walkMp3(a.audio)
      walkMp3(b.audio)
      // Once the queue drains, work is accepted again.
      walkMp3((await speech.synthesize({ text: "Fourth.", voice })).audio)
    } finally {
      await speech.close()
    }
  })

  it("checks requests before queueing them, so bad input never waits or counts as busy", async () => {
    const speech = makeSimSpeech({ workers: 1, maxQueue: 0 })
    try {
      const running = speech.synthesize({ text: "Occupying the worker.", voice })
      await expect(speech.synthesize({ text: " ", voice })).rejects.toMatchObject({ code: "EMPTY_TEXT" })
      await expect(speech.synthesize({ text: "Hi.", voice: { ...voice, language: "fr-FR" } })).rejects.toMatchObject({
        code: "UNSUPPORTED_VOICE",
      })
      await expect(speech.synthesize({ text: "Hi.", voice })).rejects.toMatchObject({ code: "BUSY" })
      await running
    } finally {
      await speech.close()
    }
  })

  it("rejects a job whose worker dies with ENGINE_FAILURE, and replaces the worker for the queue", async () => {
    // A timeout no job can meet: each worker is stopped mid-job, as a crashed one would end.
    const speech = makeSimSpeech({ workers: 1, maxQueue: 4, jobTimeoutMs: 1 })
    try {
      const jobs = [1, 2, 3].map((i) => speech.synthesize({ text: `Job ${i}.`, voice }))
      for (const job of jobs)
        await expect(job).rejects.toMatchObject({ name: "SpeechSynthesisError", code: "ENGINE_FAILURE" })
    } finally {
      await speech.close()
    }
  })

  it("takes signed-in (normal) work ahead of queued anonymous (low) work", async () => {
    const speech = makeSimSpeech({ workers: 1, maxQueue: 4 })
    try {
      const done: string[] = []
      const track = (label: string, priority: "normal" | "low") =>
        speech.synthesize({ text: `${label} in line.`, voice, priority }).then(() => void done.push(label))
      const running = track("Running", "low")
      const anon = [track("Anonymous one", "low"), track("Anonymous two", "low")]
      const signedIn = track("Signed in", "normal")
      await Promise.all([running, ...anon, signedIn])
      // The worker was busy when all three queued; the normal one, queued last, went first.
      expect(done).toEqual(["Running", "Signed in", "Anonymous one", "Anonymous two"])
    } finally {
      await speech.close()
    }
  })

  it("holds anonymous work to half the queue, so a flood of it cannot make signed-in work BUSY", async () => {
    const speech = makeSimSpeech({ workers: 1, maxQueue: 4 })
    try {
      const running = speech.synthesize({ text: "Occupying the worker.", voice, priority: "low" })
      const queued = [1, 2].map((i) => speech.synthesize({ text: `Anonymous ${i}.`, voice, priority: "low" }))
      const flood = [3, 4, 5].map((i) => speech.synthesize({ text: `Anonymous ${i}.`, voice, priority: "low" }))
      for (const refused of flood) await expect(refused).rejects.toMatchObject({ code: "BUSY" })
      // The other half is still open to normal work, which is all that can be refused past it.
      const signedIn = [1, 2].map((i) => speech.synthesize({ text: `Signed in ${i}.`, voice }))
      await expect(speech.synthesize({ text: "One too many.", voice })).rejects.toMatchObject({ code: "BUSY" })
      for (const clip of await Promise.all([running, ...queued, ...signedIn])) walkMp3(clip.audio)
    } finally {
      await speech.close()
    }
  })

  it("rejects running and later jobs once closed", async () => {
    const speech = makeSimSpeech({ workers: 1 })
    const running = speech.synthesize({ text: "Interrupted.", voice })
    await speech.close()
    await expect(running).rejects.toMatchObject({ code: "ENGINE_FAILURE" })
    await expect(speech.synthesize({ text: "Too late.", voice })).rejects.toMatchObject({ code: "ENGINE_FAILURE" })
  })
})

describe("synthesis failures as HTTP errors", () => {
  const failing = (code: SpeechSynthesisError["code"]): SpeechProvider => ({
    name: `failing-${code}`,
    synthesize: () => Promise.reject(new SpeechSynthesisError(code, "stub failure")),
  })
  const run = (speech: SpeechProvider) =>
    srv.running.runtime.runPromiseExit(
      previewOpening({
        text: fresh("Hello."),
        persona: "amelia",
        caller: { kind: "anonymous", ip: "203.0.113.7" },
      }).pipe(Effect.provideService(Speech, speech)),
    )
  const failure = (exit: Exit.Exit<unknown, unknown>) =>
    Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : exit

  it("asks the provider for low priority for anonymous callers and normal for workspaces", async () => {
    const seen: Array<string | undefined> = []
    const recording: SpeechProvider = {
      name: "recording",
      synthesize: (req) => {
        seen.push(req.priority)
        return Promise.reject(new SpeechSynthesisError("ENGINE_FAILURE", "recorded"))
      },
    }
    const ask = (caller: PreviewCaller) =>
      srv.running.runtime.runPromiseExit(
        previewOpening({ text: fresh("Priority check."), persona: "amelia", caller }).pipe(
          Effect.provideService(Speech, recording),
        ),
      )
    await ask({ kind: "anonymous", ip: "203.0.113.8" })
    await ask({ kind: "workspace", tenantId: 1, ip: "203.0.113.9" })
    expect(seen).toEqual(["low", "normal"])
  })

  it("turns BUSY into RateLimited (429 with Retry-After)", async () => {
    expect(failure(await run(failing("BUSY")))).toMatchObject({ _tag: "RateLimited", retryAfterSeconds: 2 })
  })

  it("turns engine failures into GatewayUnavailable (502)", async () => {
    expect(failure(await run(failing("ENGINE_FAILURE")))).toMatchObject({ _tag: "GatewayUnavailable" })
  })

  it("turns EMPTY_TEXT and TEXT_TOO_LONG into a 422 on text", async () => {
    for (const code of ["EMPTY_TEXT", "TEXT_TOO_LONG"] as const) {
      expect(failure(await run(failing(code)))).toMatchObject({ _tag: "ValidationFailed", errors: [{ field: "text" }] })
    }
  })
})
