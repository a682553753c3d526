// A workspace's webhook endpoints: created with a signing secret shown once, changed, rotated (the old
// secret keeps signing for 24 hours), soft-deleted, pinged; their delivery attempts listed and retried.
import { Effect } from "effect"
import { z } from "zod"
import { AppConfig } from "../platform/AppConfig.js"
import type { Config } from "../platform/config.js"
import { Db, type Sql } from "../platform/Db.js"
import { Conflict, NotFound, ValidationFailed } from "../platform/errors.js"
import { Log } from "../platform/Log.js"
import { type ListPage, pageOf } from "../platform/page.cursor.js"
import { oncePerDatabase } from "../platform/per-database.js"
import { iso } from "../platform/time.js"
import { attemptJson } from "./deliveries.view.js"
import * as repo from "./endpoints.repo.js"
import { EVENT_TYPES, isEventType } from "./events.js"
import { emitPing, retryDelivery } from "./outbox.repo.js"
import { newWebhookSecret, type SecretBox, webhookSecretBox, webhookSecretKey } from "./secrets.js"
import { WEBHOOK_URL_MAX, webhookUrlRefusal } from "./url-policy.js"

export const MAX_LIVE_ENDPOINTS = 20
export const ROTATION_GRACE_HOURS = 24
const DESCRIPTION_MAX = 500

// --- request schemas --------------------------------------------------------------------------

const Url = z
  .string({ error: "is required" })
  .trim()
  .min(1, "is required")
  .max(WEBHOOK_URL_MAX, `must be at most ${WEBHOOK_URL_MAX} characters`)

// Known types only, so a typo is refused at save rather than silently never delivered; "*" alone
// means every type, present and future.
const Events = z
  .array(z.string().max(64, "must be an event type"), { error: 'must be a list of event types, or ["*"]' })
  .min(1, 'must name at least one event type, or ["*"]')
  .max(EVENT_TYPES.length + 1, "names too many event types")
  .superRefine((types, ctx) => {
    const unknown = types.filter((t) => t !== "*" && !isEventType(t))
    if (unknown.length > 0)
      ctx.addIssue({
        code: "custom",
        message:
          `unknown event type ${unknown.map((t) => JSON.stringify(t)).join(", ")}; ` +
          `known: ${EVENT_TYPES.join(", ")}`,
      })
    else if (types.includes("*") && types.length > 1)
      ctx.addIssue({ code: "custom", message: '"*" means every type: send it alone' })
  })
  .transform((types) => [...new Set(types)])

const Description = z.string().max(DESCRIPTION_MAX, `must be at most ${DESCRIPTION_MAX} characters`).nullable()

export const CreateEndpoint = z.object({
  url: Url,
  events: Events,
  description: Description.optional(),
  enabled: z.boolean({ error: "must be true or false" }).optional(),
})
export type CreateEndpointInput = z.infer<typeof CreateEndpoint>

export const UpdateEndpoint = z
  .object({
    url: Url.optional(),
    events: Events.optional(),
    description: Description.optional(),
    enabled: z.boolean({ error: "must be true or false" }).optional(),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), {
    message: "give at least one of url, events, description, enabled",
  })
export type UpdateEndpointInput = z.infer<typeof UpdateEndpoint>

// --- views ------------------------------------------------------------------------------------

/** The endpoint as every answer shows it; the secret never appears here (only beside it on create and rotate). */
export const endpointJson = (r: repo.EndpointRow) => ({
  id: r.id,
  url: r.url,
  events: [...r.events],
  description: r.description,
  enabled: r.enabled,
  disabled_reason: r.disabled_reason,
  version: r.version,
  created_at: iso(r.created_at),
  updated_at: iso(r.updated_at),
  ...(r.rotating && { secret_rotating_until: iso(r.previous_secret_expires_at) }),
})
export type EndpointJson = ReturnType<typeof endpointJson>

// --- the secret box ----------------------------------------------------------------------------

// One key lookup per database client for the life of the process: the key never changes.
const boxOf = oncePerDatabase((sql: Sql, config: Config) => webhookSecretKey(config, sql).then(webhookSecretBox))
const secretBoxFor = (config: Config, sql: Sql): Promise<SecretBox> => boxOf(sql, config)

// --- operations --------------------------------------------------------------------------------

const notFound = (id: number) => new NotFound({ message: `webhook endpoint ${id} not found` })

const checkUrl = (url: string) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const refused = yield* Effect.promise(() =>
      webhookUrlRefusal(url, { allowPrivateProviderUrls: config.allowPrivateProviderUrls }),
    )
    if (refused === undefined) return
    // Which internal address a name led to is logged, never answered.
    if (refused.address !== undefined)
      (yield* Log).warn({ url, address: refused.address }, "webhook endpoint URL refused: not a public address")
    return yield* Effect.fail(
      new ValidationFailed({ message: `url ${refused.reason}`, errors: [{ field: "url", message: refused.reason }] }),
    )
  })

