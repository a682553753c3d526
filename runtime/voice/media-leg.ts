// A call leg spoken and heard as audio: the conversation's say(text) and listen() (the CallLeg
// contract every carrier implements) over a media session. say() renders each sentence in the
// persona's voice (src/providers/speech/flite.phone.ts) and sends it paced, resolving once the
// carrier has played the last one, or at once when the callee barges in, saying what was heard
// whole. listen() answers with the next utterance, recognised while the callee speaks
// (src/providers/speech/sphinx.recognizer.ts, listening for the lines the callee may say). A sentence
// no voice can render ends the turn with an apology rendered ahead, never silence (Spoken.voiceFailed).

import { sentencesOf } from "../../src/providers/speech/sentences.js"
import { sketchSynthesizer } from "../../src/providers/speech/sketch.synth.js"
import type {
  PhoneSpeech,
  PhoneVoice,
  StreamingRecognizer,
  StreamingSynthesizer,
} from "../../src/providers/speech/streaming.interface.js"
import type { CallLeg, Spoken, TurnLatency } from "../../src/providers/telephony/telephony.interface.js"
import { TelephonyError } from "../../src/providers/telephony/telephony.interface.js"
import type { MediaSession, MediaSessionEvents } from "./media-session.js"

/** Utterances kept for a listen() not yet made (a callee talking on is not queued without end). */
const MAX_HEARD = 8
/** How long the carrier has to start its stream before the agent's first words are given up. */
const STREAM_START_MS = 10_000
/** How long listen() waits for the callee to say something before it answers "" (silence). */
export const DEFAULT_SILENCE_MS = 7_000

/** What the callee hears when no voice can speak: a line rendered before it was needed. */
export interface Apology {
  readonly text: string
  readonly speech: PhoneSpeech
}

/** The apology's words (no name or company: it is rendered once for every call in a voice). */
export const VOICE_APOLOGY = "I'm sorry, I'm having some trouble on my side. Someone will get back to you. Goodbye."

/**
 * The apology in a call's voice, rendered by `engine` once per voice (at most `max` kept: a process's calls
 * speak in a few), as the call starts; sketched when the engine cannot render it (a sketch cannot fail), and
 * then tried again for the next call.
 */
export function apologyRenderer(max = 64): (engine: StreamingSynthesizer, voice: PhoneVoice) => Promise<Apology> {
  const rendered = new Map<string, Promise<Apology>>()
  return (engine, voice) => {
    const key = [engine.name, voice.gender, voice.speed, voice.variant ?? 0, voice.pitch ?? 0].join("|")
    let apology = rendered.get(key)
    if (apology === undefined) {
      if (rendered.size >= max) rendered.clear()
      apology = engine.speak(VOICE_APOLOGY, voice).then(
        (speech) => ({ text: VOICE_APOLOGY, speech }),
        async () => {
          rendered.delete(key)
          return { text: VOICE_APOLOGY, speech: await sketchSynthesizer.speak(VOICE_APOLOGY, voice) }
        },
      )
      rendered.set(key, apology)
    }
    return apology
  }
}

export interface MediaLegOptions {
  readonly providerCallId: string
  readonly voice: PhoneVoice
  readonly recognizer: StreamingRecognizer
  readonly synth: StreamingSynthesizer
  /** Starts the session with the leg's events (the leg is made before its session). */
  readonly open: (events: MediaSessionEvents) => MediaSession
  /**
   * The carrier's leg of the call: it hangs up and hands off, and is told what the agent says and
   * when the agent listens (a simulated callee takes its turn from them; a real carrier ignores them).
   */
  readonly carrier?: CallLeg
  /** A stage of the pipeline failed (synthesis, recognition): for the call's log and metrics. */
  readonly onFailure?: (stage: "synthesis" | "recognition", err: unknown) => void
  /**
   * Played when a sentence cannot be rendered (the synthesiser, the offline engine behind a hosted voice
   * included, failed it): the turn ends with it, and the leg speaks no more. Without it the turn ends there.
   */
  readonly apology?: Promise<Apology | undefined>
  /** How long listen() waits for speech before answering "" (the conversation reprompts); default 7 s. */
  readonly silenceMs?: number
  /**
   * How fast the call's audio runs (CallLeg.timeScale): the silence and beep waits shrink with it,
   * to no less than 3 s of real time: what the simulated callee does in real time (rendering its
   * line, ~0.1-0.3 s) does not shrink, and a loaded process plays scaled audio late.
   */
  readonly timeScale?: number
  readonly now?: () => number
}

