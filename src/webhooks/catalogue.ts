// The event catalogue as the OpenAPI document publishes it (its top-level `webhooks`): one entry per
// delivered type, with its `data` schema, the delivery headers and what each answer means to us.
// The record is keyed by DeliveredType, so a type added to events.ts without an entry here fails to compile.
import type { DeliveredType } from "./events.js"
import { REPLAY_WINDOW_SECONDS } from "./signing.js"

type JsonSchema = Record<string, unknown>

const str = { type: "string" }
const strOrNull = { type: ["string", "null"] }
const int = { type: "integer" }
const intOrNull = { type: ["integer", "null"] }
const time = { type: "string", format: "date-time" }
const timeOrNull = { type: ["string", "null"], format: "date-time" }
const version = {
  type: ["integer", "null"],
  description:
    "Orders this object's events (delivery order is not guaranteed): the epoch milliseconds of the change, " +
    "or for approvals 1 (requested) and 2 (resolved)",
}

const object = (properties: Record<string, unknown>, description: string): JsonSchema => ({
  type: "object",
  description,
  properties,
  // The objects grow as their read endpoints do: receivers should ignore fields they do not know.
  additionalProperties: true,
})

const call = object(
  {
    id: int,
    call_id: int,
    run_id: int,
    workflow_id: int,
    target_id: int,
    attempt: int,
    status: str,
    outcome: strOrNull,
    connected_seconds: intOrNull,
    cost_minor: intOrNull,
    currency: str,
    started_at: time,
    answered_at: timeOrNull,
    ended_at: timeOrNull,
    version,
  },
  "The call as the timeline shows it",
)

const run = object(
  {
    id: int,
    run_id: int,
    workflow_id: int,
    status: str,
    pause_reason: strOrNull,
    end_reason: strOrNull,
    targets_queued: int,
    targets_total: int,
    targets_dialed: int,
    targets_connected: int,
    approvals_pending: int,
    concessions_decided: int,
    workflow_name: str,
    targets_done: { ...int, description: "Targets with a final outcome (done or skipped), of targets_total" },
    targets_dialing: int,
    outcomes: {
      type: "object",
      additionalProperties: int,
      description: "Final targets by outcome (a skipped target's is why it was skipped)",
    },
    finished: { type: "boolean", description: "completed, cancelled or failed" },
    spend: object(
      { calls_minor: int, analyses_minor: int, total_minor: int, currency: str },
      "What the run has cost so far: its settled calls and their analyses",
    ),
    started_at: time,
    ended_at: timeOrNull,
    version,
  },
  "The run as GET /api/workflows/{id}/runs returns it",
)

const approval = object(
  {
    id: int,
    workflow_id: int,
    run_id: intOrNull,
    call_id: intOrNull,
    target_phone: strOrNull,
    proposed_action: { type: "string", enum: ["concession", "callback", "escalate"] },
    proposed_value_minor: intOrNull,
    currency: str,
    rationale: strOrNull,
    context: { type: "object" },
    status: { type: "string", enum: ["pending", "approved", "denied", "expired"] },
    created_at: time,
    expires_at: time,
    decided_at: timeOrNull,
    decided_by: intOrNull,
    decided_by_api_key_id: intOrNull,
    note: strOrNull,
    phase: {
      type: ["string", "null"],
      enum: ["on_hold", "after_call", null],
      description: "A pending approval's phase when the event was written (on_hold: its callee holds for it)",
    },
    approved_value_minor: intOrNull,
    decided_phase: { type: ["string", "null"], enum: ["on_hold", "after_call", null] },
    effect: { ...strOrNull, description: "What the decision did, in one sentence" },
    decided_by_kind: { type: ["string", "null"], enum: ["user", "api_key", "system", null] },
    decided_by_name: strOrNull,
    decided_by_email: strOrNull,
    target_name: strOrNull,
    workflow_name: strOrNull,
    version,
  },
  "The approval as GET /api/approvals returns it",
)

const message = object(
  {
    id: int,
    message_id: int,
    to: str,
    channel: str,
    subject: str,
    state: str,
    provider: strOrNull,
    provider_message_id: strOrNull,
    created_at: time,
    updated_at: time,
    version,
  },
  "The outreach email as the timeline's message events name it",
)

const wallet = object(
  {
    tenant_id: int,
    currency: str,
    balance_minor: int,
    plan_tier: str,
    trial_expires_at: timeOrNull,
    minutes_remaining_at_bundled_rate: int,
    rate_per_minute_minor: int,
    autocharge: object({ enabled: { type: "boolean" }, threshold_minor: intOrNull, amount_minor: intOrNull }, ""),
    topup_presets_minor: { type: "array", items: int },
    low_threshold_minor: { ...int, description: "The threshold wallet.low fires below (configurable per workspace)" },
    version,
  },
  "The wallet as GET /billing/balance returns it, with the low threshold",
)

