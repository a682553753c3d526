// One call's audio in the runtime (runtime/voice/media-session.ts), over an in-process bus standing
// in for the api process's media stream: utterances found and handed on with their onset, the
// agent's sentences paced at 20 ms a frame with a mark after each, a barge-in cleared at once with
// what was played, DTMF and the stream's end.
import { afterEach, describe, expect, it } from "vitest"
import { MediaSession, type MediaSessionEvents } from "../../runtime/voice/media-session.js"
import { makeMemoryBus } from "../../src/platform/bus/memory.bus.js"
import { Pacer } from "../../src/platform/pacer.js"
import { MEDIA_KIND_HEADER, mediaInSubject, mediaOutSubject } from "../../src/platform/subjects.js"
import { encode, FRAME_SAMPLES, frames as framesOf } from "../../src/providers/audio/g711.js"

const T = 7
const CALL = 42
const silence = encode(new Int16Array(FRAME_SAMPLES))
const loud = encode(Int16Array.from({ length: FRAME_SAMPLES }, (_, i) => Math.round(12000 * Math.sin(i / 3))))
/** A stand-in detector: a frame is speech when it is loud. */
const voiced = (f: Int16Array) => f.reduce((m, s) => Math.max(m, Math.abs(s)), 0) > 4000
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

function setup(events: MediaSessionEvents = {}) {
  const bus = makeMemoryBus()
  const pacer = new Pacer()
  const out: Array<{ kind: string; data: Uint8Array; at: number }> = []
  bus.subscribe(mediaOutSubject(T, CALL), (m) => {
    const kind = m.headers?.[MEDIA_KIND_HEADER] ?? ""
    const at = performance.now()
    // A late wake-up sends the frames due in one message: one entry per frame.
    if (kind === "media") for (const f of framesOf(m.data)) out.push({ kind, data: f, at })
    else out.push({ kind, data: m.data, at })
  })
  const session = new MediaSession({ bus, tenantId: T, callId: CALL, voiced, pacer, events })
  const carrier = (kind: string, payload: Uint8Array | object) =>
    bus.publish(mediaInSubject(T, CALL), payload, { headers: { [MEDIA_KIND_HEADER]: kind } })
  let sent = 0
  /** Sends `n` frames and waits until the session has judged every frame sent so far. */
  const frames = async (frame: Uint8Array, n: number) => {
    for (let i = 0; i < n; i++) carrier("media", frame)
    sent += n
    for (let i = 0; i < 500 && session.framesHeard < sent; i++) await sleep(2)
    expect(session.framesHeard).toBe(sent)
  }
  return { bus, pacer, out, session, carrier, frames }
}

let cleanup: Array<() => void> = []
afterEach(() => {
  for (const c of cleanup) c()
  cleanup = []
})

describe("MediaSession", () => {
  it("hands on an utterance after the silence window, with the audio from just before its onset", async () => {
    const heard: Array<{ audio: Uint8Array; startMs: number; endMs: number }> = []
    const s = setup({ utterance: (u) => heard.push(u) })
    cleanup.push(() => s.pacer.stop())
    s.carrier("start", { stream_sid: "MZ1", call_sid: "CA1" })
    await s.frames(silence, 25) // 500 ms
    await s.frames(loud, 30) // 600 ms of speech
    await s.frames(silence, 24) // 480 ms: not yet the 500 ms window
    expect(heard).toEqual([])
    await s.frames(silence, 2)
    expect(heard).toHaveLength(1)
    const u = heard[0]!
    expect(u.endMs).toBe(1100)
    // From up to 300 ms before the speech began, through to where it was judged over.
    expect(u.startMs).toBeGreaterThanOrEqual(200)
    expect(u.startMs).toBeLessThanOrEqual(500)
    expect(u.audio.length / 8).toBe(1100 + 500 - u.startMs)
  })

  it("sends the agent's sentences once the stream starts, 20 ms a frame, each followed by its mark", async () => {
    const s = setup()
    cleanup.push(() => s.pacer.stop())
    s.session.say(
      "s1",
      Array.from({ length: 10 }, () => loud),
    )
    s.session.say(
      "s2",
      Array.from({ length: 5 }, () => loud),
    )
    await sleep(60)
    expect(s.out).toEqual([]) // nothing before the carrier's start
    s.carrier("start", { stream_sid: "MZ1", call_sid: "CA1" })
    for (let i = 0; i < 100 && s.out.length < 17; i++) await sleep(20)
    expect(s.out.map((o) => o.kind)).toEqual([...Array(10).fill("media"), "mark", ...Array(5).fill("media"), "mark"])
    expect(JSON.parse(Buffer.from(s.out[10]!.data).toString())).toEqual({ name: "s1" })
    // Paced, not all at once: 15 frames take about 300 ms.
    const media = s.out.filter((o) => o.kind === "media")
    expect(media.at(-1)!.at - media[0]!.at).toBeGreaterThan(200)
    expect(s.session.speaking).toBe(true) // its marks are not yet played
    s.carrier("mark", { name: "s2" })
    for (let i = 0; i < 100 && s.session.speaking; i++) await sleep(5)
    expect(s.session.speaking).toBe(false)
  })

  it("clears the carrier once the callee's speech over the agent is recognised, and says what was played", async () => {
    const barges: Array<{ played: readonly string[] }> = []
    const s = setup({ bargeIn: (b) => barges.push(b) })
    cleanup.push(() => s.pacer.stop())
    s.carrier("start", { stream_sid: "MZ1", call_sid: "CA1" })
    s.session.say(
      "s1",
      Array.from({ length: 3 }, () => loud),
    )
    s.session.say(
      "s2",
      Array.from({ length: 200 }, () => loud),
    )
    for (let i = 0; i < 50 && !s.out.some((o) => o.kind === "mark"); i++) await sleep(20)
    s.carrier("mark", { name: "s1" })
    await s.frames(loud, 5) // 100 ms: not yet speech
    expect(s.out.some((o) => o.kind === "clear")).toBe(false)
    await s.frames(loud, 1) // the 6th voiced frame: 120 ms, speech
    // The bus hands the clear to its subscribers on a later turn of the loop (later still under load).
    for (let i = 0; i < 50 && !s.out.some((o) => o.kind === "clear"); i++) await sleep(10)
    const clearAt = s.out.findIndex((o) => o.kind === "clear")
    expect(clearAt).toBeGreaterThan(0)
    expect(barges).toEqual([{ played: ["s1"], atMs: 100 }])
    await sleep(100)
    // Nothing more was sent after the clear, and s2's mark never went.
    expect(s.out.slice(clearAt + 1)).toEqual([])
    expect(s.session.speaking).toBe(false)
  })

  it("passes DTMF on, and after the stream's end hears and sends nothing", async () => {
    const digits: string[] = []
    let ended = 0
    const s = setup({ dtmf: (d) => digits.push(d), ended: () => ended++ })
    cleanup.push(() => s.pacer.stop())
    s.carrier("start", { stream_sid: "MZ1", call_sid: "CA1" })
    s.carrier("dtmf", { digit: "7" })
    s.carrier("stop", {})
    for (let i = 0; i < 100 && ended === 0; i++) await sleep(5)
    expect(digits).toEqual(["7"])
    expect(ended).toBe(1)
    s.session.say("late", [loud])
    await sleep(60)
    expect(s.out).toEqual([])
  })
})
