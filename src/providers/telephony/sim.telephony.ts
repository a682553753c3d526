// The built-in telephony simulator: the callee's behaviour comes from the last digit of the number
// dialed (DESIGN.md, "Simulated providers"), and ring, speech and reply times scale by timeScale.
//
// It must carry 10,000 concurrent legs in one process, so a leg is one small object: methods on
// the prototype, callee lines from a shared table by index, what the agent said kept only as a
// few cue bits, and at most one timer at a time (setImmediate when the scaled delay is 0), on the
// simulator's fair timers (a burst of legs due at once does not hold the event loop).
import { type FairTimer, FairTimers } from "../../platform/fair-timers.js"
import type { Pacer } from "../../platform/pacer.js"
import { beepFrames } from "../audio/beep.js"
import { encode } from "../audio/g711.js"
import { sentencesOf } from "../speech/sentences.js"
import type { PhoneVoice, StreamingSynthesizer } from "../speech/streaming.interface.js"
import { loud, SimCalleeStream } from "./sim.media.js"
import {
  type CallLeg,
  type CarrierEvent,
  type DialRequest,
  type MediaStreams,
  type Spoken,
  TelephonyError,
  type TelephonyProvider,
} from "./telephony.interface.js"

/**
 * Calls heard as audio: an answered call is bridged to Parley's media stream, as a carrier does,
 * and the callee speaks its lines aloud in a voice of its own (the number picks it).
 */
export interface SimMediaOptions {
  readonly streams: MediaStreams
  /** The voice callees speak in at a time scale (the sim's: its calls' audio runs at its timeScale). */
  readonly synthAt: (timeScale: number) => StreamingSynthesizer
  /** The pacer of audio at a time scale. */
  readonly pacerAt: (timeScale: number) => Pacer
}

export interface SimTelephonyOptions {
  /** Multiplies every ring, speech and reply time; 0 runs calls as fast as the event loop turns. */
  readonly timeScale: number
  /** Clock for event and utterance times (epoch ms); default Date.now. */
  readonly now?: () => number
  /** Mixed into each number's hash: another seed gives other phrasings and timings, as stable. */
  readonly seed?: number
  /**
   * Whether the sim's ring and speech timers keep the process alive. Default false: a server's
   * sockets hold the process, and a stopping process should not wait for simulated calls. A bare
   * script that only awaits sim calls at timeScale > 0 must pass true, or Node may exit with the
   * calls unfinished.
   */
  readonly holdProcess?: boolean
  /** Bridges answered calls to media streams, their audio paced at timeScale. */
  readonly media?: SimMediaOptions
}

/** Speech rate of the agent's voice. */
const WORDS_PER_SECOND = 2.6
/** Unscaled ring time before the answer (or NO_ANSWER): 3–8 s, fixed per number. */
const RING_MIN_MS = 3_000
const RING_SPAN_MS = 5_000
/** Unscaled time for each callee utterance: 1.5–4 s. */
const UTTERANCE_MIN_MS = 1_500
const UTTERANCE_SPAN_MS = 2_500
/** Busy tone, and the callee's silence before they put the phone down. */
const BUSY_MS = 1_000
const SILENCE_MS = 1_000
/** A callee hangs up after this many utterances, whatever the agent does. */
const CALLEE_PATIENCE = 12

// Leg phases.
const DIALING = 0
const RINGING = 1
const CONNECTED = 2
const ENDED = 3

// What the leg's one timer is for.
const DUE_NONE = 0
const DUE_RINGING = 1
const DUE_RING_END = 2
const DUE_BUSY = 3
const DUE_SAY = 4
const DUE_LISTEN = 5
const DUE_CALLEE_HANGUP = 6

