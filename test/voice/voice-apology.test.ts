// Never dead air when no voice can speak (runtime/voice/media-leg.ts): a sentence that neither the hosted voice
// nor the offline engine behind it renders ends the turn with an apology rendered ahead, and the conversation
// ends the call after it as the agent's failure. Fake synthesisers, a carrier played over an in-process bus.
import { afterEach, describe, expect, it, vi } from "vitest"
import { FallbackSynth } from "../../runtime/voice/hosted-speech.js"
import { type Apology, apologyRenderer, MediaLeg, VOICE_APOLOGY } from "../../runtime/voice/media-leg.js"
import { MediaSession } from "../../runtime/voice/media-session.js"
import { converse } from "../../src/calls/conversation.js"
import { makeMemoryBus } from "../../src/platform/bus/memory.bus.js"
import { Pacer } from "../../src/platform/pacer.js"
import { MEDIA_KIND_HEADER, mediaInSubject, mediaOutSubject } from "../../src/platform/subjects.js"
import { frames as framesOf } from "../../src/providers/audio/g711.js"
import { makeSimLlm } from "../../src/providers/llm/sim.llm.js"
import { ScriptRecognizer } from "../../src/providers/speech/script.recognizer.js"
import type { PhoneSpeech, PhoneVoice, StreamingSynthesizer } from "../../src/providers/speech/streaming.interface.js"
import { validateRuleBook } from "../../src/workflows/rulebook.schema.js"
import { simulateRuleBook } from "../../src/workflows/rulebook.sim-writer.js"

const T = 4
const CALL = 17
const VOICE: PhoneVoice = { gender: "female", speed: 1, variant: 0 }
/** Three frames of a sentence's audio, told apart by their byte. */
const audio = (byte: number, n = 3): PhoneSpeech => {
  const frames = Array.from({ length: n }, () => new Uint8Array(160).fill(byte))
  return { frames, durationMs: n * 20, firstAudioMs: 1, voice: "fake" }
}
const APOLOGY: Apology = { text: VOICE_APOLOGY, speech: audio(0x2a, 5) }

/** A synthesiser that renders what `render` gives for a sentence, and throws when it throws; what it was asked. */
function fakeSynth(name: string, render: (text: string) => PhoneSpeech) {
  const asked: string[] = []
  const synth: StreamingSynthesizer = {
    name,
    speak: async (text) => {
      asked.push(text)
      return render(text)
    },
  }
  return { synth, asked }
}
const refuse = (why: string) => (): PhoneSpeech => {
  throw new Error(why)
}

let stops: Array<() => void> = []
afterEach(() => {
  for (const s of stops) s()
  stops = []
})

/** A leg over a carrier that plays every sentence and says so; what the carrier got, mark by mark. */
async function legWith(synth: StreamingSynthesizer, apology?: Promise<Apology | undefined>) {
  const bus = makeMemoryBus()
  const pacer = new Pacer()
  stops.push(() => pacer.stop())
  const sent: Array<{ mark: string; frames: Uint8Array[] }> = []
  const kinds: string[] = []
  let pending: Uint8Array[] = []
  const carrier = (kind: string, payload: Uint8Array | object) =>
    bus.publish(mediaInSubject(T, CALL), payload, { headers: { [MEDIA_KIND_HEADER]: kind } })
  bus.subscribe(mediaOutSubject(T, CALL), (m) => {
    const kind = String(m.headers?.[MEDIA_KIND_HEADER])
    kinds.push(kind)
    if (kind === "media") pending.push(...framesOf(m.data))
    else if (kind === "mark") {
      const mark = String(m.json<{ name: string }>().name)
      sent.push({ mark, frames: pending })
      pending = []
      carrier("mark", { name: mark })
    }
  })
  const failures: Array<{ stage: string; err: unknown }> = []
  const leg = new MediaLeg({
    providerCallId: "CA-apology",
    voice: VOICE,
    recognizer: new ScriptRecognizer(() => undefined),
    synth,
    onFailure: (stage, err) => failures.push({ stage, err }),
    ...(apology !== undefined && { apology }),
    open: (events) => new MediaSession({ bus, tenantId: T, callId: CALL, voiced: () => false, pacer, events }),
  })
  carrier("start", { stream_sid: "MZ", call_sid: "CA-apology" })
  await bus.flush()
  return { leg, sent, kinds, failures }
}

