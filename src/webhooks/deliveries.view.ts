// How a delivery attempt reads in GET /api/webhooks/endpoints/{id}/deliveries: one row per attempt,
// with the event it carried and where its delivery stands now (the id POST …/deliveries/{id}/retry takes).
import { iso } from "../platform/time.js"
import type { AttemptRow } from "./endpoints.repo.js"

export const attemptJson = (r: AttemptRow) => ({
  id: r.id,
  delivery_id: r.delivery_id,
  event_id: r.event_id,
  event_type: r.event_type,
  attempt: r.attempt,
  started_at: iso(r.started_at),
  status_code: r.status_code,
  latency_ms: r.latency_ms,
  error: r.error,
  outcome: r.outcome,
  next_attempt_at: iso(r.next_attempt_at),
  delivery_status: r.delivery_status,
})

export type AttemptJson = ReturnType<typeof attemptJson>