// What the callee has heard the agent say since their last utterance, as bits.
const CUE_OFFER = 1
const CUE_CANT = 2
const CUE_CALLBACK = 4
const CUE_HUMAN = 8
const CUE_BYE = 16
const CUE_QUESTION = 32
const CUES: ReadonlyArray<readonly [number, RegExp]> = [
  [CUE_OFFER, /\b(?:offer\w*|discount\w*|off|price\w*|deal|waive\w*|credit)\b/],
  [CUE_CANT, /\b(?:can't|cannot|can not|unable|not able|couldn't)\b/],
  [CUE_CALLBACK, /\b(?:call (?:you )?back|callback|tomorrow)\b/],
  [CUE_HUMAN, /\b(?:colleague|manager|human|supervisor|transfer\w*|connect(?:ing)? you)\b/],
  [CUE_BYE, /\b(?:goodbye|bye|have a (?:good|great|nice) (?:day|evening))\b/],
  [CUE_QUESTION, /\?/],
]

// The callee's mood, kept across utterances.
const MOOD_REFUSED = 1 // the agent said no to what they asked for
const MOOD_OFFERED = 2 // the agent offered what they asked for

/** Every callee line, three phrasings each (a number keeps one phrasing for the whole call). */
const LINES = {
  greetYes: [
    "Yes, I have a minute. What is it about?",
    "Sure, go ahead. What's this about?",
    "Okay, I've got a minute. Tell me more.",
  ],
  accept: [
    "Yes, that sounds good. Let's go ahead.",
    "Sure, that works for me. Let's do it.",
    "Okay, sounds good. Go ahead.",
  ],
  goOn: ["Okay, go on.", "Alright, I'm listening.", "Right, go on."],
  object: [
    "Sorry, I don't think I need this right now.",
    "Honestly, I don't really need this.",
    "Well, I don't think we need this at the moment.",
  ],
  refuse: ["No, I'm not interested. Thank you.", "No thanks, I'm not interested.", "I'm not interested, thank you."],
  askDiscount: [
    "It sounds interesting, but it's a bit pricey for me. Can you give me a discount?",
    "I might be interested if the price were lower. Is there any discount?",
    "Well, that's more than I'd like to pay. Could you do a discount?",
  ],
  askDiscountAgain: [
    "Is there really no discount you can give me?",
    "What about a discount, though?",
    "I'd still like a discount first.",
  ],
  acceptDiscount: [
    "That's great, yes. Let's go ahead then.",
    "Oh, perfect. Yes, let's do it.",
    "Okay, with that, yes. Go ahead.",
  ],
  noDiscount: ["Then I'm not interested, sorry.", "In that case, no thanks.", "Then I'll pass, thanks."],
  askCallback: [
    "I'm busy right now. Could you call me back tomorrow?",
    "Now is not a good time. Can you call me back tomorrow?",
    "I'm in the middle of something. Please call me back tomorrow.",
  ],
  askCallbackAgain: [
    "Could you just call me back tomorrow, please?",
    "Really, tomorrow would be better. Call me back then?",
    "Please call me back tomorrow instead.",
  ],
  noCallback: [
    "Then never mind, I'm not interested.",
    "No thanks, I really can't talk now.",
    "Then I'll pass, thanks.",
  ],
  askHuman: [
    "I'd rather talk to a real person. Can you put me through to a human?",
    "Are you a robot? I want to speak to a human, please.",
    "I'd prefer to speak with a manager, please.",
  ],
  askHumanAgain: [
    "Please, can I just talk to a real person?",
    "I'd really prefer a human.",
    "Can I speak to a manager instead?",
  ],
  noHuman: ["Then I'm not interested, thanks.", "No thanks, then.", "Then I'll pass."],
  holding: ["Okay, I'll hold.", "Sure, I'll wait.", "Alright."],
  finalDecline: ["No, I'm not interested. Goodbye.", "No thanks, it's not for me. Goodbye.", "No, I'll pass. Bye."],
  voicemail: [
    "Hi, you've reached my voicemail. Please leave a message after the tone.",
    "Sorry I missed your call. Leave a message and I'll get back to you.",
    "The person you are calling is not available. Please leave a message after the tone.",
  ],
} as const satisfies Record<string, readonly [string, string, string]>

type LineKind = keyof typeof LINES
/** The callee's next move: a line to say, or hanging up. */
type CalleeMove = LineKind | "hangup"

