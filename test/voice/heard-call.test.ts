// A run on the simulator heard as audio, end to end (MEDIA_STREAMS=all): the simulated carrier
// connects each answered call's media stream to the api's WebSocket with its single-use token, the
// runtime hears the callee's audio (voice activity, end of speech, PocketSphinx) and speaks the
// agent's turns in the persona's voice, paced, with marks; a callee who speaks over the agent cuts it
// off. The test records both directions off the bus, decodes them, and checks what each side heard
// against the stored turns.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Bus } from "../../src/platform/Bus.js"
import { MEDIA_KIND_HEADER } from "../../src/platform/subjects.js"
import { BeepDetector } from "../../src/providers/audio/beep.js"
import { decode, frames as framesOf } from "../../src/providers/audio/g711.js"
import { speakForPhone } from "../../src/providers/speech/flite.phone.js"
import { sentencesOf } from "../../src/providers/speech/sentences.js"
import { SphinxDecoder, sphinxAvailable, wordsOf } from "../../src/providers/speech/sphinx.recognizer.js"
import { SIM_CALLEE_LINES } from "../../src/providers/telephony/sim.telephony.js"
import { findVoice } from "../../src/voices/voices.catalog.js"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const required = process.env.REQUIRE_POCKETSPHINX === "1"
let srv: TestServer
let a: ReturnType<typeof api>

/**
 * The simulator's time scale: rings, and the call's audio, run five times faster than real time
 * (the fastest PocketSphinx hears the simulated callee at; faster, the stand-in does).
 */
const SCALE = 0.2

/** One call's audio as it went by: the agent's sentences (frames up to each mark), the callee's frames. */
interface Recorded {
  /**
   * The agent's sentences sent, each with whether the carrier said it was played (its mark came back) and
   * whether a barge-in's clear may have cut it (`atClear`).
   */
  agent: Array<{ mark: string; frames: Uint8Array[]; played: boolean; atClear?: true }>
  pending: Uint8Array[]
  clears: number
  callee: Uint8Array[]
  /** When the callee's side completed a beep, and when the agent's first frame came (performance.now()). */
  beepAt?: number
  firstAgentAt?: number
  beeps: BeepDetector
}

beforeAll(async () => {
  // Rings a fifth of real time; the audio is real time whatever the scale (the calls' caps at a fifth: 60 s).
  srv = await startTestServer({ env: { ...FAST_RUNTIME_ENV, SIM_TIME_SCALE: String(SCALE), MEDIA_STREAMS: "all" } })
  a = api(srv)
}, 30_000)
afterAll(async () => srv?.stop())

