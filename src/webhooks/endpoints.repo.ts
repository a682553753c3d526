// SQL for a workspace's webhook endpoints (webhook_endpoints; the one writer of that table) and the
// read of their delivery attempts. Every statement is scoped by tenant: another workspace's id matches nothing.
import type { Sql, Tx } from "../platform/Db.js"

export interface EndpointRow {
  readonly id: number
  readonly url: string
  readonly events: string[]
  readonly description: string | null
  readonly enabled: boolean
  readonly disabled_reason: string | null
  readonly secret_ciphertext: string
  readonly previous_secret_expires_at: Date | null
  readonly version: number
  readonly created_at: Date
  readonly updated_at: Date
  /** The previous secret still signs: its expiry is in the future (the database's clock). */
  readonly rotating: boolean
}

const columns = (sql: Sql | Tx) => sql`
  id, url, events, description, enabled, disabled_reason, secret_ciphertext, previous_secret_expires_at, version,
  created_at, updated_at, coalesce(previous_secret_expires_at > now(), false) as rotating`

export const listEndpoints = (sql: Sql, tenantId: number): Promise<EndpointRow[]> =>
  sql<EndpointRow[]>`
    select ${columns(sql)} from webhook_endpoints
    where tenant_id = ${tenantId} and deleted_at is null
    order by id desc`

export const findEndpoint = async (sql: Sql, tenantId: number, id: number): Promise<EndpointRow | undefined> => {
  const [row] = await sql<[EndpointRow?]>`
    select ${columns(sql)} from webhook_endpoints
    where id = ${id} and tenant_id = ${tenantId} and deleted_at is null`
  return row
}

/** Locks the workspace's row: serialises concurrent creates, so the cap on live endpoints holds. */
export const lockTenant = async (tx: Tx, tenantId: number): Promise<void> => {
  await tx`select id from tenants where id = ${tenantId} for update`
}

/** Endpoints not deleted, enabled or not: a disabled endpoint still holds its place. */
export const countLive = async (tx: Tx, tenantId: number): Promise<number> => {
  const [{ live }] = await tx<[{ live: number }]>`
    select count(*)::int as live from webhook_endpoints where tenant_id = ${tenantId} and deleted_at is null`
  return live
}

export interface NewEndpoint {
  readonly tenantId: number
  readonly url: string
  readonly events: ReadonlyArray<string>
  readonly description: string | null
  readonly enabled: boolean
  readonly secretCiphertext: string
}

export const insertEndpoint = async (tx: Tx, e: NewEndpoint): Promise<EndpointRow> => {
  const [row] = await tx<[EndpointRow]>`
    insert into webhook_endpoints (tenant_id, url, events, description, enabled, secret_ciphertext)
    values (${e.tenantId}, ${e.url}, ${tx.array([...e.events])}, ${e.description}, ${e.enabled}, ${e.secretCiphertext})
    returning ${columns(tx)}`
  return row
}

export interface EndpointPatch {
  readonly url?: string
  readonly events?: ReadonlyArray<string>
  /** null clears it; undefined leaves it. */
  readonly description?: string | null
  readonly enabled?: boolean
}

/**
 * Applies the fields given and bumps the version. Any explicit `enabled` clears disabled_reason (a
 * user's choice, not the platform's); enabling also forgets the failing streak, so an endpoint the
 * platform disabled gets its full 5 days again.
 */
export const updateEndpoint = async (
  sql: Sql,
  tenantId: number,
  id: number,
  p: EndpointPatch,
): Promise<EndpointRow | undefined> => {
  const [row] = await sql<[EndpointRow?]>`
    update webhook_endpoints set
      url = ${p.url === undefined ? sql`url` : sql`${p.url}`},
      events = ${p.events === undefined ? sql`events` : sql`${sql.array([...p.events])}`},
      description = ${p.description === undefined ? sql`description` : sql`${p.description}`},
      enabled = ${p.enabled === undefined ? sql`enabled` : sql`${p.enabled}`},
      disabled_reason = ${p.enabled === undefined ? sql`disabled_reason` : sql`null`},
      failing_since = ${p.enabled === true ? sql`null` : sql`failing_since`},
      version = version + 1,
      updated_at = now()
    where id = ${id} and tenant_id = ${tenantId} and deleted_at is null
    returning ${columns(sql)}`
  return row
}

