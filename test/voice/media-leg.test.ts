// A call leg spoken and heard as audio (runtime/voice/media-leg.ts) against a carrier played by the
// test over an in-process bus: the agent's sentences arrive as audio that a recogniser on the
// carrier's side understands, the callee's spoken line comes back from listen() as text, and a
// callee speaking over the agent cuts the agent off with what was heard whole.
import { afterEach, describe, expect, it } from "vitest"
import { MediaLeg } from "../../runtime/voice/media-leg.js"
import { MediaSession } from "../../runtime/voice/media-session.js"
import { makeMemoryBus } from "../../src/platform/bus/memory.bus.js"
import { Pacer } from "../../src/platform/pacer.js"
import { MEDIA_KIND_HEADER, mediaInSubject, mediaOutSubject } from "../../src/platform/subjects.js"
import { frames as framesOf } from "../../src/providers/audio/g711.js"
import { Vad } from "../../src/providers/audio/vad.js"
import { fliteSynthesizer, speakForPhone } from "../../src/providers/speech/flite.phone.js"
import { sentencesOf } from "../../src/providers/speech/sentences.js"
import { SphinxDecoder, SphinxPool, sphinxAvailable } from "../../src/providers/speech/sphinx.recognizer.js"

const required = process.env.REQUIRE_POCKETSPHINX === "1"
const T = 3
const CALL = 9
const AGENT = ["Hello, this is Anna calling from the gym.", "Would you like to renew your membership today?"]
const CALLEE = ["Can you do it for less?", "Yes, I would like to renew my membership.", "No thank you."]
const silence = new Uint8Array(160).fill(0xff)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

let stops: Array<() => void> = []
afterEach(() => {
  for (const s of stops) s()
  stops = []
})

async function setup() {
  const bus = makeMemoryBus()
  const pacer = new Pacer()
  const vad = await Vad.create()
  const pool = new SphinxPool(CALLEE)
  stops.push(() => {
    pacer.stop()
    vad.free()
    pool.close()
  })
  /** What the carrier got: each sentence's frames, by the mark that followed them. */
  const sentences: Array<{ mark: string; frames: Uint8Array[] }> = []
  let pending: Uint8Array[] = []
  let ackMarks = true
  const carrier = (kind: string, payload: Uint8Array | object) =>
    bus.publish(mediaInSubject(T, CALL), payload, { headers: { [MEDIA_KIND_HEADER]: kind } })
  bus.subscribe(mediaOutSubject(T, CALL), (m) => {
    const kind = m.headers?.[MEDIA_KIND_HEADER]
    if (kind === "media")
      pending.push(...framesOf(m.data)) // a late wake-up sends a few frames at once
    else if (kind === "mark") {
      const mark = String(m.json<{ name: string }>().name)
      sentences.push({ mark, frames: pending })
      pending = []
      if (ackMarks) carrier("mark", { name: mark })
    }
  })
  const leg = new MediaLeg({
    providerCallId: "CA-test",
    voice: { gender: "female", speed: 1 },
    recognizer: pool.recognizer(),
    synth: fliteSynthesizer,
    open: (events) => new MediaSession({ bus, tenantId: T, callId: CALL, voiced: (f) => vad.voiced(f), pacer, events }),
  })
  carrier("start", { stream_sid: "MZ", call_sid: "CA-test" })
  await bus.flush()
  /** The callee says `line`, then is silent long enough for the end of speech. */
  const speak = async (line: string) => {
    const { frames } = await speakForPhone(line, { gender: "male", speed: 1, variant: 1 })
    for (const f of [...frames, ...Array.from({ length: 30 }, () => silence)]) carrier("media", f)
    await bus.flush()
  }
  return {
    leg,
    sentences,
    speak,
    holdMarks: () => {
      ackMarks = false
    },
    carrier,
    pendingFrames: () => pending.length,
  }
}