/** The behaviour a number's last digit selects (DESIGN.md). */
export type SimCallee =
  | "no_answer"
  | "busy"
  | "voicemail"
  | "agrees"
  | "declines"
  | "wants_discount"
  | "wants_callback"
  | "wants_human"

/** The behaviour each last digit 0–9 selects: the one table (GET /api/sim/personas lists it too). */
export const SIM_CALLEE_BY_DIGIT: readonly SimCallee[] = [
  "no_answer",
  "busy",
  "voicemail",
  "agrees",
  "agrees",
  "agrees",
  "declines",
  "wants_discount",
  "wants_callback",
  "wants_human",
]

/** What the sim does for `to`, from its last digit; undefined for a number with no digit. */
/** A line as the simulated callee says it (its sentences rendered, trimmed, joined by a short pause). */
export const simCalleeAudio = (synth: StreamingSynthesizer, text: string, voice: PhoneVoice): Promise<Uint8Array[]> =>
  calleeAudio(synth, text, voice)

export function simCalleeFor(to: string): SimCallee | undefined {
  const digit = lastDigit(to)
  if (digit < 0) return undefined
  return SIM_CALLEE_BY_DIGIT[digit]
}

function lastDigit(to: string): number {
  for (let i = to.length - 1; i >= 0; i--) {
    const c = to.charCodeAt(i) - 48
    if (c >= 0 && c <= 9) return c
  }
  return -1
}

/** The callee's next move after hearing `heard` (cue bits); updates the leg's mood. */
function calleeMove(leg: SimLeg): CalleeMove {
  const heard = leg.heard
  if (leg.step >= CALLEE_PATIENCE || (heard & CUE_BYE) !== 0) return "hangup"
  if (leg.digit === 2) return leg.step === 0 ? "voicemail" : "hangup"
  if (leg.digit >= 3 && leg.digit <= 5)
    return leg.step === 0 ? "greetYes" : (heard & CUE_QUESTION) !== 0 ? "accept" : "goOn"
  if (leg.digit === 6) return leg.step === 0 ? "object" : "refuse"
  // 7, 8 and 9 ask for something, accept it when it comes, and decline once told no.
  const want = leg.digit === 7 ? ("Discount" as const) : leg.digit === 8 ? ("Callback" as const) : ("Human" as const)
  if (leg.step === 0) return `ask${want}`
  if ((heard & CUE_CANT) !== 0) {
    const first = (leg.mood & MOOD_REFUSED) === 0
    leg.mood |= MOOD_REFUSED
    return first ? `no${want}` : "finalDecline"
  }
  if ((leg.mood & MOOD_REFUSED) !== 0) return "finalDecline"
  const granted = want === "Discount" ? CUE_OFFER : want === "Callback" ? CUE_CALLBACK : CUE_HUMAN
  if ((heard & granted) !== 0) leg.mood |= MOOD_OFFERED
  if ((leg.mood & MOOD_OFFERED) === 0) return `ask${want}Again`
  if (want === "Discount") return "acceptDiscount"
  return (heard & CUE_QUESTION) !== 0 ? "accept" : "holding"
}

class SimTelephony implements TelephonyProvider {
  readonly name = "sim"
  activeLegs = 0
  private nextId = 0
  /** The legs' timers: a burst of them due at once runs in slices, with I/O between. */
  readonly timers = new FairTimers()
  constructor(
    readonly timeScale: number,
    readonly now: () => number,
    readonly seed: number,
    readonly holdProcess: boolean,
    readonly media: SimMediaOptions | undefined,
  ) {}

  dial(req: DialRequest, onEvent: (e: CarrierEvent) => void): CallLeg {
    this.nextId = (this.nextId + 1) % Number.MAX_SAFE_INTEGER
    const leg = new SimLeg(this, `sim-${req.callId}-${this.nextId}`, req, onEvent)
    this.activeLegs++
    // Events never arrive before dial returns.
    leg.arm(DUE_RINGING, 0)
    return leg
  }
}