/** The current secret becomes the previous one, still signing for `graceHours`; the new one takes its place. */
export const rotateSecret = async (
  sql: Sql,
  tenantId: number,
  id: number,
  secretCiphertext: string,
  graceHours: number,
): Promise<EndpointRow | undefined> => {
  const [row] = await sql<[EndpointRow?]>`
    update webhook_endpoints set
      previous_secret_ciphertext = secret_ciphertext,
      previous_secret_expires_at = now() + make_interval(hours => ${graceHours}),
      secret_ciphertext = ${secretCiphertext},
      version = version + 1,
      updated_at = now()
    where id = ${id} and tenant_id = ${tenantId} and deleted_at is null
    returning ${columns(sql)}`
  return row
}

/** Soft delete: the row stays for the deliveries that name it; the delivery worker skips it from now on. */
export const deleteEndpoint = async (sql: Sql, tenantId: number, id: number): Promise<boolean> => {
  const rows = await sql`
    update webhook_endpoints set deleted_at = now(), version = version + 1, updated_at = now()
    where id = ${id} and tenant_id = ${tenantId} and deleted_at is null
    returning id`
  return rows.length === 1
}

export interface AttemptRow {
  readonly id: number
  readonly delivery_id: number
  readonly event_id: string
  readonly event_type: string
  readonly attempt: number
  readonly started_at: Date
  readonly status_code: number | null
  readonly latency_ms: number | null
  readonly error: string | null
  readonly outcome: "delivered" | "retry" | "failed"
  readonly next_attempt_at: Date | null
  readonly delivery_status: "pending" | "delivered" | "failed"
}

/** An endpoint's attempts, newest first, `limit` rows with ids below `before` (webhook_attempts_endpoint_idx). */
export const listAttempts = (
  sql: Sql,
  tenantId: number,
  endpointId: number,
  page: { readonly limit: number; readonly before: number | undefined },
): Promise<AttemptRow[]> =>
  sql<AttemptRow[]>`
    select a.id, a.delivery_id, a.event_id, e.type as event_type, a.attempt, a.started_at, a.status_code,
      a.latency_ms, a.error, a.outcome, a.next_attempt_at, d.status as delivery_status
    from webhook_attempts a
    join webhook_deliveries d on d.id = a.delivery_id
    join webhook_events e on e.id = a.event_id
    where a.endpoint_id = ${endpointId} and a.tenant_id = ${tenantId}
      ${page.before === undefined ? sql`` : sql`and a.id < ${page.before}`}
    order by a.id desc
    limit ${page.limit}`

// ---- Endpoint health, written by the delivery worker (runtime/workers/webhook-delivery.ts) ----

/**
 * After an attempt on the endpoint: a success clears the failing streak, a failure starts it at
 * `at` unless one is running. Returns when the streak began (null: none running).
 */
export const trackEndpointHealth = async (
  tx: Tx,
  endpointId: number,
  succeeded: boolean,
  at: Date,
): Promise<Date | null> => {
  // Only a change is written: most attempts succeed, and each write would lock the endpoint's row.
  if (succeeded) {
    await tx`update webhook_endpoints set failing_since = null where id = ${endpointId} and failing_since is not null`
    return null
  }
  const [row] = await tx<[{ failing_since: Date | null }?]>`
    with started as (
      update webhook_endpoints set failing_since = ${at}
      where id = ${endpointId} and failing_since is null
      returning failing_since
    )
    select failing_since from started
    union all
    select failing_since from webhook_endpoints where id = ${endpointId} and failing_since is not null
    limit 1`
  return row?.failing_since ?? null
}

/**
 * The platform disables an endpoint that failed every attempt for too long. Only an enabled, live
 * endpoint changes, so of two processes reaching the verdict together one disables (and mails).
 */
export const disableFailingEndpoint = async (
  sql: Sql | Tx,
  endpointId: number,
): Promise<{ tenant_id: number; url: string } | undefined> => {
  const [row] = await sql<[{ tenant_id: number; url: string }?]>`
    update webhook_endpoints
    set enabled = false, disabled_reason = 'failing', version = version + 1, updated_at = now()
    where id = ${endpointId} and enabled and deleted_at is null
    returning tenant_id, url`
  return row
}
