// A call leg spoken and heard as audio: the conversation's say(text) and listen() (the CallLeg
// contract every carrier implements) over a media session. say() renders each sentence in the
// persona's voice (src/providers/speech/flite.phone.ts) and sends it paced, resolving once the
// carrier has played the last one, or at once when the callee barges in, saying what was heard
// whole. listen() answers with the next utterance, recognised while the callee speaks
// (src/providers/speech/sphinx.recognizer.ts, listening for the lines the callee may say).

import { speakForPhone } from "../../src/providers/speech/flite.phone.js"
import type { SpeechVoice } from "../../src/providers/speech/speech.interface.js"
import type { SphinxDecoder } from "../../src/providers/speech/sphinx.recognizer.js"
import type { CallLeg } from "../../src/providers/telephony/telephony.interface.js"
import { TelephonyError } from "../../src/providers/telephony/telephony.interface.js"
import type { MediaSession, MediaSessionEvents } from "./media-session.js"

/** Utterances kept for a listen() not yet made (a callee talking on is not queued without end). */
const MAX_HEARD = 8

/** What say() resolves with: how long was played, and what of it when the callee barged in. */
export interface Spoken {
  readonly durationMs: number
  /** The callee spoke over the agent: the sentences played whole before it. */
  readonly interrupted?: { readonly played: string }
}

export interface MediaLegOptions {
  readonly providerCallId: string
  readonly voice: Pick<SpeechVoice, "gender" | "speed" | "variant">
  readonly decoder: SphinxDecoder
  /** Starts the session with the leg's events (the leg is made before its session). */
  readonly open: (events: MediaSessionEvents) => MediaSession
  readonly now?: () => number
}

/** The agent's turn being spoken: its sentences by mark, how long they last, and its answer. */
interface Turn {
  readonly marks: Map<string, string>
  readonly done: (s: Spoken) => void
  durationMs: number
}

/** Sentences, for one mark each: split after . ? ! followed by space, kept whole otherwise. */
export const sentencesOf = (text: string): string[] =>
  text
    .split(/(?<=[.?!])\s+/)
    .map((s) => s.trim())
    .filter((s) => s !== "")

export class MediaLeg implements CallLeg {
  readonly providerCallId: string
  private readonly session: MediaSession
  private readonly heard: Array<{ text: string; at: number }> = []
  private listener: ((u: { text: string; at: number } | null) => void) | undefined
  private speaking: Turn | undefined
  private ended = false
  private seq = 0

  constructor(private readonly o: MediaLegOptions) {
    this.providerCallId = o.providerCallId
    const now = o.now ?? Date.now
    this.session = o.open({
      speechFrame: (f) => o.decoder.frame(f),
      utterance: () => {
        const text = o.decoder.end()
        if (text === "") return
        const u = { text, at: now() }
        if (this.listener !== undefined) {
          const l = this.listener
          this.listener = undefined
          l(u)
        } else if (this.heard.length < MAX_HEARD) this.heard.push(u)
      },
      bargeIn: ({ played }) => {
        const s = this.speaking
        if (s === undefined) return
        this.speaking = undefined
        s.done({
          durationMs: s.durationMs,
          interrupted: { played: played.map((m) => s.marks.get(m) ?? "").join(" ") },
        })
      },
      ended: () => this.end(),
    })
  }

  async say(text: string): Promise<Spoken> {
    if (this.ended) throw new TelephonyError(`call ${this.providerCallId} has ended`, false)
    const sentences = sentencesOf(text)
    if (sentences.length === 0) return { durationMs: 0 }
    let done!: (s: Spoken) => void
    const result = new Promise<Spoken>((resolve) => {
      done = resolve
    })
    const turn: Turn = { marks: new Map(), done, durationMs: 0 }
    this.speaking = turn
    // Each sentence is sent as soon as it is rendered: the callee hears the first while the next renders.
    for (const sentence of sentences) {
      const speech = await speakForPhone(sentence, this.o.voice)
      if (this.speaking !== turn) break // barged in, or the call ended, meanwhile
      const mark = `m${this.seq++}`
      turn.marks.set(mark, sentence)
      turn.durationMs += speech.durationMs
      this.session.say(mark, speech.frames)
    }
    // Over once the carrier says the last sentence was played (the session has nothing left).
    const played = () => {
      if (this.speaking !== turn) return
      if (this.session.speaking) return void setTimeout(played, 20)
      this.speaking = undefined
      turn.done({ durationMs: turn.durationMs })
    }
    played()
    return result
  }

  listen(): Promise<{ text: string; at: number } | null> {
    const next = this.heard.shift()
    if (next !== undefined) return Promise.resolve(next)
    if (this.ended) return Promise.resolve(null)
    return new Promise((resolve) => {
      this.listener = resolve
    })
  }

  async hangup(): Promise<void> {
    this.session.hangUp()
    this.end()
  }

  private end(): void {
    if (this.ended) return
    this.ended = true
    this.listener?.(null)
    this.listener = undefined
    this.speaking?.done({ durationMs: this.speaking.durationMs })
    this.speaking = undefined
  }
}