class SimLeg implements CallLeg {
  phase = DIALING
  readonly digit: number
  /** Phrasing (0–2) and ring time, fixed per number. */
  private readonly variant: number
  private readonly ringMs: number
  /** mulberry32 state: utterance times. */
  private rng: number
  /** Callee utterances so far, what they heard since the last one, and their mood. */
  step = 0
  heard = 0
  mood = 0
  private timer: FairTimer | undefined = undefined
  private immediate: NodeJS.Immediate | undefined = undefined
  private due = DUE_NONE
  /** The one say or listen in flight: 0 none, 1 say, 2 listen. */
  private op = 0
  private opResolve: ((value: never) => void) | undefined = undefined
  private opReject: ((e: Error) => void) | undefined = undefined
  private opMs = 0
  private opAt = 0
  private opLine: LineKind | undefined = undefined
  private onEvent: ((e: CarrierEvent) => void) | undefined
  /** Calls heard as audio: the stream, the line the callee said last, a barge-in under way. */
  private stream: Promise<SimCalleeStream | undefined> | undefined
  lastLine: string | undefined = undefined
  private bargeArmed = false
  private ahead: Promise<{ text: string; at: number } | null> | undefined

  constructor(
    private readonly sim: SimTelephony,
    readonly providerCallId: string,
    private readonly req: DialRequest,
    onEvent: (e: CarrierEvent) => void,
  ) {
    this.onEvent = onEvent
    this.digit = lastDigit(req.to)
    const h = hash(req.to.replace(/\D/g, ""), sim.seed)
    this.variant = h % 3
    this.ringMs = RING_MIN_MS + ((h >>> 8) % (RING_SPAN_MS + 1))
    this.rng = h ^ 0x9e3779b9
  }

  get mediaStream(): boolean {
    return this.sim.media !== undefined
  }

  /** The call's audio runs at the simulator's time scale. */
  get timeScale(): number {
    return this.sim.timeScale
  }

  say(text: string): Promise<Spoken> {
    if (this.phase === ENDED) return Promise.reject(new TelephonyError(`call ${this.providerCallId} has ended`, false))
    // On a media stream the agent's line is heard while the callee may be talking: no turn to wait for.
    if (this.op !== 0 && this.sim.media === undefined)
      return Promise.reject(new TelephonyError("another say or listen is in progress on this leg", false))
    const lower = text.toLowerCase().replace(/[\u2018\u2019]/g, "'")
    for (const [bit, re] of CUES) if (re.test(lower)) this.heard |= bit
    if (this.sim.media !== undefined) return Promise.resolve(this.sayAloud())
    const words = Math.max(1, text.split(/\s+/).filter((w) => w !== "").length)
    this.opMs = Math.round(((words * 1000) / WORDS_PER_SECOND) * this.sim.timeScale)
    return this.begin(1)
  }

  listen(): Promise<{ text: string; at: number } | null> {
    if (this.phase === ENDED) return Promise.resolve(null)
    if (this.op !== 0)
      return Promise.reject(new TelephonyError("another say or listen is in progress on this leg", false))
    if (this.sim.media !== undefined) {
      // The callee who spoke over the agent has had their say; else they answer now, aloud.
      this.bargeArmed = false
      const ahead = this.ahead
      this.ahead = undefined
      if (ahead !== undefined) return ahead
      const heard = this.begin<{ text: string; at: number } | null>(2)
      void this.answerAloud()
      return heard
    }
    return this.begin(2)
  }

  /**
   * The agent's line is being played (a call heard as audio: the runtime speaks it on the stream;
   * the callee takes in its words). The callee who declines (digit 6) speaks over the agent's
   * second turn once 1.2 s of it has been played.
   */
  private sayAloud(): Spoken {
    if (this.digit === 6 && this.step === 1 && this.ahead === undefined && !this.bargeArmed) {
      this.bargeArmed = true
      void this.bargeIn()
    }
    return { durationMs: 0 }
  }