/** The agent's turn being spoken: its sentences by mark, how long they last, and its answer. */
interface Turn {
  readonly marks: Map<string, string>
  readonly done: (s: Spoken) => void
  durationMs: number
}

/** When the utterance the agent is answering ended, and its transcript was ready (performance.now()). */
interface Heard {
  readonly speechEnd: number
  readonly endpointing: number
  readonly transcribed: number
}

/** A wait of `ms` of the call's audio time, in real milliseconds at `timeScale`. */
export const scaledWait = (ms: number, timeScale = 1): number =>
  timeScale >= 1 ? ms : Math.max(Math.round(ms * timeScale), Math.min(ms, 3_000))

export class MediaLeg implements CallLeg {
  readonly providerCallId: string
  readonly mediaStream = true
  readonly reportsPlayed = true
  private readonly session: MediaSession
  private readonly heard: Array<{ text: string; at: number }> = []
  private listener: ((u: { text: string; at: number } | null) => void) | undefined
  private speaking: Turn | undefined
  private ended = false
  private seq = 0
  private started = false
  private onStart: (() => void) | undefined
  /** The utterance last handed to listen(), for the latency of the agent's answer to it. */
  private answering: Heard | undefined
  private readonly timing = new Map<{ text: string; at: number }, Heard>()
  private firstFrame: (() => void) | undefined
  private silence: NodeJS.Timeout | undefined
  /** Utterances whose transcript is still to come. */
  private transcribing = 0
  /** A beep heard since the last listen(), and who waits for one. */
  private beeped = false
  private onBeep: (() => void) | undefined
  /** No voice could render a sentence: the apology was played, and nothing more is said. */
  private voiceless = false

