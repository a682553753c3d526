// Outbound calls on the fake telco_a: `POST …/Calls.json` creates a call and the fake then plays
// the provider's part over the real protocol: signed status callbacks (ringing, in-progress,
// busy, no-answer, completed) and voice webhooks, reading our TwiML (<Say>, <Gather>, <Redirect>,
// <Hangup/>) and answering each Gather with the callee's line. The callee behaves by the last
// digit of the number, as the built-in simulator does: 0 no answer, 1 busy, 2 voicemail, 3–5
// agree, 6 decline.
import { randomBytes } from "node:crypto"
import { Pacer } from "../../src/platform/pacer.js"
import { frames as framesOf } from "../../src/providers/audio/g711.js"
import { speakForPhone } from "../../src/providers/speech/flite.phone.js"
import { SimCalleeStream } from "../../src/providers/telephony/sim.media.js"
import { signTelcoA } from "../../src/providers/telephony/telco-a.signature.js"
import type { FakeTelco } from "./fake-telco.js"

export interface FakeCall {
  readonly sid: string
  readonly to: string
  readonly from: string | undefined
  readonly url: string
  readonly statusCallback: string
  readonly heard: string[]
  readonly said: string[]
  status: string
  done: Promise<void>
  /** Patch-in: the conference the call was put in (by a voice answer or a REST update), and whether recorded. */
  conference?: string
  recorded?: boolean
  /** A call created with inline TwiML (an operator dialed into a conference) rather than a voice URL. */
  readonly twiml?: string
  /** A call bridged to a media stream (<Connect><Stream>): its URL, and the agent's audio as the carrier got it. */
  streamUrl?: string
  agentAudio?: Uint8Array[]
}

const CALLEE_LINES: Record<string, string[]> = {
  agree: ["Yes, that sounds good.", "Yes, go ahead, let's do it."],
  decline: ["I'm not interested, no thanks.", "No thanks, I'm not interested."],
  // Said aloud on a media stream: lines the general English model recognises in the fake's voice.
  declineAloud: ["No thanks, I'm not interested.", "No thanks, I'm not interested."],
}

const tag = (doc: string, name: string) =>
  [...doc.matchAll(new RegExp(`<${name}[^>]*>([\\s\\S]*?)</${name}>`, "g"))].map((m) => unxml(m[1]!))
const attr = (doc: string, name: string, attribute: string) =>
  new RegExp(`<${name}[^>]*\\s${attribute}="([^"]*)"`).exec(doc)?.[1]
