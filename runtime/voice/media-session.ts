// One call's audio in the runtime process that holds the call: the carrier's frames arrive over the
// bus from the api process holding the media stream (api/media-streams.ts), are judged frame by
// frame for speech (a voice-activity detector and src/providers/audio/end-of-speech.ts) and handed
// on as utterances; the agent's audio goes back paced in real time, 20 ms a frame (a simulated
// call's at its time scale, frames batched), with a mark
// after each sentence. Callee speech while the agent talks is a barge-in: the carrier is told to
// clear what it queued, nothing more is sent, and what was played (up to the last mark the carrier
// acknowledged) is what the agent said. Frames never pass through the call's state machine one by
// one: it hears utterances, barge-ins, DTMF and the stream's end.
import type { BusClient, BusMsg, BusSubscription } from "../../src/platform/bus/bus.js"
import type { Pacer } from "../../src/platform/pacer.js"
import { MEDIA_KIND_HEADER, mediaInSubject, mediaOutSubject } from "../../src/platform/subjects.js"
import { BeepDetector } from "../../src/providers/audio/beep.js"
import {
  DEFAULT_END_OF_SPEECH,
  EndOfSpeech,
  type EndOfSpeechSettings,
  FRAME_MS,
} from "../../src/providers/audio/end-of-speech.js"
import { decode, FRAME_SAMPLES } from "../../src/providers/audio/g711.js"

/** Audio kept from before speech was recognised as started (the onset the detector needed). */
const PRE_ROLL_MS = 300
/** The most frames one media message carries (a simulated call's audio, faster than real time). */
const MAX_BATCH = 50
/** The longest utterance kept for recognition (a callee talking on is cut into turns this long). */
const MAX_UTTERANCE_MS = 30_000

/** What the session tells the call. */
export interface MediaSessionEvents {
  /** The carrier's stream started: audio can be sent. */
  started?(): void
  /**
   * Callee speech, frame by frame as it comes: from just before its onset (the frames the detector
   * needed) until it is judged over. For a recogniser that decodes while the callee talks.
   */
  speechFrame?(frame: Uint8Array): void
  /** The callee said something: its audio (μ-law, from just before it began), and when it ended. */
  utterance?(u: {
    readonly audio: Uint8Array
    readonly startMs: number
    readonly endMs: number
    /** The silence heard after it before it was judged over (the endpointing wait). */
    readonly silenceMs: number
  }): void
  /** The first frame of an agent turn (audio after the agent was silent) went to the carrier. */
  firstAudio?(): void
  /** The callee began to speak over the agent; `played`: the sentences heard whole (by their marks). */
  bargeIn?(b: { readonly played: readonly string[]; readonly atMs: number }): void
  dtmf?(digit: string): void
  /** A voicemail's beep was heard (a steady tone held 200 ms). */
  beep?(): void
  /** The stream is over (the carrier stopped it, or the connection went). */
  ended?(): void
  /** The session is over, whoever ended it: nothing more is heard or sent. */
  closed?(): void
}

export interface MediaSessionOptions {
  readonly bus: BusClient
  readonly tenantId: number
  readonly callId: number
  /** One verdict per 20 ms frame of 16-bit samples (a Vad's `voiced`); the array is reused, not to be kept. */
  readonly voiced: (frame: Int16Array) => boolean
  readonly pacer: Pacer
  readonly endOfSpeech?: EndOfSpeechSettings
  readonly events: MediaSessionEvents
  /** Hears both sides as they go (the call's recording): the callee's frames as heard, the agent's as sent. */
  readonly tap?: MediaTap
}

/** Both sides of a call's audio, μ-law, whole 20 ms frames (a batch at a simulated call's time scale). */
export interface MediaTap {
  heard(bytes: Uint8Array): void
  spoke(bytes: Uint8Array): void
  /** A turn began: the agent's first frame went, or the callee's speech began `agoMs` of audio ago. */
  turn(speaker: "agent" | "callee", agoMs: number): void
}

