// One transcript turn as it travels: the bus message on turns.<tenant>.<run>.<target>, and the
// data of each SSE event a watcher receives.

import type { TurnLatency } from "../providers/telephony/telephony.interface.js"

/** The bus message of one turn (and the shape SSE clients receive). */
export interface TurnMessage {
  /** The stored turn's id (what POST /kb/feedback takes); null only when storing it failed. */
  readonly turn_id: number | null
  readonly seq: number
  readonly run_id: number
  readonly target_id: number
  /** The call it belongs to; null for turns ingested from an external orchestrator without one. */
  readonly call_id: number | null
  /** Its position within its call. */
  readonly turn_index: number
  readonly speaker: "agent" | "callee" | "system"
  readonly text: string
  readonly at: string
  /** The outcome id: the orchestrator's for ingested turns, `call-<call_id>` for the runtime's own. */
  readonly outcome_id?: string | null
  /** An agent turn the callee spoke over (a call heard as audio): `text` is what they heard whole. */
  readonly interrupted?: true
  /** An agent turn of a call heard as audio: end of the callee's speech → its first audio, by stage (ms). */
  readonly latency_ms?: TurnLatency
  /** The experiment arm its call was placed in: present only for a call in an experiment. */
  readonly arm?: string
}

/** A stored turn's audio columns as the message carries them: present only when set. */
export const withAudio = <
  T extends { interrupted?: boolean | null; latency_ms?: TurnLatency | null; arm?: string | null },
>(
  row: T,
): Omit<T, "interrupted" | "latency_ms" | "arm"> & Pick<TurnMessage, "interrupted" | "latency_ms" | "arm"> => {
  const { interrupted, latency_ms, arm, ...rest } = row
  return {
    ...rest,
    ...(interrupted === true && { interrupted: true as const }),
    ...(latency_ms != null && { latency_ms }),
    ...(arm != null && { arm }),
  }
}