describe.skipIf(!required && !sphinxAvailable())("a call leg over a media stream", () => {
  it("speaks the agent's sentences as audio the carrier's side recognises, and hears the callee's line", async () => {
    const s = await setup()
    const spoken = await s.leg.say(AGENT.join(" "))
    expect(spoken.interrupted).toBeUndefined()
    expect(spoken.durationMs).toBeGreaterThan(3000)
    expect(s.sentences).toHaveLength(2)
    // The carrier's side hears each sentence in the persona's voice.
    const ear = SphinxDecoder.create()
    stops.push(() => ear.free())
    ear.listenFor(AGENT)
    for (const [i, sentence] of s.sentences.entries()) {
      for (const f of sentence.frames) ear.frame(f)
      expect(ear.end()).toBe(
        sentencesOf(AGENT.join(" "))
          [i]!.toLowerCase()
          .replace(/[^a-z ]/g, ""),
      )
    }
    const heard = s.leg.listen()
    await s.speak(CALLEE[0]!)
    expect((await heard)?.text).toBe("can you do it for less")
  })

  it("is cut off when the callee speaks over it, saying the sentences heard whole", async () => {
    const s = await setup()
    const saying = s.leg.say(AGENT.join(" "))
    // The carrier plays the first sentence; the callee speaks during the second.
    for (let i = 0; i < 300 && s.sentences.length < 1; i++) await sleep(20)
    s.holdMarks()
    for (let i = 0; i < 300 && s.pendingFrames() < 10; i++) await sleep(20)
    await s.speak(CALLEE[2]!)
    const spoken = await saying
    expect(spoken.interrupted).toEqual({ played: AGENT[0] })
    expect(s.sentences).toHaveLength(1) // the second sentence's mark never went
    expect((await s.leg.listen())?.text).toBe("no thank you")
  })

  it("hears a key the callee presses as a turn, and a silence as an empty line to ask again after", async () => {
    const s = await setup()
    const pressed = s.leg.listen()
    s.carrier("dtmf", { digit: "7" })
    expect((await pressed)?.text).toBe("(pressed 7)")
    const quiet = new MediaLeg({
      providerCallId: "CA-quiet",
      voice: { gender: "female", speed: 1 },
      recognizer: { frame() {}, partial: () => "", end: async () => "", free() {} },
      synth: fliteSynthesizer,
      silenceMs: 200,
      open: (events) =>
        new MediaSession({
          bus: makeMemoryBus(),
          tenantId: T,
          callId: 99,
          voiced: () => false,
          pacer: new Pacer(),
          events,
        }),
    })
    expect(await quiet.listen()).toMatchObject({ text: "" })
  })

  it("waits for a transcript later than the silence window: speech being transcribed is not silence", async () => {
    const bus = makeMemoryBus()
    const vad = await Vad.create()
    const pacer = new Pacer()
    stops.push(() => {
      pacer.stop()
      vad.free()
    })
    const leg = new MediaLeg({
      providerCallId: "CA-slow",
      voice: { gender: "female", speed: 1 },
      // A recogniser as slow as the general model on a busy machine: the transcript 600 ms after the end.
      recognizer: { frame() {}, partial: () => "", end: () => sleep(600).then(() => "no thank you"), free() {} },
      synth: fliteSynthesizer,
      silenceMs: 200,
      open: (events) => new MediaSession({ bus, tenantId: T, callId: 98, voiced: (f) => vad.voiced(f), pacer, events }),
    })
    const carrier = (kind: string, payload: Uint8Array | object) =>
      bus.publish(mediaInSubject(T, 98), payload, { headers: { [MEDIA_KIND_HEADER]: kind } })
    // The callee's line is rendered before the agent listens: on a loaded machine flite alone can
    // outlast the 200 ms silence window, which would then (rightly) end the wait before any speech.
    const { frames } = await speakForPhone(CALLEE[2]!, { gender: "male", speed: 1, variant: 1 })
    carrier("start", { stream_sid: "MZ", call_sid: "CA-slow" })
    const heard = leg.listen()
    for (const f of [...frames, ...Array.from({ length: 30 }, () => silence)]) carrier("media", f)
    await bus.flush()
    expect((await heard)?.text).toBe("no thank you")
  })

  it("answers listen() with null and refuses say() once the call has ended", async () => {
    const s = await setup()
    const heard = s.leg.listen()
    s.carrier("stop", {})
    expect(await heard).toBeNull()
    await expect(s.leg.say("Hello?")).rejects.toThrow(/ended/)
  })
})
