// The telephony provider contract: dial a number, hear the carrier's progress as events, and talk
// over the connected leg (speak a line, hear the callee's next one, hang up).
import { ProviderCallError } from "../http.util.js"

export interface DialRequest {
  /** Our call's id: the provider echoes it in its own call id and callbacks. */
  callId: number
  /** E.164 number to call. */
  to: string
  /** Caller id; null → the provider's default number. */
  from: string | null
  tenantId: number
}

/** What the carrier reports about a dialed call; `at` is epoch milliseconds. */
export type CarrierEvent =
  | { type: "RINGING"; at: number }
  | { type: "ANSWERED"; by: "human" | "machine"; at: number }
  | { type: "BUSY"; at: number }
  | { type: "NO_ANSWER"; at: number }
  | { type: "FAILED"; reason: string; at: number }
  | { type: "HANGUP"; by: "callee" | "agent"; at: number }

/** How long an agent turn took to reach the callee, by stage, in ms (a leg that speaks audio measures it). */
export interface TurnLatency {
  /** End of the callee's speech → the agent's first audio frame sent: the sum of the stages. */
  readonly total: number
  /** The silence that had to pass before the callee's speech was judged over. */
  readonly endpointing: number
  /** The final transcript, after the end of speech. */
  readonly transcript: number
  /** The conversation and language model, from the transcript to the reply's text. */
  readonly model: number
  /** Synthesis of the first sentence. */
  readonly synthesis: number
  /** From the first sentence's audio to its first frame on its way to the carrier. */
  readonly hop: number
}

/** What saying a line came to. */
export interface Spoken {
  readonly durationMs: number
  /** The callee spoke over the agent: the sentences they heard whole (possibly none). */
  readonly interrupted?: { readonly played: string }
  /** From the end of the callee's speech to this line's first audio (an audio leg answering an utterance). */
  readonly latencyMs?: TurnLatency
  /**
   * No voice could speak the line (an audio leg's synthesisers all failed): the callee heard, `played`, the
   * sentences before the failure and an apology rendered ahead; the leg speaks no more, so the call ends.
   */
  readonly voiceFailed?: { readonly played: string }
}

/**
 * Lets a carrier's media stream in for a call: a URL (wss://…, with a single-use token minted for
 * the call) the carrier connects its bidirectional stream to.
 */
export interface MediaStreams {
  /** `timeScale`: a simulated call's audio pace (faster than real time); a carrier's is real time. */
  streamUrl(call: { readonly tenantId: number; readonly callId: number; readonly timeScale?: number }): Promise<string>
}

export interface CallLeg {
  readonly providerCallId: string
  /**
   * True when the call's audio travels on a media stream (the runtime speaks and hears it over the
   * stream; this leg's say and listen are not used, only its hang-up and hand-off).
   */
  readonly mediaStream?: boolean
  /**
   * True when say() resolves with what the callee actually heard (an audio leg, cut short by a
   * barge-in): its agent turns are recorded once spoken, as played.
   */
  readonly reportsPlayed?: boolean
  /**
   * How fast the call's audio runs against real time: a simulated call's at the simulator's time
   * scale (0.01: a hundred times faster); a real carrier's at 1 (undefined).
   */
  readonly timeScale?: number
  /**
   * Speaks text to the callee; resolves when it has been spoken (duration from text length at ~2.6
   * words/s, scaled). Rejects with TelephonyError if the leg is gone. One say or listen at a time.
   */
  say(text: string): Promise<Spoken>
  /**
   * say(), for text still being written (a model's reply, sentence by sentence): each sentence is
   * spoken as it arrives, the first while the rest are written. Optional: an audio leg has it.
   */
  sayStreamed?(sentences: AsyncIterable<string>): Promise<Spoken>
  /**
   * Voicemail: resolves once the machine's beep has been heard (true; at once if it was heard
   * since the last listen) or after `maxMs` without one (false). Optional: a leg that hears no
   * audio speaks after the greeting.
   */
  afterBeep?(maxMs: number): Promise<boolean>
  /** The callee's next utterance, or null when they hung up / stayed silent to the end. */
  listen(): Promise<{ text: string; at: number } | null>
  /**
   * Ends the call from our side; a no-op once it has ended. Rejects with HangupFailed when the
   * carrier did not take it (after the adapter's own retries): the leg has ended here all the same,
   * but the carrier's call may still be up.
   */
  hangup(): Promise<void>
  /**
   * The attempt is over in this process (whoever ended it, answered or not): what the leg holds here
   * (a media session's subscription, a recording under way) is let go, without a word to the carrier.
   * Optional: a leg that holds nothing has none.
   */
  release?(): void
  /**
   * Patch-in: moves the callee into a recorded conference, dials `operatorNumber` into it and drops
   * our (the agent's) side without hanging the callee up; resolves once the conference is set up.
   * A say or listen in flight ends (say rejects, listen resolves null). Rejects with TelephonyError
   * when the callee is not connected or the conference could not be made. Optional: a leg without
   * it cannot be handed off.
   */
  handoff?(operatorNumber: string): Promise<{ conference_id: string }>
}

export interface TelephonyProvider {
  /** Short stable name ("sim", …) for status reports and logs. */
  readonly name: string
  /**
   * Places a call. Progress arrives asynchronously through `onEvent`: never before dial returns,
   * ending with exactly one of BUSY, NO_ANSWER, FAILED or HANGUP.
   */
  dial(req: DialRequest, onEvent: (e: CarrierEvent) => void): CallLeg
  /** Legs dialed and not yet ended, for metrics. */
  readonly activeLegs: number
  /**
   * Ends a call by the carrier's id, without its leg (the hang-up sweep, runtime/actors/hangups.ts); rejects
   * with TelephonyError when the carrier does not take it. Optional: a carrier whose hang-ups cannot
   * fail (the simulator) has none.
   */
  hangupCall?(providerCallId: string): Promise<void>
}

export class TelephonyError extends ProviderCallError {
  override readonly name: string = "TelephonyError"
}

/**
 * Our hang-up did not reach the carrier: the leg has ended here, but the carrier's call (id
 * `providerCallId`; "" when the carrier had not yet given one) may still be up. `after`: the failure
 * the hang-up was cleaning up after (a hand-off whose operator could not be called), which is what
 * the caller of that step should see.
 */
export class HangupFailed extends TelephonyError {
  override readonly name: string = "HangupFailed"
  constructor(
    readonly providerCallId: string,
    cause: unknown,
    readonly after?: unknown,
  ) {
    const status = cause instanceof ProviderCallError ? cause.status : undefined
    super(
      `the carrier did not take the hang-up of call ${providerCallId === "" ? "(no id yet)" : providerCallId}`,
      true,
      { cause, ...(status !== undefined && { status }) },
    )
  }
}