interface Sentence {
  readonly mark: string
  readonly frames: Uint8Array[]
}

export class MediaSession {
  private readonly sub: BusSubscription
  private readonly eos: EndOfSpeech
  private readonly out: string
  /** Frames received since the stream started (the session's clock: 20 ms each). */
  private frame = 0
  /** The most recent frames, for the pre-roll, and the utterance under way. */
  private recent: Uint8Array[] = []
  private utterance: Uint8Array[] | undefined
  private utteranceStart = 0
  /** What is still to be sent, sentence by sentence, and the marks sent but not yet played. */
  private queue: Sentence[] = []
  private sending: Sentence | undefined
  private sentInSentence = 0
  private readonly unplayed: string[] = []
  /** The sentences of the agent's current turn that the carrier says were played. */
  private played: string[] = []
  private streaming = false
  private over = false
  private readonly beeps = new BeepDetector()
  /** Whether the current agent turn's first frame has gone. */
  private turnHeard = false
  /** One frame's samples, reused for every frame the detector judges. */
  private readonly pcm = new Int16Array(FRAME_SAMPLES)

  constructor(private readonly o: MediaSessionOptions) {
    this.eos = new EndOfSpeech(o.endOfSpeech ?? DEFAULT_END_OF_SPEECH)
    this.out = mediaOutSubject(o.tenantId, o.callId)
    this.sub = o.bus.subscribe(mediaInSubject(o.tenantId, o.callId), (m) => this.hear(m))
  }

  /** The carrier's frames judged so far (20 ms each). */
  get framesHeard(): number {
    return this.frame
  }

  /** True while the callee is speaking (an utterance has begun and not yet been judged over). */
  get hearingSpeech(): boolean {
    return this.utterance !== undefined
  }

  /** True while the agent has audio queued or not yet played at the carrier. */
  get speaking(): boolean {
    return this.sending !== undefined || this.queue.length > 0 || this.unplayed.length > 0
  }

  /** Queues one sentence of the agent's audio (μ-law frames); its mark follows its last frame. */
  say(mark: string, frames: Uint8Array[], turnStart = !this.speaking): void {
    if (this.over) return
    // The first sentence of a turn (by default: after silence; a streamed reply's next sentence
    // may come after its first was played, and is the same turn).
    if (turnStart) {
      this.played = []
      this.turnHeard = false
    }
    this.queue.push({ mark, frames })
    this.o.pacer.add(this)
  }

  /**
   * Sends the frames due (the pacer's: one every 20 ms at real time, more at a simulated call's
   * time scale, in one message per sentence); false once nothing is left.
   */
  tick(due: number): boolean {
    // Before the stream starts nothing can be sent: started() adds the session again.
    if (this.over || !this.streaming) return false
    let left = due
    while (left > 0) {
      if (this.sending === undefined) {
        this.sending = this.queue.shift()
        this.sentInSentence = 0
        if (this.sending === undefined) return false
      }
      const s = this.sending
      const n = Math.min(left, s.frames.length - this.sentInSentence, MAX_BATCH)
      if (n > 0) {
        const at = this.sentInSentence
        this.sentInSentence += n
        left -= n
        // At real time one frame a tick, sent as it is; faster, the frames due in one message.
        const audio = n === 1 ? s.frames[at]! : Buffer.concat(s.frames.slice(at, at + n))
        this.publish("media", audio)
        this.o.tap?.spoke(audio)
        if (!this.turnHeard) {
          this.turnHeard = true
          this.o.tap?.turn("agent", n * FRAME_MS)
          this.o.events.firstAudio?.()
        }
      }
      if (this.sentInSentence >= s.frames.length) {
        this.publish("mark", { name: s.mark })
        this.unplayed.push(s.mark)
        this.sending = undefined
      }
      if (this.over) return false
    }
    return this.sending !== undefined || this.queue.length > 0
  }

