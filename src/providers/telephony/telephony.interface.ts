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

export interface CallLeg {
  readonly providerCallId: string
  /**
   * Speaks text to the callee; resolves when it has been spoken (duration from text length at ~2.6
   * words/s, scaled). Rejects with TelephonyError if the leg is gone. One say or listen at a time.
   */
  say(text: string): Promise<{ durationMs: number }>
  /** The callee's next utterance, or null when they hung up / stayed silent to the end. */
  listen(): Promise<{ text: string; at: number } | null>
  /** Ends the call from our side; a no-op once it has ended. */
  hangup(): Promise<void>
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
}

export class TelephonyError extends ProviderCallError {
  override readonly name = "TelephonyError"
}