describe("a call whose voice fails", () => {
  it("ends the turn with the apology when the hosted voice and the offline engine both fail a sentence", async () => {
    const hosted = fakeSynth("elevenlabs", (text) => {
      if (text.startsWith("Second")) throw new Error("the vendor closed the stream 1011")
      return audio(0x11)
    })
    const offline = fakeSynth("flite", refuse("flite is not installed"))
    const gaveUp: Error[] = []
    const voice = new FallbackSynth(hosted.synth, offline.synth, undefined, (err) => gaveUp.push(err))
    const s = await legWith(voice, Promise.resolve(APOLOGY))

    const spoken = await s.leg.say("First sentence. Second sentence. Third sentence.")
    // Heard: the first sentence, then the apology; the rest of the turn was not tried.
    expect(spoken.voiceFailed).toEqual({ played: `First sentence. ${VOICE_APOLOGY}` })
    expect(spoken.durationMs).toBe(60 + 100)
    expect(s.sent.map((x) => x.frames.map((f) => f[0]))).toEqual([
      [0x11, 0x11, 0x11],
      [0x2a, 0x2a, 0x2a, 0x2a, 0x2a],
    ])
    expect({ hosted: hosted.asked, offline: offline.asked }).toEqual({
      hosted: ["First sentence.", "Second sentence."],
      offline: ["Second sentence."],
    })
    expect(gaveUp.map((e) => e.message)).toEqual(["the vendor closed the stream 1011"])
    expect(s.failures.map((f) => [f.stage, (f.err as Error).message])).toEqual([
      ["synthesis", "flite is not installed"],
    ])

    // The leg says nothing more (no engine is tried again), and says why.
    expect(await s.leg.say("Are you still there?")).toEqual({ durationMs: 0, voiceFailed: { played: "" } })
    expect(hosted.asked.length + offline.asked.length).toBe(3)
  })

  it("the conversation ends the call after the apology, as the agent's failure, recorded as heard", async () => {
    const raw = simulateRuleBook({
      prompt: "Call our gym members about renewing their membership.",
      currency: "USD",
      country: "US",
      planTier: "free",
      objections: [],
    })
    const book = validateRuleBook(raw, { currency: "USD", planTier: "free" })
    if (!book.ok) throw new Error(JSON.stringify(book.errors))
    // The opening's first sentence is spoken; the engine fails from the second on.
    let rendered = 0
    const engine = fakeSynth("flite", () => {
      if (rendered++ > 0) throw new Error("flite timed out")
      return audio(0x11)
    })
    const s = await legWith(engine.synth, Promise.resolve(APOLOGY))
    const turns: Array<{ speaker: string; text: string }> = []
    const result = await converse({
      leg: s.leg,
      llm: makeSimLlm(),
      ruleBook: book.value,
      callee: { name: "Ann" },
      agentName: "Anna",
      company: "River Fitness",
      onTurn: (t) => turns.push({ speaker: t.speaker, text: t.text }),
      requestApproval: async () => "timeout",
      signal: new AbortController().signal,
    })
    expect(result).toEqual({ outcome: "agent_error", turns: 1, calleeHungUp: false })
    expect(engine.asked.length).toBeGreaterThanOrEqual(2)
    expect(turns).toEqual([{ speaker: "agent", text: `${engine.asked[0]} ${VOICE_APOLOGY}` }])
    // The carrier played the sentence and the apology, then was asked to hang up.
    expect(s.sent.map((x) => x.frames[0]![0])).toEqual([0x11, 0x2a])
    await vi.waitFor(() => expect(s.kinds.at(-1)).toBe("hangup"), { timeout: 1_000, interval: 5 })
  })

  it("renders the apology once a voice, sketched when the engine cannot, and tries the engine next time", async () => {
    const apologyIn = apologyRenderer()
    const engine = fakeSynth("flite", () => audio(0x33, 200))
    const [a, b] = await Promise.all([apologyIn(engine.synth, VOICE), apologyIn(engine.synth, VOICE)])
    expect(a).toBe(b)
    expect(engine.asked).toEqual([VOICE_APOLOGY])
    expect(a!.speech.frames[0]![0]).toBe(0x33)

    const broken = fakeSynth("broken", refuse("no engine"))
    const sketched = await apologyIn(broken.synth, VOICE)
    expect(sketched.text).toBe(VOICE_APOLOGY)
    expect(sketched.speech.voice).toBe("sketch-female")
    expect(sketched.speech.durationMs).toBeGreaterThan(2_000) // as long as the words take: not a blip
    await apologyIn(broken.synth, VOICE)
    expect(broken.asked).toHaveLength(2)
  })
})