export const listEndpoints = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const rows = yield* Effect.promise(() => repo.listEndpoints(sql, tenantId))
    return { endpoints: rows.map(endpointJson) }
  })

export const getEndpoint = (tenantId: number, id: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const row = yield* Effect.promise(() => repo.findEndpoint(sql, tenantId, id))
    if (row === undefined) return yield* Effect.fail(notFound(id))
    return endpointJson(row)
  })

export const createEndpoint = (tenantId: number, input: CreateEndpointInput) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const config = yield* AppConfig
    yield* checkUrl(input.url)
    const box = yield* Effect.promise(() => secretBoxFor(config, sql))
    const secret = newWebhookSecret()
    const created = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          // The workspace row serialises concurrent creates, so the cap holds under a race.
          await repo.lockTenant(tx, tenantId)
          if ((await repo.countLive(tx, tenantId)) >= MAX_LIVE_ENDPOINTS) return undefined
          return repo.insertEndpoint(tx, {
            tenantId,
            url: input.url,
            events: input.events,
            description: input.description ?? null,
            enabled: input.enabled ?? true,
            secretCiphertext: box.seal(secret, tenantId),
          })
        }) as Promise<repo.EndpointRow | undefined>,
    )
    if (created === undefined)
      return yield* Effect.fail(
        new Conflict({
          code: "WEBHOOK_ENDPOINT_LIMIT",
          message: `a workspace may have at most ${MAX_LIVE_ENDPOINTS} webhook endpoints; delete one first`,
          details: { limit: MAX_LIVE_ENDPOINTS },
        }),
      )
    return { ...endpointJson(created), secret }
  })

export const updateEndpoint = (tenantId: number, id: number, input: UpdateEndpointInput) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    if (input.url !== undefined) yield* checkUrl(input.url)
    const row = yield* Effect.promise(() => repo.updateEndpoint(sql, tenantId, id, input))
    if (row === undefined) return yield* Effect.fail(notFound(id))
    return endpointJson(row)
  })

export const deleteEndpoint = (tenantId: number, id: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const deleted = yield* Effect.promise(() => repo.deleteEndpoint(sql, tenantId, id))
    if (!deleted) return yield* Effect.fail(notFound(id))
    return { deleted: true, id }
  })

export const rotateSecret = (tenantId: number, id: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const config = yield* AppConfig
    const box = yield* Effect.promise(() => secretBoxFor(config, sql))
    const secret = newWebhookSecret()
    const row = yield* Effect.promise(() =>
      repo.rotateSecret(sql, tenantId, id, box.seal(secret, tenantId), ROTATION_GRACE_HOURS),
    )
    if (row === undefined) return yield* Effect.fail(notFound(id))
    return { ...endpointJson(row), secret }
  })

/** Queues a `ping` to this endpoint alone; a disabled endpoint would never send it, so that is refused. */
export const testEndpoint = (tenantId: number, id: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const row = yield* Effect.promise(() => repo.findEndpoint(sql, tenantId, id))
    if (row === undefined) return yield* Effect.fail(notFound(id))
    if (!row.enabled)
      return yield* Effect.fail(
        new Conflict({ message: `webhook endpoint ${id} is disabled; enable it (PATCH enabled: true) first` }),
      )
    const eventId = yield* Effect.promise(() => emitPing(sql, tenantId, id))
    if (eventId === undefined) return yield* Effect.fail(notFound(id))
    return { event_id: eventId, type: "ping" as const, endpoint_id: id }
  })

export const listDeliveries = (tenantId: number, endpointId: number, page: ListPage) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    // A deleted endpoint's history is gone with it, as far as the API is concerned.
    if ((yield* Effect.promise(() => repo.findEndpoint(sql, tenantId, endpointId))) === undefined)
      return yield* Effect.fail(notFound(endpointId))
    const rows = yield* Effect.promise(() =>
      repo.listAttempts(sql, tenantId, endpointId, { limit: page.limit + 1, before: page.before }),
    )
    const { rows: attempts, next_cursor } = pageOf(rows, page.limit)
    return { deliveries: attempts.map(attemptJson), next_cursor }
  })

export const retry = (tenantId: number, deliveryId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const outcome = yield* Effect.promise(() => retryDelivery(sql, tenantId, deliveryId))
    if (outcome === "missing")
      return yield* Effect.fail(new NotFound({ message: `webhook delivery ${deliveryId} not found` }))
    if (outcome === "delivered")
      return yield* Effect.fail(
        new Conflict({ message: `webhook delivery ${deliveryId} was already delivered; nothing to retry` }),
      )
    return { id: deliveryId, status: "pending" as const }
  })