const call = async (s: Session, method: string, path: string, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

/** Recognises `frames` listening for `phrases`: the words heard. */
function recognise(frames: readonly Uint8Array[], phrases: readonly string[]): string {
  const d = SphinxDecoder.create()
  try {
    d.listenFor(phrases)
    for (const f of frames) d.frame(f)
    return d.end()
  } finally {
    d.free()
  }
}

/** The phrases a recogniser can spell (every word in its dictionary), as it spells them. */
function spellable(phrases: readonly string[]): Set<string> {
  const d = SphinxDecoder.create()
  try {
    return new Set(d.listenFor(phrases))
  } finally {
    d.free()
  }
}

describe.skipIf(!required && !sphinxAvailable())("a simulated run heard as audio", () => {
  it("speaks the agent's turns in the persona's voice, hears the callee, and honours a barge-in", async () => {
    // The runtime says how it hears callees.
    const health = (await (await fetch(`${srv.url}/healthz`)).json()) as Json
    expect(health.voice).toEqual({ media_streams: "all", recognition: "pocketsphinx" })
    const s = await a.signup({ country: "US" })
    // A name the recogniser can spell (the default names the owner's made-up address).
    expect((await call(s, "PATCH", "/api/workspace", { name: "River Fitness" })).status).toBe(200)
    const intent = (await call(s, "POST", "/billing/topup", { amount_minor: 1_000_000 })).body
    await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
    const w = (
      await call(s, "POST", "/api/workflows", {
        nl_prompt: "Call lapsed members and offer $20 off to rejoin; leave a message on voicemail.",
      })
    ).body
    // 2: a voicemail (greeting, then a beep); 3: agrees; 6: declines, and speaks over the agent's second turn.
    const rows = [
      { phone: "+12025550112", name: "Cleo Cole" },
      { phone: "+12025550113", name: "Ann Archer" },
      { phone: "+12025550116", name: "Bob Baker" },
    ]
    expect((await call(s, "POST", `/api/workflows/${w.id}/audience`, { rows })).status).toBe(200)
    await call(s, "PUT", `/api/workflows/${w.id}/compliance`, { consent_attestation_text: "Opted in." })
    // The workflow waits longer than the default 500 ms of silence before the callee's turn is over.
    const listening = { end_of_speech_ms: 800, reprompt_after_seconds: 7, goodbye_after_seconds: 21 }
    const put = await call(s, "PUT", `/api/workflows/${w.id}`, { rule_book: { listening } })
    expect(put.status).toBe(200)
    expect(put.body.rule_book.listening).toEqual(listening)

    let runId = 0
    const recorded = new Map<number, Recorded>()
    const rec = (callId: number): Recorded => {
      let r = recorded.get(callId)
      if (r === undefined)
        recorded.set(callId, (r = { agent: [], pending: [], clears: 0, callee: [], beeps: new BeepDetector() }))
      return r
    }
    const bus = srv.running.runtime.runSync(Bus)
    const tap = bus.subscribe(`media.${s.tenantId}.*.*`, (m) => {
      const [, , id, way] = m.subject.split(".")
      const r = rec(Number(id))
      const kind = m.headers?.[MEDIA_KIND_HEADER]
      // The carrier plays a sentence to its end, then sends its mark back.
      if (way === "in" && kind === "mark") {
        const name = String(m.json<{ name: string }>().name)
        const sent = r.agent.find((x) => x.mark === name)
        if (sent !== undefined) sent.played = true
      }
      if (way === "in" && kind === "media") {
        // Faster than real time a message carries a few frames.
        for (const f of framesOf(m.data)) {
          r.callee.push(f)
          if (r.beeps.push(decode(f)) && r.beepAt === undefined) r.beepAt = performance.now()
        }
      }
      if (way !== "out") return
      if (kind === "media") {
        r.firstAgentAt ??= performance.now()
        r.pending.push(...framesOf(m.data))
      } else if (kind === "mark") {
        r.agent.push({ mark: String(m.json<{ name: string }>().name), frames: r.pending, played: false })
        r.pending = []
      } else if (kind === "clear") {
        // A barge-in: the sentences the carrier had not finished were not heard, even those whose
        // mark went out. The last one played may have been played after the runtime heard the callee
        // (its mark crossed the clear): the runtime counts what it knew when it cut in, so it may be either.
        r.clears++
        r.pending = []
        const cut = r.agent.filter((x) => !x.played)
        const lastPlayed = r.agent.filter((x) => x.played).at(-1)
        for (const x of lastPlayed === undefined ? cut : [...cut, lastPlayed]) x.atClear = true
      }
    })
    try {
      const run = await call(s, "POST", `/api/workflows/${w.id}/run`)
      expect(run.status).toBe(201)
      runId = run.body.run_id as number
      const deadline = Date.now() + 150_000
      for (;;) {
        const [r] = await srv.sql<[{ status: string }]>`select status from runs where id = ${runId}`
        if (r.status === "completed") break
        if (Date.now() > deadline) throw new Error(`the run is still ${r.status}`)
        await new Promise((res) => setTimeout(res, 500))
      }
    } finally {
      tap.unsubscribe()
    }

    const targets = await srv.sql<{ phone_e164: string; outcome: string }[]>`
      select phone_e164, outcome from run_targets where run_id = ${runId} order by phone_e164`
    expect(targets.map((t) => t.outcome)).toEqual(["voicemail_left", "agreed", "declined"])
    const calls = await srv.sql<{ id: number; phone_e164: string }[]>`
      select id, phone_e164 from calls where run_id = ${runId} order by phone_e164`
    const persona = findVoice(
      ((await call(s, "GET", `/api/workflows/${w.id}`)).body.rule_book as Json).persona as string,
    )!

    // The voicemail: its greeting heard, and the message left only after its beep.
    const machine = calls.find((c) => c.phone_e164.endsWith("2"))!
    const vm = recorded.get(machine.id)!
    expect(vm.beepAt, "the beep went by").toBeDefined()
    expect(vm.firstAgentAt!).toBeGreaterThan(vm.beepAt!)
    const vmTurns = await srv.sql<{ speaker: string; text: string }[]>`
      select speaker, text from turns where call_id = ${machine.id} order by turn_index`
    expect(vmTurns.map((t) => t.speaker)).toEqual(["callee", "agent"])
    expect(SIM_CALLEE_LINES.map((l) => wordsOf(l).join(" "))).toContain(vmTurns[0]!.text)

    for (const c of calls.filter((x) => x !== machine)) {
      const r = recorded.get(c.id)!
      expect(r, `call ${c.id} was heard`).toBeDefined()
      const turns = await srv.sql<
        { speaker: string; text: string; interrupted: boolean; latency_ms: Json | null; turn_index: number }[]
      >`select speaker, text, interrupted, latency_ms, turn_index from turns where call_id = ${c.id}
        order by turn_index`
      const agentTurns = turns.filter((t) => t.speaker === "agent")
      const calleeTurns = turns.filter((t) => t.speaker === "callee")
      expect(agentTurns.length).toBeGreaterThanOrEqual(2)
      expect(calleeTurns.length).toBeGreaterThanOrEqual(1)

      // What the callee heard: every sentence the agent's turns say it heard, in order, as audio
      // that a recogniser understands; the first in the persona's own voice, frame for frame.
      const heardSentences = agentTurns.flatMap((t) => sentencesOf(t.text))
      // Each is a sentence sent, in order, frame for frame the persona's voice saying it; a sentence
      // sent but not counted as heard is one a barge-in cut.
      const rendered = await Promise.all(heardSentences.map((x) => speakForPhone(x, persona.speech)))
      const played: Recorded["agent"] = []
      let next = 0
      for (const [i, speech] of rendered.entries()) {
        const audio = Buffer.concat(speech.frames)
        const j = r.agent.findIndex((x, k) => k >= next && Buffer.concat(x.frames).equals(audio))
        expect(j, `"${heardSentences[i]}" was sent in the persona's voice`).toBeGreaterThanOrEqual(0)
        for (const skipped of r.agent.slice(next, j)) expect(skipped.atClear, `${skipped.mark} was cut`).toBe(true)
        played.push(r.agent[j]!)
        next = j + 1
      }
      // (Sentences with a word the dictionary lacks, such as the workspace's made-up name, are left out.)
      const known = spellable(heardSentences)
      const checked = heardSentences.filter((x) => known.has(wordsOf(x).join(" ")))
      expect(checked.length).toBeGreaterThanOrEqual(heardSentences.length / 2)
      for (const [i, sentence] of heardSentences.entries())
        if (known.has(wordsOf(sentence).join(" ")))
          expect(recognise(played[i]!.frames, checked)).toBe(wordsOf(sentence).join(" "))

      // What the agent heard: the callee's stored lines are simulator lines, and in their audio.
      for (const t of calleeTurns) expect(SIM_CALLEE_LINES.map((l) => wordsOf(l).join(" "))).toContain(t.text)
      const calleeWords = recognise(r.callee, SIM_CALLEE_LINES)
      expect(calleeWords.length).toBeGreaterThan(0)

      // Each agent turn that answered the callee says how long it took, stage by stage.
      const answered = agentTurns.filter((t) => t.turn_index > 0 && t.latency_ms !== null)
      expect(answered.length).toBeGreaterThanOrEqual(1)
      for (const t of answered) {
        const l = t.latency_ms!
        expect(l.total).toBeGreaterThan(0)
        // The workflow's 800 ms of the call's audio, in real time (the default would have waited 500).
        expect(l.endpointing).toBeGreaterThanOrEqual(800 * SCALE - 1)
        const parts = l.endpointing + l.transcript + l.model + l.synthesis + l.hop
        expect(Math.abs(parts - l.total)).toBeLessThanOrEqual(5)
      }

      // The call's view carries the same: each reply's latency, the cut-off turn.
      const view = (await call(s, "GET", `/api/calls/${c.id}`)).body
      const viewed = (view.transcript as Json[]).filter((t) => t.speaker === "agent")
      expect(viewed.map((t) => t.latency_ms ?? null)).toEqual(agentTurns.map((t) => t.latency_ms))
      expect(viewed.map((t) => t.interrupted === true)).toEqual(agentTurns.map((t) => t.interrupted))

      if (c.phone_e164.endsWith("6")) {
        // The callee spoke over the agent's second turn: the carrier was cleared, the turn stored as heard.
        expect(r.clears).toBeGreaterThanOrEqual(1)
        const cut = agentTurns.find((t) => t.interrupted)
        expect(cut, "an interrupted agent turn").toBeDefined()
        expect(calleeTurns.some((t) => /not interested/.test(t.text))).toBe(true)
      } else {
        expect(r.clears).toBe(0)
        expect(agentTurns.some((t) => t.interrupted)).toBe(false)
      }
    }
  }, 200_000)
})
