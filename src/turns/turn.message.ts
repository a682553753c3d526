// One transcript turn as it travels: the bus message on turns.<tenant>.<run>.<target>, and the
// data of each SSE event a watcher receives.

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
}