const analysis = object(
  {
    call_id: int,
    run_id: int,
    status: str,
    summary: strOrNull,
    goal_met: { type: ["boolean", "null"] },
    sentiment: strOrNull,
    callback_at: timeOrNull,
    agreed_value_minor: intOrNull,
    fields: { type: ["object", "null"] },
    model: strOrNull,
    model_version: strOrNull,
    charged_minor: intOrNull,
    attempts: int,
    error: strOrNull,
    analyzed_at: timeOrNull,
  },
  "The call's analysis as the api returns it",
)

const tenant = object(
  { tenant_id: int, status: str, reason: strOrNull, suspended_at: time, version },
  "The workspace that was suspended",
)

const ping = object({ endpoint_id: int }, "Sent only by POST /api/webhooks/endpoints/{id}/test")

export const EVENT_CATALOGUE: Readonly<Record<DeliveredType, { summary: string; data: JsonSchema }>> = {
  "call.completed": { summary: "A call ended as a conversation ends (someone answered)", data: call },
  "call.failed": { summary: "A call ended unanswered or broken (no answer, busy, failed …)", data: call },
  "call.analyzed": { summary: "A call's post-call analysis is stored", data: analysis },
  "workflow.run.started": { summary: "A run started, resumed or reopened for a callback", data: run },
  "workflow.run.ended": { summary: "A run completed, was cancelled or failed (a pause is not an end)", data: run },
  "approval.requested": { summary: "An approval is waiting for a supervisor", data: approval },
  "approval.resolved": { summary: "An approval was approved, denied or expired", data: approval },
  "message.sent": { summary: "An outreach email was handed to the mail provider", data: message },
  "message.delivered": { summary: "The mail provider reported an outreach email delivered", data: message },
  "message.replied": { summary: "A recipient replied to an outreach email", data: message },
  "wallet.low": { summary: "The wallet crossed below its low threshold (once per crossing)", data: wallet },
  "wallet.exhausted": {
    summary: "The wallet cannot pay for one more minute at the bundled rate (once per crossing)",
    data: wallet,
  },
  "tenant.suspended": { summary: "The workspace was suspended", data: tenant },
  ping: { summary: "A test event, to one endpoint, on request", data: ping },
}

const HEADERS = [
  {
    name: "X-SVC-Event-Id",
    in: "header",
    required: true,
    description: "The event id (evt_…): the same on every attempt; deduplicate on it (delivery is at least once)",
    schema: { type: "string", pattern: "^evt_[0-9a-f]{32}$" },
  },
  {
    name: "X-SVC-Signature",
    in: "header",
    required: true,
    description:
      "t=<unix seconds>,v1=<hex HMAC-SHA256 of t + '.' + the raw body, keyed by the endpoint's secret>. " +
      "After a rotation there are two v1= entries (new and old secret) for 24 hours: accept either. " +
      `Refuse a t more than ${REPLAY_WINDOW_SECONDS} seconds from your clock`,
    schema: { type: "string" },
  },
  { name: "User-Agent", in: "header", required: true, schema: { type: "string", pattern: "^Parley-Webhooks/" } },
]

const envelope = (type: DeliveredType, data: JsonSchema): JsonSchema => ({
  type: "object",
  required: ["id", "type", "created_at", "tenant_id", "data"],
  properties: {
    id: { type: "string", pattern: "^evt_[0-9a-f]{32}$" },
    type: { const: type },
    created_at: { ...time, description: "When the change committed" },
    tenant_id: int,
    data,
  },
})

/** The OpenAPI 3.1 `webhooks` object: one POST operation per delivered type. */
export function openApiWebhooks(): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [type, entry] of Object.entries(EVENT_CATALOGUE) as Array<
    [DeliveredType, (typeof EVENT_CATALOGUE)[DeliveredType]]
  >)
    out[type] = {
      post: {
        operationId: `webhook_${type.replaceAll(".", "_")}`,
        summary: entry.summary,
        description:
          'POSTed to each enabled endpoint subscribed to this type (or to "*"), signed. Retried after 1 min, ' +
          "5 min, 30 min, 2 h, 12 h and 24 h (with jitter) on a 5xx, 408, 429, timeout (10 s) or network error; " +
          "any other 4xx fails the delivery for good. At least once, in no guaranteed order.",
        tags: ["webhooks"],
        parameters: HEADERS,
        requestBody: { required: true, content: { "application/json": { schema: envelope(type, entry.data) } } },
        responses: {
          "2XX": { description: "Delivered" },
          "4XX": { description: "Failed for good, except 408 and 429 (retried)" },
          "5XX": { description: "Retried on the schedule" },
        },
      },
    }
  return out
}