  constructor(private readonly o: MediaLegOptions) {
    this.providerCallId = o.providerCallId
    const now = o.now ?? Date.now
    this.session = o.open({
      started: () => {
        this.started = true
        this.onStart?.()
      },
      speechFrame: (f) => {
        try {
          o.recognizer.frame(f)
        } catch (err) {
          o.onFailure?.("recognition", err)
        }
      },
      utterance: ({ startMs, silenceMs }) => {
        const ended = performance.now()
        // The endpointing wait in real time (a simulated call's audio runs at its time scale).
        const waited = silenceMs * Math.min(1, o.timeScale ?? 1)
        const speechEnd = ended - waited
        // When it began: that much of the call's audio ago (at its time scale).
        const at = now() - (this.session.framesHeard * 20 - startMs) * Math.min(1, o.timeScale ?? 1)
        this.transcribing++
        void o.recognizer.end().then(
          (text) => {
            this.transcribing--
            if (this.ended) return
            // Speech nobody understood: a listener is answered "" at once (the agent asks again); else it is let go.
            if (text === "" && this.listener === undefined) return
            const u = { text, at }
            this.timing.set(u, { speechEnd, endpointing: waited, transcribed: performance.now() })
            this.hearLine(u)
          },
          (err: unknown) => {
            this.transcribing--
            o.onFailure?.("recognition", err)
          },
        )
      },
      firstAudio: () => this.firstFrame?.(),
      bargeIn: ({ played }) => {
        const s = this.speaking
        if (s === undefined) return
        this.speaking = undefined
        s.done({
          durationMs: s.durationMs,
          interrupted: { played: played.map((m) => s.marks.get(m) ?? "").join(" ") },
        })
      },
      // A key the callee pressed is a turn of theirs, as a line the conversation reads.
      dtmf: (digit) => {
        if (this.ended || !/^[0-9*#A-D]$/.test(digit)) return
        this.hearLine({ text: `(pressed ${digit})`, at: now() })
      },
      beep: () => {
        this.beeped = true
        this.onBeep?.()
      },
      ended: () => this.end(),
    })
  }

  say(text: string): Promise<Spoken> {
    return this.sayStreamed(sentencesOf(text))
  }

  /**
   * Speaks sentences as they come (a reply the model is still writing): each is rendered and sent
   * as soon as it arrives, so the callee hears the first while the next is written and rendered.
   */
  async sayStreamed(sentences: AsyncIterable<string> | Iterable<string>): Promise<Spoken> {
    if (this.ended) throw new TelephonyError(`call ${this.providerCallId} has ended`, false)
    if (this.voiceless) return { durationMs: 0, voiceFailed: { played: "" } }
    const answering = this.answering
    this.answering = undefined
    let done!: (s: Spoken) => void
    const result = new Promise<Spoken>((resolve) => {
      done = resolve
    })
    const turn: Turn = { marks: new Map(), done, durationMs: 0 }
    let latency: TurnLatency | undefined
    let first = true
    let failed = false
    for await (const sentence of sentences) {
      if (first) {
        first = false
        if (!this.started) await this.streamStarted()
        this.speaking = turn
      } else if (this.speaking !== turn) break // barged in, or the call ended, meanwhile
      // The first sentence is here: the model's part of the latency ends, synthesis begins.
      const asked = performance.now()
      this.o.carrier?.say(sentence).catch(() => undefined)
      let speech: Awaited<ReturnType<StreamingSynthesizer["speak"]>>
      try {
        speech = await this.o.synth.speak(sentence, this.o.voice)
      } catch (err) {
        // No voice for this sentence: the rest of the turn is not tried (each would add its failure's wait).
        this.o.onFailure?.("synthesis", err)
        failed = true
        break
      }
      if (this.speaking !== turn) break
      const mark = `m${this.seq++}`
      turn.marks.set(mark, sentence)
      turn.durationMs += speech.durationMs
      if (answering !== undefined && latency === undefined && this.firstFrame === undefined) {
        const rendered = performance.now()
        this.firstFrame = () => {
          this.firstFrame = undefined
          const sent = performance.now()
          const ms = (a: number, b: number) => Math.max(0, Math.round(b - a))
          latency = {
            total: ms(answering.speechEnd, sent),
            endpointing: Math.round(answering.endpointing),
            transcript: ms(answering.speechEnd + answering.endpointing, answering.transcribed),
            model: ms(answering.transcribed, asked),
            synthesis: ms(asked, rendered),
            hop: ms(rendered, sent),
          }
        }
      }
      this.session.say(mark, speech.frames, turn.marks.size === 1)
    }
    if (first) return { durationMs: 0 }
    if (failed) await this.apologise(turn)
    const withLatency = (s: Spoken): Spoken => (latency === undefined ? s : { ...s, latencyMs: latency })
    // Over once the carrier says the last sentence was played (the session has nothing left).
    const played = () => {
      if (this.speaking !== turn) return
      if (this.session.speaking) return void setTimeout(played, 20)
      this.speaking = undefined
      turn.done({ durationMs: turn.durationMs })
    }
    played()
    const spoken = withLatency(await result)
    if (!failed) return spoken
    return { ...spoken, voiceFailed: { played: spoken.interrupted?.played ?? [...turn.marks.values()].join(" ") } }
  }

  /** Ends `turn` with the apology rendered ahead (unless the callee spoke over it meanwhile); the leg goes quiet. */
  private async apologise(turn: Turn): Promise<void> {
    this.voiceless = true
    const apology = await this.o.apology?.catch(() => undefined)
    if (apology === undefined || this.speaking !== turn) return
    this.o.carrier?.say(apology.text).catch(() => undefined)
    const mark = `m${this.seq++}`
    turn.marks.set(mark, apology.text)
    turn.durationMs += apology.speech.durationMs
    this.session.say(mark, apology.speech.frames, turn.marks.size === 1)
  }

  afterBeep(maxMs: number): Promise<boolean> {
    if (this.beeped || this.ended) return Promise.resolve(this.beeped)
    return new Promise((resolve) => {
      const t = setTimeout(
        () => {
          this.onBeep = undefined
          resolve(false)
        },
        scaledWait(maxMs, this.o.timeScale),
      )
      this.onBeep = () => {
        clearTimeout(t)
        this.onBeep = undefined
        resolve(true)
      }
    })
  }

  listen(): Promise<{ text: string; at: number } | null> {
    this.beeped = false
    // The carrier is told the agent listens (a simulated callee answers then); it hears nothing here.
    this.o.carrier?.listen().catch(() => undefined)
    const next = this.heard.shift()
    if (next !== undefined) {
      // Said while the agent was busy (speaking, or deciding): its answer's latency is not the
      // pipeline's response time, so none is recorded for it.
      this.timing.delete(next)
      this.answering = undefined
      return Promise.resolve(next)
    }
    if (this.ended) return Promise.resolve(null)
    return new Promise((resolve) => {
      const now = this.o.now ?? Date.now
      // Silence (no speech begun within the window, none under way) is answered "", so the agent can ask again.
      const quiet = () => {
        if (this.listener !== listener) return
        // Speech under way, or said and still being transcribed, is not silence.
        if (this.session.hearingSpeech || this.transcribing > 0) return void (this.silence = setTimeout(quiet, 500))
        this.listener = undefined
        resolve({ text: "", at: now() })
      }
      const listener = (u: { text: string; at: number } | null) => {
        clearTimeout(this.silence)
        resolve(u)
      }
      this.listener = listener
      this.silence = setTimeout(quiet, scaledWait(this.o.silenceMs ?? DEFAULT_SILENCE_MS, this.o.timeScale))
    })
  }

  /** Something the callee said (or pressed): to the listener waiting, else kept for the next listen(). */
  private hearLine(u: { text: string; at: number }): void {
    if (this.listener !== undefined) {
      const l = this.listener
      this.listener = undefined
      this.deliver(u, l)
    } else if (this.heard.length < MAX_HEARD) this.heard.push(u)
    else this.timing.delete(u)
  }

  private deliver(u: { text: string; at: number }, to: (u: { text: string; at: number }) => void): void {
    this.answering = this.timing.get(u)
    this.timing.delete(u)
    to(u)
  }

  /** Resolves when the carrier has started the stream; rejects after STREAM_START_MS or at the call's end. */
  private streamStarted(): Promise<void> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.onStart = undefined
        reject(new TelephonyError(`call ${this.providerCallId}: the media stream did not start`, true))
      }, STREAM_START_MS)
      this.onStart = () => {
        clearTimeout(t)
        this.onStart = undefined
        if (this.ended) reject(new TelephonyError(`call ${this.providerCallId} has ended`, false))
        else resolve()
      }
    })
  }

  async hangup(): Promise<void> {
    this.session.hangUp()
    this.end()
    await this.o.carrier?.hangup()
  }

  release(): void {
    this.session.close()
    this.end()
  }

  get handoff(): CallLeg["handoff"] {
    const carrier = this.o.carrier
    if (carrier?.handoff === undefined) return undefined
    return async (operatorNumber: string) => {
      const r = await carrier.handoff!(operatorNumber)
      this.session.hangUp()
      this.end()
      return r
    }
  }

  private end(): void {
    if (this.ended) return
    this.ended = true
    this.onStart?.()
    this.onBeep?.()
    this.o.recognizer.free()
    this.timing.clear()
    this.listener?.(null)
    this.listener = undefined
    clearTimeout(this.silence)
    this.speaking?.done({ durationMs: this.speaking.durationMs })
    this.speaking = undefined
  }
}