  private async bargeIn(): Promise<void> {
    const stream = await this.stream
    await stream?.agentPlayedFor(1_200)
    if (!this.bargeArmed || this.phase !== CONNECTED || this.ahead !== undefined) return
    this.bargeArmed = false
    const move = calleeMove(this)
    this.heard = 0
    if (move === "hangup") return
    this.step++
    this.ahead = this.speakLine(move)
  }

  /** The callee's answer, aloud: their move after what they heard, once the agent has been quiet a moment. */
  private async answerAloud(): Promise<void> {
    const move = calleeMove(this)
    this.heard = 0
    if (move === "hangup") return this.arm(DUE_CALLEE_HANGUP, this.scaled(SILENCE_MS))
    this.step++
    const stream = await this.stream
    await stream?.agentQuietFor(300 + this.random() * 500)
    const said = await this.speakLine(move)
    if (this.op === 2) this.settle(said)
  }

  /** Says `move`'s line on the stream: resolves when its last frame has gone (null if the call ended first). */
  private async speakLine(move: LineKind): Promise<{ text: string; at: number } | null> {
    const stream = await this.stream
    const media = this.sim.media
    if (stream === undefined || media === undefined || this.phase !== CONNECTED) return null
    const text = LINES[move][this.variant]!
    const spoken = await calleeAudio(media.synthAt(this.sim.timeScale), text, this.calleeVoice())
    if (this.phase !== CONNECTED) return null
    // A voicemail's greeting ends with its beep, 300 ms after.
    const frames = move === "voicemail" ? [...spoken, ...BEEP_AFTER_GREETING] : spoken
    const at = this.sim.now()
    this.lastLine = text
    await stream.speak(frames)
    return this.phase === CONNECTED ? { text, at } : null
  }

  /** The callee's voice: a woman's or a man's, and which, from the number. */
  private calleeVoice(): PhoneVoice {
    const h = hash(this.req.to.replace(/\D/g, ""), this.sim.seed)
    return { gender: (h >>> 4) & 1 ? "male" : "female", speed: 1, variant: (h >>> 5) % 3, pitch: 0 }
  }

  /** Connects the answered call's media stream, as a carrier told <Connect><Stream> does. */
  private connectStream(media: SimMediaOptions): void {
    const call = { tenantId: this.req.tenantId, callId: this.req.callId, timeScale: this.sim.timeScale }
    this.stream = media.streams.streamUrl(call).then(
      (url) => {
        if (this.phase === ENDED) return undefined
        // The stream ending (Parley closed it, or it broke) ends the call, as <Connect> with no verb after it does.
        const pacer = media.pacerAt(this.sim.timeScale)
        return new SimCalleeStream(url, `MZ${this.providerCallId}`, this.providerCallId, pacer, () =>
          this.end({ type: "HANGUP", by: "agent", at: this.sim.now() }),
        )
      },
      () => {
        this.end({ type: "HANGUP", by: "agent", at: this.sim.now() })
        return undefined
      },
    )
  }

  async hangup(): Promise<void> {
    if (this.phase === ENDED) return
    this.end({ type: "HANGUP", by: "agent", at: this.sim.now() })
  }

