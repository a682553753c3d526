// The Deepgram-protocol recogniser (src/providers/speech/deepgram.recognizer.ts) against a local fake of the
// vendor's live API (test/support/fake-deepgram.ts): transcripts per utterance, partial results, KeepAlive,
// reconnection with the utterance replayed, refused keys and 429s, unanswered Finalizes, CloseStream.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest"
import { FallbackRecognizer } from "../../runtime/voice/hosted-speech.js"
import {
  type DeepgramFailure,
  type DeepgramOptions,
  type DeepgramRecognizers,
  makeDeepgramRecognizers,
} from "../../src/providers/speech/deepgram.recognizer.js"
import { ScriptRecognizer } from "../../src/providers/speech/script.recognizer.js"
import type { StreamingRecognizer } from "../../src/providers/speech/streaming.interface.js"
import { type FakeDeepgram, type FakeDeepgramOptions, startFakeDeepgram } from "../support/fake-deepgram.js"

const KEY = "dg-test-key-0123456789"
/** 20 ms of μ-law that is not silence (the fake does not listen to it; a vendor would). */
const FRAME = new Uint8Array(160).fill(0x15)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const WAIT = { timeout: 2_000, interval: 5 }

/** `n` frames of the callee's speech, as the media session passes them (all at once: faster than real time). */
const speak = (r: StreamingRecognizer, n: number) => {
  for (let i = 0; i < n; i++) r.frame(FRAME)
}

let fake: FakeDeepgram
let made: DeepgramRecognizers[] = []

async function startFake(o: Partial<FakeDeepgramOptions> = {}): Promise<FakeDeepgram> {
  fake = await startFakeDeepgram({ apiKey: KEY, idleMs: 400, ...o })
  return fake
}

/** Recognisers on the fake with the test's short timeouts, and the failures they report. */
function recognizers(o: Partial<DeepgramOptions> = {}) {
  const failures: DeepgramFailure[] = []
  const dg = makeDeepgramRecognizers({
    apiKey: KEY,
    baseUrl: fake.url,
    connectTimeoutMs: 1_000,
    finalizeTimeoutMs: 1_500,
    keepAliveMs: 100,
    backoffMs: 20,
    maxBackoffMs: 100,
    onFailure: (_kind, f) => failures.push(f),
    ...o,
  })
  made.push(dg)
  return { dg, failures }
}

beforeEach(async () => {
  await startFake()
})

afterEach(async () => {
  for (const dg of made) dg.close()
  for (const dg of made) await vi.waitFor(() => expect(dg.stats.open).toBe(0), WAIT)
  made = []
  await vi.waitFor(() => expect(fake.open).toBe(0), WAIT)
  await fake.close()
})

