// The outbound event catalogue (spec section 6): every type a webhook endpoint can subscribe to, and
// the envelope each is sent in. `data` is the object as the read endpoints return it (documented per
// type in the OpenAPI document's `webhooks`), plus the object's own `version` where it has one.

export const EVENT_TYPES = [
  "call.completed",
  "call.failed",
  "call.analyzed",
  "workflow.run.started",
  "workflow.run.ended",
  "approval.requested",
  "approval.resolved",
  "message.sent",
  "message.delivered",
  "message.replied",
  "wallet.low",
  "wallet.exhausted",
  "tenant.suspended",
] as const

export type EventType = (typeof EVENT_TYPES)[number]

/** `ping` is sent only by POST /api/webhooks/endpoints/{id}/test, to that endpoint alone. */
export type DeliveredType = EventType | "ping"

export const isEventType = (s: string): s is EventType => (EVENT_TYPES as readonly string[]).includes(s)

/** The body of every delivery; X-SVC-Event-Id is `id`. */
export interface EventEnvelope {
  readonly id: string
  readonly type: DeliveredType
  /** ISO 8601, the commit's transaction time. */
  readonly created_at: string
  readonly tenant_id: number
  readonly data: Readonly<Record<string, unknown>>
}
