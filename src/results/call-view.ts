// How one call reads to its workspace: the attempt, its outcome and cost, its transcript, and what
// the post-call analysis made of it (null until the call has an analysis row).
import { iso } from "../platform/time.js"
import type { AnalysisRow, CallRow, TurnRow } from "./results.repo.js"

/** At most this many turns are shown; a call's conversation is far shorter (see conversation.ts). */
export const CALL_TURNS_MAX = 1_000

export const analysisView = (a: AnalysisRow) => ({
  status: a.status,
  attempts: a.attempts,
  summary: a.summary,
  goal_met: a.goal_met,
  sentiment: a.sentiment,
  callback_at: iso(a.callback_at),
  agreed_value_minor: a.agreed_value_minor,
  fields: a.fields,
  model: a.model,
  model_version: a.model_version,
  // A failure stays visible: the reason the last attempt gave.
  error: a.error,
  charged_minor: a.charged_minor,
  analyzed_at: iso(a.analyzed_at),
})

export const callView = (c: CallRow, turns: ReadonlyArray<TurnRow>, analysis: AnalysisRow | undefined) => ({
  id: c.id,
  call_id: c.id,
  run_id: c.run_id,
  workflow_id: c.workflow_id,
  target_id: c.target_id,
  phone: c.phone,
  name: c.name,
  attempt: c.attempt,
  provider: c.provider,
  status: c.status,
  outcome: c.outcome,
  started_at: iso(c.started_at),
  answered_at: iso(c.answered_at),
  ended_at: iso(c.ended_at),
  talk_seconds: c.connected_seconds ?? 0,
  // Reserved before dialing; the settled cost replaces it at hangup (null while the call is live).
  reserved_minor: c.reserved_minor,
  cost_minor: c.cost_minor,
  currency: c.currency,
  transcript: turns.slice(0, CALL_TURNS_MAX).map((t) => ({
    seq: t.seq,
    turn_index: t.turn_index,
    speaker: t.speaker,
    text: t.text,
    at: iso(t.at),
    ...(t.interrupted && { interrupted: true as const }),
    ...(t.latency_ms !== null && { latency_ms: t.latency_ms }),
  })),
  transcript_truncated: turns.length > CALL_TURNS_MAX,
  // A hosted speech vendor that failed the call: it went on with the offline engine from then.
  provider_failures: c.provider_failures,
  // The experiment arm it was placed in (null outside one): its turns and analysis are that arm's.
  experiment_id: c.experiment_id,
  arm: c.arm,
  analysis: analysis === undefined ? null : analysisView(analysis),
})