describe("Deepgram-protocol recogniser", () => {
  it("answers each utterance with its transcript, in order, over one stream of μ-law 8 kHz", async () => {
    const lines = ["Hello there.", "No thanks, not today.", "Goodbye."]
    fake.say(lines)
    const { dg, failures } = recognizers({ model: "nova-3", language: "en-US", endpointingMs: 250 })
    const r = dg.recognizer()
    await vi.waitFor(() => expect(dg.stats.opened).toBe(1), WAIT)
    for (const line of lines) {
      speak(r, 25)
      expect(await r.end()).toBe(line)
    }
    // An end with no speech since the last is "" at once, and asks the vendor nothing.
    expect(await r.end()).toBe("")

    expect(fake.connections).toHaveLength(1)
    const c = fake.connections[0]!
    expect(c.headers.authorization).toBe(`Token ${KEY}`)
    expect(c.query).toEqual({
      encoding: "mulaw",
      sample_rate: "8000",
      channels: "1",
      interim_results: "true",
      endpointing: "250",
      punctuate: "true",
      model: "nova-3",
      language: "en-US",
    })
    expect(c.audioBytes).toBe(3 * 25 * 160)
    // 100 ms a message (25 frames: five of five), not a message a frame.
    expect(c.binaryMessages).toBe(15)
    expect(c.controls.filter((t) => t === "Finalize")).toHaveLength(3)
    expect(failures).toEqual([])
  })

  it("shows the utterance so far while the callee speaks: its final segments and the latest interim", async () => {
    await fake.close()
    await startFake({ segmentBytes: 3200 })
    fake.say(["yes I would like to renew"])
    const { dg } = recognizers()
    const r = dg.recognizer()
    expect(r.partial()).toBe("")
    speak(r, 20) // 400 ms: two words revealed, then finalized as a segment
    await vi.waitFor(() => expect(r.partial()).toBe("yes I"), WAIT)
    speak(r, 10) // 200 ms more: an interim word on top of the final segment
    await vi.waitFor(() => expect(r.partial()).toBe("yes I would"), WAIT)
    expect(await r.end()).toBe("yes I would like to renew")
    expect(r.partial()).toBe("")
  })

  it("keeps an idle stream open with KeepAlive across a gap longer than the vendor's idle limit", async () => {
    fake.say(["First line.", "Second line."])
    const { dg, failures } = recognizers()
    const r = dg.recognizer()
    speak(r, 10)
    expect(await r.end()).toBe("First line.")
    await sleep(1_000) // the fake closes a stream idle for 400 ms
    speak(r, 10)
    expect(await r.end()).toBe("Second line.")
    expect(fake.connections).toHaveLength(1)
    const c = fake.connections[0]!
    expect(c.closed).toBeUndefined()
    expect(c.controls.filter((t) => t === "KeepAlive").length).toBeGreaterThanOrEqual(5)
    expect(failures).toEqual([])
  })

  it("without KeepAlive an idle stream is closed 1011 NET-0001; the next utterance goes on a new one", async () => {
    fake.say(["First line.", "Second line."])
    const { dg, failures } = recognizers({ keepAliveMs: 60_000 })
    const r = dg.recognizer()
    speak(r, 10)
    expect(await r.end()).toBe("First line.")
    await vi.waitFor(() => expect(fake.connections[0]!.closed).toMatchObject({ code: 1011, reason: "NET-0001" }), WAIT)
    speak(r, 10)
    expect(await r.end()).toBe("Second line.")
    expect(fake.connections).toHaveLength(2)
    expect(failures.map((f) => [f.kind, f.fatal, f.status])).toEqual([["dropped", false, 1011]])
    expect(failures[0]!.message).toMatch(/NET-0001/)
  })

  it("reconnects after a drop mid-utterance and still transcribes the utterance under way", async () => {
    fake.say(["I am still here."])
    fake.dropNext({ afterBytes: 1600 })
    const { dg, failures } = recognizers()
    const r = dg.recognizer()
    await vi.waitFor(() => expect(fake.connections).toHaveLength(1), WAIT)
    speak(r, 10)
    await vi.waitFor(() => expect(fake.connections[0]!.closed?.code).toBe(1011), WAIT)
    // The rest of the utterance comes while the recogniser is reconnecting; it ends before the new stream opens.
    speak(r, 20)
    expect(await r.end()).toBe("I am still here.")
    expect(fake.connections).toHaveLength(2)
    // The whole utterance went again on the new stream, then its Finalize.
    expect(fake.connections[1]!.audioBytes).toBe(30 * 160)
    expect(fake.connections[1]!.controls).toEqual(["Finalize"])
    expect(failures.map((f) => [f.kind, f.fatal])).toEqual([["dropped", false]])
  })

  it("a stream lost between utterances is opened again: the call keeps it, and never falls back", async () => {
    fake.say(["First line.", "Second line."])
    fake.dropNext({ afterUtterances: 1 })
    const { dg, failures } = recognizers()
    const gaveUp: DeepgramFailure[] = []
    let offline = 0
    const r = new FallbackRecognizer(
      dg.recognizer((f) => gaveUp.push(f)),
      () => {
        offline++
        return new ScriptRecognizer(() => "offline")
      },
    )
    speak(r, 10)
    expect(await r.end()).toBe("First line.")
    await vi.waitFor(() => expect(dg.stats.opened).toBe(2), WAIT)
    speak(r, 10)
    expect(await r.end()).toBe("Second line.")
    expect(fake.connections.map((c) => c.closed?.code)).toEqual([1011, undefined])
    expect(failures.map((f) => [f.kind, f.fatal])).toEqual([["dropped", false]])
    expect({ gaveUp, offline }).toEqual({ gaveUp: [], offline: 0 })
  })

  it("reconnects after a connection lost without a close frame", async () => {
    fake.say(["Still here."])
    fake.dropNext({ afterBytes: 800, abrupt: true })
    const { dg, failures } = recognizers()
    const r = dg.recognizer()
    await vi.waitFor(() => expect(fake.connections).toHaveLength(1), WAIT)
    speak(r, 10)
    await vi.waitFor(() => expect(failures).toHaveLength(1), WAIT)
    expect(failures[0]).toMatchObject({ kind: "dropped", fatal: false, status: 1006 })
    speak(r, 5)
    expect(await r.end()).toBe("Still here.")
    expect(fake.connections[1]!.audioBytes).toBe(15 * 160)
  })

  it('a refused key: end() answers "" at once, the failure is told once, and nothing is retried', async () => {
    const { dg, failures } = recognizers({ apiKey: "not-the-key" })
    const r = dg.recognizer()
    speak(r, 10)
    // An utterance ended before the refusal arrives is answered "" when it does, not at the finalize timeout.
    const started = performance.now()
    expect(await r.end()).toBe("")
    expect(performance.now() - started).toBeLessThan(1_000)
    expect(failures.map((f) => [f.kind, f.fatal, f.status])).toEqual([["auth", true, 401]])
    expect(failures[0]!.message).not.toContain("not-the-key")

    speak(r, 10)
    const after = performance.now()
    expect(await r.end()).toBe("")
    expect(performance.now() - after).toBeLessThan(20)
    await sleep(300)
    expect(fake.upgrades.map((u) => u.status)).toEqual([401])
    expect(dg.stats.framesDropped).toBe(10)

    // The next call's recogniser does not try the refused key again (for authRetryAfterMs), and says why.
    const r2 = dg.recognizer()
    speak(r2, 5)
    expect(await r2.end()).toBe("")
    await sleep(100)
    expect(fake.upgrades).toHaveLength(1)
    expect(failures.map((f) => f.kind)).toEqual(["auth", "auth"])
    r.free()
    r2.free()
  })

  it("backs off on 429 and goes on once the vendor lets it in", async () => {
    fake.say(["Okay then."])
    fake.refuseNext(2, 429)
    const { dg, failures } = recognizers()
    const r = dg.recognizer()
    speak(r, 10)
    expect(await r.end()).toBe("Okay then.")
    expect(fake.upgrades.map((u) => u.status)).toEqual([429, 429, 101])
    expect(failures.map((f) => [f.kind, f.fatal, f.status])).toEqual([
      ["rate_limited", false, 429],
      ["rate_limited", false, 429],
    ])
  })

  it("gives up after its 429 retries: failed, and told once as fatal", async () => {
    fake.refuseNext(100, 429)
    const { dg, failures } = recognizers({ maxRateLimitRetries: 2 })
    const r = dg.recognizer()
    speak(r, 10)
    expect(await r.end()).toBe("")
    expect(fake.upgrades.map((u) => u.status)).toEqual([429, 429, 429])
    expect(failures.map((f) => [f.kind, f.fatal])).toEqual([
      ["rate_limited", false],
      ["rate_limited", false],
      ["rate_limited", true],
    ])
  })

  it("a 1008 close (audio the vendor cannot decode) and a 4xx upgrade are not retried", async () => {
    fake.dropNext({ afterBytes: 800, code: 1008, reason: "DATA-0000" })
    const { dg, failures } = recognizers()
    const r = dg.recognizer()
    speak(r, 10)
    expect(await r.end()).toBe("")
    await sleep(150)
    expect(fake.upgrades).toHaveLength(1)
    expect(failures.map((f) => [f.kind, f.fatal, f.status])).toEqual([["refused", true, 1008]])
    expect(failures[0]!.message).toMatch(/DATA-0000/)

    fake.refuseNext(1, 400)
    const other = recognizers()
    const r2 = other.dg.recognizer()
    speak(r2, 5)
    expect(await r2.end()).toBe("")
    await sleep(150)
    expect(fake.upgrades.map((u) => u.status)).toEqual([101, 400])
    expect(other.failures.map((f) => [f.kind, f.fatal, f.status])).toEqual([["refused", true, 400]])
  })

  it("keeps an utterance's latest audio, bounded, while not connected, and counts what it drops", async () => {
    fake.say(["Long one."])
    fake.refuseNext(1, 429, 0)
    const { dg, failures } = recognizers({ bufferMs: 200, backoffMs: 100 })
    const r = dg.recognizer()
    speak(r, 25) // 500 ms before the stream opens: the first 300 ms go
    expect(await r.end()).toBe("Long one.")
    expect(dg.stats.framesDropped).toBe(15)
    expect(fake.connections[0]!.audioBytes).toBe(10 * 160)
    expect(failures.map((f) => f.kind)).toEqual(["audio_dropped", "rate_limited"])
  })

  it("a Finalize never answered resolves at the finalize timeout with what was heard", async () => {
    fake.say(["can you call back later"])
    fake.delayFinalize(Number.POSITIVE_INFINITY)
    const { dg, failures } = recognizers({ finalizeTimeoutMs: 300 })
    const r = dg.recognizer()
    speak(r, 20)
    await vi.waitFor(() => expect(r.partial()).toBe("can you"), WAIT)
    const started = performance.now()
    expect(await r.end()).toBe("can you")
    expect(performance.now() - started).toBeGreaterThanOrEqual(280)
    expect(failures.map((f) => [f.kind, f.fatal])).toEqual([["finalize_timeout", false]])
  })

  it("tells a late answer's utterance from the next one, which starts before it comes", async () => {
    fake.say(["One.", "Two words.", "And three."])
    fake.delayFinalize(150)
    const { dg, failures } = recognizers()
    const r = dg.recognizer()
    speak(r, 10)
    const first = r.end()
    speak(r, 15)
    const second = r.end()
    speak(r, 20)
    await vi.waitFor(() => expect(r.partial()).toBe("And three."), WAIT)
    const third = r.end()
    expect(await Promise.all([first, second, third])).toEqual(["One.", "Two words.", "And three."])
    expect(failures).toEqual([])
  })

  it("ignores what it cannot read from the vendor, counts it, and goes on", async () => {
    fake.say(["Still fine."])
    const { dg, failures } = recognizers({ maxMessageChars: 10_000 })
    const r = dg.recognizer()
    await vi.waitFor(() => expect(fake.open).toBe(1), WAIT)
    fake.inject("{not json")
    fake.inject("[1, 2, 3]")
    fake.inject(JSON.stringify({ type: "Results", channel: 5, is_final: true }))
    fake.inject(JSON.stringify({ type: "Results", channel: { alternatives: [{ transcript: 42 }] } }))
    fake.inject(JSON.stringify({ type: "Results", pad: "x".repeat(20_000) }))
    fake.inject(JSON.stringify({ type: "SomethingNew", detail: 1 }))
    await vi.waitFor(() => expect(dg.stats.messagesIgnored).toBe(6), WAIT)
    speak(r, 10)
    expect(await r.end()).toBe("Still fine.")
    // Counted each; told once for the stream.
    expect(failures.map((f) => f.kind)).toEqual(["bad_message"])
  })

  it("free() sends CloseStream; the vendor answers Metadata and closes; no socket or timer is left", async () => {
    const timersBefore = process.getActiveResourcesInfo().filter((t) => t === "Timeout").length
    fake.say(["Bye."])
    const { dg, failures } = recognizers()
    const r = dg.recognizer()
    speak(r, 10)
    expect(await r.end()).toBe("Bye.")
    r.free()
    await vi.waitFor(() => expect(fake.connections[0]!.closed).toBeDefined(), WAIT)
    const c = fake.connections[0]!
    expect(c.controls.at(-1)).toBe("CloseStream")
    expect(c.sent.at(-1)?.type).toBe("Metadata")
    expect(c.closed).toMatchObject({ code: 1000, by: "fake" })
    await vi.waitFor(() => expect(dg.stats.open).toBe(0), WAIT)
    expect(fake.open).toBe(0)
    // Freed: nothing more is heard or sent.
    speak(r, 10)
    expect(await r.end()).toBe("")
    expect(process.getActiveResourcesInfo().filter((t) => t === "Timeout").length).toBeLessThanOrEqual(timersBefore)
    expect(failures).toEqual([])
  })

  it("free() during the upgrade abandons it; close() frees every recogniser", async () => {
    const { dg } = recognizers()
    const a = dg.recognizer()
    a.free()
    const b = dg.recognizer()
    const c = dg.recognizer()
    await vi.waitFor(() => expect(dg.stats.opened).toBe(2), WAIT)
    dg.close()
    await vi.waitFor(() => expect(fake.open).toBe(0), WAIT)
    await vi.waitFor(() => expect(dg.stats.open).toBe(0), WAIT)
    // b's and c's streams were asked to close (a's upgrade, if it got that far, was cut).
    expect(fake.connections.filter((x) => x.controls.at(-1) === "CloseStream")).toHaveLength(2)
    speak(b, 5)
    speak(c, 5)
    expect(await Promise.all([b.end(), c.end()])).toEqual(["", ""])
  })
})