const unxml = (s: string) =>
  s
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&amp;/g, "&")
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Adds call creation to the fake; returns the calls it placed, by sid. */
export function fakeOutboundCalls(fake: FakeTelco, opts: { stepMs?: number } = {}): Map<string, FakeCall> {
  const calls = new Map<string, FakeCall>()
  const step = opts.stepMs ?? 5

  /** Reads a <Conference> out of TwiML onto the call; true when there was one. */
  const joinConference = (call: FakeCall, doc: string): boolean => {
    const name = tag(doc, "Conference")[0]
    if (name === undefined) return false
    call.conference = name
    call.recorded = attr(doc, "Conference", "record") === "record-from-start"
    call.status = "in-progress"
    return true
  }

  // Updating a live call: new TwiML (it leaves what it was doing for it), or Status=completed.
  fake.handle("POST", /^\/Calls\/(?<sid>[^/]+)\.json$/, ({ req, params }) => {
    const call = calls.get(params.sid!)
    if (call === undefined) return { status: 404, body: { code: 20404, message: "not found", status: 404 } }
    if (req.form.Twiml !== undefined) joinConference(call, req.form.Twiml)
    else if (req.form.Status === "completed") call.status = "completed"
    return { status: 200, body: { sid: call.sid, status: call.status } }
  })

  fake.handle("POST", /^\/Calls\.json$/, ({ req, account }) => {
    const f = req.form
    if (f.To && f.Twiml && !f.Url) {
      // An operator dialed straight into a conference: it answers at once (no webhooks to play).
      const sid = `CA${randomBytes(16).toString("hex")}`
      const call: FakeCall = {
        sid,
        to: f.To,
        from: f.From,
        url: "",
        statusCallback: "",
        heard: [],
        said: [],
        status: "in-progress",
        done: Promise.resolve(),
        twiml: f.Twiml,
      }
      joinConference(call, f.Twiml)
      calls.set(sid, call)
      return { status: 201, body: { sid, status: "queued", to: f.To, from: f.From } }
    }
    if (!f.To || !f.Url || !f.StatusCallback)
      return { status: 400, body: { code: 21205, message: "To, Url and StatusCallback are required", status: 400 } }
    const sid = `CA${randomBytes(16).toString("hex")}`
    const call: FakeCall = {
      sid,
      to: f.To,
      from: f.From,
      url: f.Url,
      statusCallback: f.StatusCallback,
      heard: [],
      said: [],
      status: "queued",
      done: Promise.resolve(),
    }
    calls.set(sid, call)
    call.done = play(call, account.token).catch((e: unknown) => {
      call.status = `error: ${String(e)}`
    })
    return { status: 201, body: { sid, status: "queued", to: f.To, from: f.From } }
  })

  async function play(call: FakeCall, token: string): Promise<void> {
    const base = { CallSid: call.sid, To: call.to, From: call.from ?? "", Direction: "outbound-api" }
    const status = async (CallStatus: string, extra: Record<string, string> = {}) => {
      call.status = CallStatus
      await fake.callback(call.statusCallback, { ...base, CallStatus, ...extra }, { token })
    }
    await sleep(step)
    const digit = call.to.at(-1)!
    await status("ringing")
    await sleep(step)
    if (digit === "0") return status("no-answer")
    if (digit === "1") return status("busy")
    const machine = digit === "2"
    const answeredBy = machine ? "machine_start" : "human"
    await status("in-progress", { AnsweredBy: answeredBy })
    const lines = machine
      ? ["Hi, you've reached Sam. Please leave a message after the tone."]
      : digit === "6"
        ? CALLEE_LINES.decline!
        : CALLEE_LINES.agree!
    let url = call.url
    let params: Record<string, string> = { ...base, CallStatus: "in-progress", AnsweredBy: answeredBy }
    let turn = 0
    for (let exchange = 0; exchange < 40; exchange++) {
      if (call.conference !== undefined) return // moved into a conference by a REST update
      const res = await fake.callback(url, params, { token })
      const doc = await res.text()
      if (res.status !== 200) throw new Error(`voice webhook answered ${res.status}: ${doc}`)
      call.heard.push(...tag(doc, "Say"))
      if (joinConference(call, doc) || call.conference !== undefined) return
      const stream = attr(doc, "Stream", "url")
      if (stream !== undefined) {
        turn = await playStream(call, unxml(stream), digit === "6" ? CALLEE_LINES.declineAloud! : lines, token)
        break
      }
      if (doc.includes("<Hangup/>")) break
      const redirect = tag(doc, "Redirect")[0]
      if (redirect !== undefined) {
        url = redirect
        params = { ...base, CallStatus: "in-progress" }
        await sleep(step)
        continue
      }
      const action = attr(doc, "Gather", "action")
      if (action === undefined) break
      await sleep(step)
      if (call.conference !== undefined) return
      const line = lines[Math.min(turn, lines.length - 1)]!
      turn++
      call.said.push(line)
      url = unxml(action)
      params = { ...base, CallStatus: "in-progress", SpeechResult: line, Confidence: "0.92" }
    }
    await status("completed", { CallDuration: String(Math.max(1, turn * 4)) })
  }

  /**
   * A call on a media stream: the fake connects to the stream URL as the carrier, and the callee
   * says each line aloud (flite, a man's voice) once the agent has spoken and fallen quiet, until the
   * stream ends (Parley hung up) or the lines run out. Answers how many lines were said. The upgrade
   * is signed as telco_a signs it: X-telco_a-Signature over the stream URL, with the account's token.
   */
  async function playStream(call: FakeCall, url: string, lines: readonly string[], token: string): Promise<number> {
    call.streamUrl = url
    const agentAudio: Uint8Array[] = []
    call.agentAudio = agentAudio
    const pacer = new Pacer()
    let ended!: () => void
    const over = new Promise<void>((resolve) => (ended = resolve))
    let closed = false
    const s = new SimCalleeStream(
      url,
      `MZ${call.sid.slice(2)}`,
      call.sid,
      pacer,
      () => {
        closed = true
        ended()
      },
      (audio) => agentAudio.push(...framesOf(audio)), // a late wake-up sends a few frames at once
      { "X-telco_a-Signature": signTelcoA(token, url) },
    )
    let said = 0
    try {
      for (const line of lines) {
        await s.agentPlayedFor(200)
        await s.agentQuietFor(800)
        if (closed) break
        const speech = await speakForPhone(line, { gender: "male", speed: 1, variant: 1 })
        call.said.push(line)
        said++
        await s.speak(speech.frames)
      }
      await Promise.race([over, sleep(30_000)])
    } finally {
      s.stop()
      pacer.stop()
    }
    return said
  }

  return calls
}
