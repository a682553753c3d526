// /api/webhooks/endpoints and /api/webhooks/deliveries: where a workspace's events are pushed, their
// signing secrets (shown on create and rotate only), test pings, and the delivery attempts with retry.
// Reading takes the read scope; every change takes admin. Another workspace's id is 404.
import { Effect } from "effect"
import { z } from "zod"
import {
  CreateEndpoint,
  createEndpoint,
  deleteEndpoint,
  getEndpoint,
  listDeliveries,
  listEndpoints,
  MAX_LIVE_ENDPOINTS,
  ROTATION_GRACE_HOURS,
  retry,
  rotateSecret,
  testEndpoint,
  UpdateEndpoint,
  updateEndpoint,
} from "../../src/webhooks/endpoints.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id, PageCursor, PageLimit } from "../schemas.js"
import { callerOf } from "../session.js"

const ENDPOINT_DOC =
  "The endpoint: {id, url, events, description, enabled, disabled_reason ('failing' when the platform " +
  "disabled it), version, created_at, updated_at, secret_rotating_until (only while an old secret still signs)}"
const WITH_SECRET = `${ENDPOINT_DOC}, and secret (whsec_…): shown in this answer only`
const params = z.object({ id: Id })
const tags = ["webhooks"]

export const webhookEndpointsList = route({
  method: "GET",
  path: "/api/webhooks/endpoints",
  auth: "jwt",
  summary: "List the workspace's webhook endpoints, newest first (deleted ones are gone)",
  tags,
  responses: { 200: { description: `{endpoints: [endpoint…]}; ${ENDPOINT_DOC}` } },
  handler: ({ principal }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* listEndpoints(caller.tenantId))
    }),
})

export const webhookEndpointsCreate = route({
  method: "POST",
  path: "/api/webhooks/endpoints",
  auth: "jwt",
  secretInAnswer: true,
  permission: "admin",
  summary:
    'Create a webhook endpoint: {url (https; host must resolve to public addresses), events: [type…] or ["*"], ' +
    `description?, enabled? (default true)}; at most ${MAX_LIVE_ENDPOINTS} per workspace`,
  tags,
  body: { json: CreateEndpoint },
  responses: {
    201: { description: WITH_SECRET },
    409: { description: `WEBHOOK_ENDPOINT_LIMIT: the workspace already has ${MAX_LIVE_ENDPOINTS} endpoints` },
    422: { description: "VALIDATION_FAILED: url not https, not public, or with credentials; unknown event type" },
  },
  handler: ({ principal, body }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* createEndpoint(caller.tenantId, body!), 201)
    }),
})

export const webhookEndpointGet = route({
  method: "GET",
  path: "/api/webhooks/endpoints/{id}",
  auth: "jwt",
  summary: "One webhook endpoint (never its secret)",
  tags,
  params,
  responses: { 200: { description: ENDPOINT_DOC } },
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* getEndpoint(caller.tenantId, params.id))
    }),
})

export const webhookEndpointUpdate = route({
  method: "PATCH",
  path: "/api/webhooks/endpoints/{id}",
  auth: "jwt",
  permission: "admin",
  summary:
    "Change an endpoint's url, events, description or enabled; enabling clears disabled_reason and the failing " +
    "streak. Every change bumps version",
  tags,
  params,
  body: { json: UpdateEndpoint },
  responses: { 200: { description: ENDPOINT_DOC } },
  handler: ({ principal, params, body }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* updateEndpoint(caller.tenantId, params.id, body!))
    }),
})

export const webhookEndpointDelete = route({
  method: "DELETE",
  path: "/api/webhooks/endpoints/{id}",
  auth: "jwt",
  permission: "admin",
  summary: "Delete an endpoint: nothing more is delivered to it (a second DELETE is 404)",
  tags,
  params,
  responses: { 200: { description: "{deleted: true, id}" } },
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* deleteEndpoint(caller.tenantId, params.id))
    }),
})

export const webhookEndpointRotate = route({
  method: "POST",
  path: "/api/webhooks/endpoints/{id}/rotate-secret",
  auth: "jwt",
  secretInAnswer: true,
  permission: "admin",
  summary:
    `A new signing secret; the old one keeps signing beside it for ${ROTATION_GRACE_HOURS} hours ` +
    "(two v1= entries in X-SVC-Signature)",
  tags,
  params,
  responses: { 200: { description: WITH_SECRET } },
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* rotateSecret(caller.tenantId, params.id))
    }),
})

export const webhookEndpointTest = route({
  method: "POST",
  path: "/api/webhooks/endpoints/{id}/test",
  auth: "jwt",
  permission: "admin",
  summary: "Queue a ping event to this endpoint alone",
  tags,
  params,
  responses: {
    202: { description: "{event_id, type: 'ping', endpoint_id}" },
    409: { description: "The endpoint is disabled (CONFLICT)" },
  },
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* testEndpoint(caller.tenantId, params.id), 202)
    }),
})

export const webhookEndpointDeliveries = route({
  method: "GET",
  path: "/api/webhooks/endpoints/{id}/deliveries",
  auth: "jwt",
  summary: "The endpoint's delivery attempts, newest first (limit, cursor = next_cursor of the page before)",
  tags,
  params,
  query: z.object({ limit: PageLimit, cursor: PageCursor.optional() }),
  responses: {
    200: {
      description:
        "{deliveries: [{id, delivery_id, event_id, event_type, attempt, started_at, status_code, latency_ms, " +
        "error, outcome: delivered|retry|failed, next_attempt_at, delivery_status}], " +
        "next_cursor (null on the last page)}",
    },
  },
  handler: ({ principal, params, query }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* listDeliveries(caller.tenantId, params.id, { limit: query.limit, before: query.cursor }))
    }),
})

export const webhookDeliveryRetry = route({
  method: "POST",
  path: "/api/webhooks/deliveries/{id}/retry",
  auth: "jwt",
  permission: "admin",
  summary: "Make a pending or failed delivery due now (one more attempt)",
  tags,
  params,
  responses: {
    202: { description: "{id, status: 'pending'}; a disabled endpoint's delivery waits until it is enabled" },
    409: { description: "The delivery was already delivered (CONFLICT)" },
  },
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* retry(caller.tenantId, params.id), 202)
    }),
})