  /** Ends the session here (the call is over): nothing more is heard or sent, the carrier is not told. */
  close(): void {
    this.finish()
  }

  /** Ends the session: the carrier is asked to hang up, and nothing more is heard or sent. */
  hangUp(): void {
    if (this.over) return
    this.publish("hangup", {})
    this.finish()
  }

  private hear(m: BusMsg): void {
    if (this.over) return
    switch (m.headers?.[MEDIA_KIND_HEADER]) {
      case "start":
        this.streaming = true
        this.o.events.started?.()
        if (this.queue.length > 0) this.o.pacer.add(this)
        return
      case "media":
        return this.frameIn(m.data)
      case "mark": {
        const name = m.json<{ name?: unknown }>().name
        const i = this.unplayed.indexOf(String(name))
        // Marks come back in order; one acknowledged means those before it were played too.
        if (i >= 0) this.played.push(...this.unplayed.splice(0, i + 1))
        return
      }
      case "dtmf":
        return this.o.events.dtmf?.(String(m.json<{ digit?: unknown }>().digit ?? ""))
      case "stop":
      case "closed":
        this.finish()
        this.o.events.ended?.()
        return
    }
  }

  private frameIn(bytes: Uint8Array): void {
    this.o.tap?.heard(bytes)
    // A carrier may batch: each 160 bytes is a frame; a short tail waits for nothing (dropped).
    for (let at = 0; at + FRAME_SAMPLES <= bytes.length; at += FRAME_SAMPLES) {
      const frame = bytes.subarray(at, at + FRAME_SAMPLES)
      const t = this.frame++
      if (this.utterance !== undefined) {
        if (this.utterance.length * FRAME_MS < MAX_UTTERANCE_MS) {
          this.utterance.push(frame)
          this.o.events.speechFrame?.(frame)
        }
      } else {
        this.recent.push(frame)
        if (this.recent.length * FRAME_MS > PRE_ROLL_MS + (this.o.endOfSpeech ?? DEFAULT_END_OF_SPEECH).minSpeechMs)
          this.recent.shift()
      }
      const pcm = decode(frame, this.pcm)
      if (this.beeps.push(pcm)) this.o.events.beep?.()
      const e = this.eos.push(this.o.voiced(pcm))
      if (e === undefined) continue
      if (e.kind === "speech_start") {
        this.utterance = this.recent
        this.recent = []
        this.utteranceStart = Math.max(0, (t + 1) * FRAME_MS - this.utterance.length * FRAME_MS)
        this.o.tap?.turn("callee", this.utterance.length * FRAME_MS)
        if (this.speaking) this.bargeIn(t * FRAME_MS)
        for (const f of this.utterance) this.o.events.speechFrame?.(f)
      } else {
        const audio = Buffer.concat(this.utterance ?? [])
        this.utterance = undefined
        const silenceMs = Math.max(0, (t + 1) * FRAME_MS - e.atMs)
        this.o.events.utterance?.({ audio, startMs: this.utteranceStart, endMs: e.atMs, silenceMs })
      }
    }
  }

  private bargeIn(atMs: number): void {
    this.queue = []
    this.sending = undefined
    this.publish("clear", {})
    // A cleared carrier sends back the marks it was holding: those sentences were not heard.
    const played = this.played
    this.played = []
    this.unplayed.length = 0
    this.o.events.bargeIn?.({ played, atMs })
  }

  private publish(kind: string, payload: Uint8Array | object): void {
    try {
      this.o.bus.publish(this.out, payload, { headers: { [MEDIA_KIND_HEADER]: kind } })
    } catch {
      // The bus is away: the stream's end follows.
    }
  }

  private finish(): void {
    if (this.over) return
    this.over = true
    this.queue = []
    this.sending = undefined
    this.sub.unsubscribe()
    this.o.events.closed?.()
  }
}