  /** A simulated recorded conference: the operator's number rings as any (0, 1 or no digit: no answer). */
  async handoff(operatorNumber: string): Promise<{ conference_id: string }> {
    if (this.phase !== CONNECTED)
      throw new TelephonyError(`call ${this.providerCallId} is not connected: it cannot be handed off`, false)
    this.onEvent = undefined // the agent's leg ends with no event
    this.end({ type: "HANGUP", by: "agent", at: this.sim.now() })
    const ringMs = this.scaled(simRingMs(operatorNumber, this.sim.seed))
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ringMs)
      if (!this.sim.holdProcess) t.unref()
    })
    if (lastDigit(operatorNumber) <= 1) throw new TelephonyError(`the operator ${operatorNumber} did not answer`, false)
    return { conference_id: `sim-conf-${this.providerCallId}` }
  }

  /** Registers the op; it starts now if the call is up, else when it is answered. */
  private begin<T>(op: 1 | 2): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.op = op
      this.opResolve = resolve as (value: never) => void
      this.opReject = reject
      if (this.phase === CONNECTED) this.startOp()
    })
  }

  private startOp(): void {
    // On a media stream the callee's turn is taken aloud (answerAloud), not on a timer.
    if (this.sim.media !== undefined) return
    if (this.op === 1) return this.arm(DUE_SAY, this.opMs)
    if (this.op !== 2) return
    const move = calleeMove(this)
    this.heard = 0
    if (move === "hangup") return this.arm(DUE_CALLEE_HANGUP, this.scaled(SILENCE_MS))
    this.step++
    this.opLine = move
    this.opAt = this.sim.now()
    this.arm(DUE_LISTEN, this.scaled(UTTERANCE_MIN_MS + this.random() * UTTERANCE_SPAN_MS))
  }

  /** Settles the op in flight with `value`. */
  private settle(value: unknown): void {
    const resolve = this.opResolve as ((v: unknown) => void) | undefined
    this.op = 0
    this.opResolve = undefined
    this.opReject = undefined
    this.opLine = undefined
    resolve?.(value)
  }

  /** Runs when the leg's timer fires. */
  fire(): void {
    const due = this.due
    this.timer = undefined
    this.immediate = undefined
    this.due = DUE_NONE
    const at = this.sim.now()
    switch (due) {
      case DUE_RINGING:
        if (this.digit < 0) return this.end({ type: "FAILED", reason: "invalid number: no digits", at })
        if (this.digit === 1) return this.arm(DUE_BUSY, this.scaled(BUSY_MS))
        this.phase = RINGING
        this.arm(DUE_RING_END, this.scaled(this.ringMs))
        return this.emit({ type: "RINGING", at })
      case DUE_RING_END:
        if (this.digit === 0) return this.end({ type: "NO_ANSWER", at })
        this.phase = CONNECTED
        if (this.sim.media !== undefined) this.connectStream(this.sim.media)
        this.emit({ type: "ANSWERED", by: this.digit === 2 ? "machine" : "human", at })
        // An op asked for while the phone rang starts now (unless the listener hung up).
        if (this.phase === CONNECTED && this.op !== 0 && this.due === DUE_NONE) this.startOp()
        return
      case DUE_BUSY:
        return this.end({ type: "BUSY", at })
      case DUE_SAY:
        return this.settle({ durationMs: this.opMs })
      case DUE_LISTEN:
        return this.settle({ text: LINES[this.opLine!][this.variant], at: this.opAt })
      case DUE_CALLEE_HANGUP:
        return this.end({ type: "HANGUP", by: "callee", at })
    }
  }

  arm(due: number, ms: number): void {
    this.due = due
    // An immediate stays ref'd: it holds the process for one loop turn at most, and an unref'd
    // one does not stop the loop from blocking in poll, so it would wait for unrelated I/O.
    if (ms <= 0) this.immediate = setImmediate(fireLeg, this)
    else {
      this.timer = this.sim.timers.setTimeout(fireLeg, ms, this.sim.holdProcess, this)
    }
  }

  /** Ends the leg with its terminal event: the op in flight settles (listen: null; say: rejects). */
  private end(event: CarrierEvent): void {
    if (this.phase === ENDED) return
    this.phase = ENDED
    this.sim.activeLegs--
    if (this.timer !== undefined) this.sim.timers.clearTimeout(this.timer)
    if (this.immediate !== undefined) clearImmediate(this.immediate)
    this.timer = undefined
    this.immediate = undefined
    this.due = DUE_NONE
    if (this.op === 1) {
      const reject = this.opReject
      this.op = 0
      this.opResolve = undefined
      this.opReject = undefined
      reject?.(new TelephonyError(`call ${this.providerCallId} ended while speaking`, false))
    } else if (this.op === 2) this.settle(null)
    this.emit(event)
    this.onEvent = undefined
    void this.stream?.then((s) => s?.stop())
  }

  private emit(event: CarrierEvent): void {
    this.onEvent?.(event)
  }

  private scaled(ms: number): number {
    return Math.round(ms * this.sim.timeScale)
  }

  /** mulberry32: a float in [0, 1). */
  private random(): number {
    this.rng = (this.rng + 0x6d2b79f5) | 0
    let t = this.rng
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Shared by every leg's timer, so no closure is made per timer. */
function fireLeg(leg: SimLeg): void {
  leg.fire()
}

/** FNV-1a of `text`, mixed with `seed`. */
function hash(text: string, seed: number): number {
  let h = (0x811c9dc5 ^ seed) >>> 0
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return h
}

export function makeSimTelephony(opts: SimTelephonyOptions): TelephonyProvider {
  if (!Number.isFinite(opts.timeScale) || opts.timeScale < 0)
    throw new RangeError(`timeScale must be a non-negative number, got ${opts.timeScale}`)
  return new SimTelephony(
    opts.timeScale,
    opts.now ?? (() => Date.now()),
    opts.seed ?? 0,
    opts.holdProcess ?? false,
    opts.media,
  )
}

/** Every line a simulated callee may say: the phrase list a recogniser of simulated calls listens for. */
export const SIM_CALLEE_LINES: readonly string[] = Object.values(LINES).flat()

/** The line a simulated callee said last (what a recogniser stand-in is told); undefined for another carrier's leg. */
export const simCalleeScript = (leg: CallLeg): (() => string | undefined) | undefined =>
  leg instanceof SimLeg ? () => leg.lastLine : undefined

/** What a simulated voicemail plays after its greeting: 300 ms of silence, then a 500 ms 1 kHz beep. */
const BEEP_AFTER_GREETING: readonly Uint8Array[] = [
  ...Array.from({ length: 15 }, () => new Uint8Array(160).fill(0xff)),
  ...beepFrames(500).map((f) => encode(f)),
]

/** The callee lines rendered so far, by voice and line (a few dozen lines in a few voices). */
const rendered = new Map<string, Promise<Uint8Array[]>>()
/**
 * The pause between the sentences of a line (a person's, within a turn: well under the end-of-speech
 * window), beside the quiet kept around each sentence's loud part (soft onsets and endings: "thanks").
 */
const SENTENCE_GAP_FRAMES = 4
const ONSET_FRAMES = 3
const ENDING_FRAMES = 6
/** Silence before and after a line. */
const LINE_EDGE_FRAMES = 10
const QUIET_FRAME = new Uint8Array(160).fill(0xff)
const quiet = (n: number): Uint8Array[] => Array.from({ length: n }, () => QUIET_FRAME)

/**
 * A callee line as audio: each sentence rendered, its silent edges trimmed, joined by a short
 * pause (a synthesiser's own pause after a full stop can pass for the end of the turn).
 */
function calleeAudio(synth: StreamingSynthesizer, text: string, voice: PhoneVoice): Promise<Uint8Array[]> {
  const key = `${synth.name}|${voice.gender}|${voice.variant}|${text}`
  let audio = rendered.get(key)
  if (audio === undefined) {
    audio = Promise.all(sentencesOf(text).map((s) => synth.speak(s, voice))).then((spoken) => {
      const out = quiet(LINE_EDGE_FRAMES)
      for (const [i, s] of spoken.entries()) {
        const first = s.frames.findIndex(loud)
        if (first < 0) continue
        const last = s.frames.findLastIndex(loud)
        if (i > 0) out.push(...quiet(SENTENCE_GAP_FRAMES))
        out.push(...s.frames.slice(Math.max(0, first - ONSET_FRAMES), last + 1 + ENDING_FRAMES))
      }
      out.push(...quiet(LINE_EDGE_FRAMES))
      return out
    })
    audio.catch(() => rendered.delete(key))
    rendered.set(key, audio)
  }
  return audio
}

/** Unscaled ring time of `to` in ms (3–8 s), as the sim uses it; for tests and docs. */
export function simRingMs(to: string, seed = 0): number {
  return RING_MIN_MS + ((hash(to.replace(/\D/g, ""), seed) >>> 8) % (RING_SPAN_MS + 1))
}
