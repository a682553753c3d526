// The transactional outbox of outbound webhook events. emitEvent is called inside the transaction
// that makes a fact true (a call ending, a run starting, an approval decided …): it inserts the event
// and one pending delivery per enabled endpoint of the workspace subscribed to its type, in one
// statement, so the event exists if and only if that transaction commits. Runtime processes deliver
// the pending rows (runtime/workers/webhook-delivery.ts).
import { randomBytes } from "node:crypto"
import type { ContactMatch } from "../erasure/contact-match.repo.js"
import type { Sql, Tx } from "../platform/Db.js"
import type { DeliveredType, EventType } from "./events.js"

export const newEventId = (): string => `evt_${randomBytes(16).toString("hex")}`

/**
 * The Postgres channel a statement that makes deliveries due notifies. A NOTIFY is delivered when its
 * transaction commits, and only then, once however many statements sent it: so a runtime process
 * listening on it (runtime/workers/webhook-delivery.ts, on real PostgreSQL) claims within milliseconds of the
 * commit, and never before it. The poll stays as the backstop.
 */
export const WEBHOOKS_DUE_CHANNEL = "parley_webhooks_due"

export interface EmitInput {
  readonly tenantId: number
  readonly type: EventType
  readonly data: Readonly<Record<string, unknown>>
}

/**
 * Records the events inside `tx` (the caller's transaction, or a plain connection when the fact is a
 * single statement already committed by the same call — prefer the transaction). Returns the event
 * ids. Events of a workspace with no subscribed endpoint are stored all the same (the event exists);
 * they simply have no delivery.
 */
export async function emitEvents(tx: Tx | Sql, events: ReadonlyArray<EmitInput>): Promise<string[]> {
  if (events.length === 0) return []
  const ids = events.map(() => newEventId())
  const rows = events.map((e, i) => ({ id: ids[i], tenant_id: e.tenantId, type: e.type, data: JSON.stringify(e.data) }))
  await tx`
    with input as (
      select x.id, x.tenant_id, x.type, x.data::jsonb as data
      from jsonb_to_recordset(${tx.json(rows as never)}) as x(id text, tenant_id bigint, type text, data text)
    ), ev as (
      insert into webhook_events (id, tenant_id, type, body, created_at)
      select i.id, i.tenant_id, i.type,
        jsonb_build_object('id', i.id, 'type', i.type,
          'created_at', to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
          'tenant_id', i.tenant_id, 'data', i.data),
        now()
      from input i
      returning id, tenant_id, type
    )
    , dl as (
      insert into webhook_deliveries (tenant_id, event_id, endpoint_id, next_attempt_at)
      select ev.tenant_id, ev.id, ep.id, now()
      from ev join webhook_endpoints ep
        on ep.tenant_id = ev.tenant_id and ep.enabled and ep.deleted_at is null
       and (ep.events @> array[ev.type] or ep.events @> array['*'])
      returning 1
    )
    select pg_notify(${WEBHOOKS_DUE_CHANNEL}, '') from (select 1 from dl limit 1) due`
  return ids
}

export const emitEvent = async (tx: Tx | Sql, event: EmitInput): Promise<string> =>
  (await emitEvents(tx, [event]))[0] as string

/**
 * A `ping` for one endpoint of the workspace (POST /api/webhooks/endpoints/{id}/test): its event and
 * its one delivery, parked while the endpoint is disabled (migration 0037); undefined when the
 * workspace has no such endpoint (nothing is written).
 */
export async function emitPing(sql: Sql, tenantId: number, endpointId: number): Promise<string | undefined> {
  const id = newEventId()
  const type: DeliveredType = "ping"
  const rows = await sql`
    with ep as (
      select id, enabled from webhook_endpoints
      where id = ${endpointId} and tenant_id = ${tenantId} and deleted_at is null
    ), ev as (
      insert into webhook_events (id, tenant_id, type, body)
      select ${id}, ${tenantId}, ${type}, jsonb_build_object('id', ${id}::text, 'type', ${type}::text,
        'created_at', to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'tenant_id', ${tenantId}::bigint, 'data', jsonb_build_object('endpoint_id', ${endpointId}::bigint))
      from ep
      returning id
    )
    , dl as (
      insert into webhook_deliveries (tenant_id, event_id, endpoint_id, next_attempt_at)
      select ${tenantId}, ev.id, ${endpointId}, case when ep.enabled then now() end from ev, ep
      returning event_id
    )
    select event_id, pg_notify(${WEBHOOKS_DUE_CHANNEL}, '') from dl`
  return rows.length === 0 ? undefined : id
}

/** What POST /api/webhooks/deliveries/{id}/retry found. */
export type RetryOutcome = "retried" | "delivered" | "missing"

/**
 * Makes a pending or failed delivery of the workspace due now (one conditional update; a delivered
 * one is left alone), or, while its endpoint is disabled, pending and parked until it is enabled. A
 * delivery of a deleted endpoint is missing: nothing would send it. The attempt count is kept, so a
 * delivery past its schedule gets one more attempt, not a new schedule.
 */
export async function retryDelivery(sql: Sql, tenantId: number, deliveryId: number): Promise<RetryOutcome> {
  const [row] = await sql<[{ status: string; retried: boolean }?]>`
    with d as (
      select dl.id, dl.status, ep.enabled from webhook_deliveries dl
      join webhook_endpoints ep on ep.id = dl.endpoint_id and ep.deleted_at is null
      where dl.id = ${deliveryId} and dl.tenant_id = ${tenantId}
    ), u as (
      update webhook_deliveries
      set status = 'pending', next_attempt_at = case when (select enabled from d) then now() end
      where id = (select id from d) and status <> 'delivered'
      returning id
    )
    select d.status, exists (select 1 from u) as retried,
      case when exists (select 1 from u) then pg_notify(${WEBHOOKS_DUE_CHANNEL}, '') end as nudged
    from d`
  if (row === undefined) return "missing"
  return row.retried ? "retried" : "delivered"
}

// ---------------------------------------------------------------------------------------------
// Delivery (runtime/workers/webhook-delivery.ts)

/** A delivery a runtime process holds the lease of, with what it needs to post it. */
export interface ClaimedDelivery {
  readonly id: number
  readonly tenant_id: number
  readonly event_id: string
  readonly endpoint_id: number
  /** Attempts made before this one. */
  readonly attempts: number
  /** The event body as stored, serialised once by Postgres: the bytes sent and signed. */
  readonly body: string
  readonly url: string
  readonly secret_ciphertext: string
  /** The pre-rotation secret while it still signs beside the new one, else null. */
  readonly previous_secret_ciphertext: string | null
  /** Seconds from the event's commit to this claim, by the database's clock (the lag metric). */
  readonly lag_seconds: number
  /** Whether the endpoint is in a failing streak (a success must then clear it). */
  readonly endpoint_failing: boolean
}

/** How many deliveries the claiming process may have in flight at once (see delivery.ts). */
export interface InFlightCaps {
  readonly perEndpoint: number
  /** For an endpoint in a failing streak (failing_since set). */
  readonly perFailingEndpoint: number
  readonly perWorkspace: number
}

/** What a claim took, and where it left due deliveries behind because of a cap. */
export interface Claim {
  readonly deliveries: ClaimedDelivery[]
  /** Endpoints with due deliveries the caps held back: one of theirs finishing makes room. */
  readonly heldEndpoints: ReadonlySet<number>
  /** Workspaces held back by their cap: any delivery of theirs finishing makes room. */
  readonly heldWorkspaces: ReadonlySet<number>
}

/**
 * Claims up to `limit` due deliveries for `me` until now + `leaseMs`: pending, due, their endpoint
 * enabled and not deleted, held by no live lease, and within `me`'s caps: an endpoint with
 * `perEndpoint` deliveries in flight from this process (`perFailingEndpoint` while it is failing),
 * or a workspace with `perWorkspace`, gets no more from it until one ends, so receivers that hang
 * cannot take every slot. The oldest due go first. One statement: SKIP LOCKED lets processes claim
 * side by side without waiting on each other; the lease keeps a delivery with one process until it
 * is recorded or the process is gone.
 *
 * The endpoints with sendable deliveries are found by a skip scan (one index probe per endpoint, not
 * one row per delivery), and each one's oldest due ones read from the same index: a backlog held by a
 * cap costs a probe, not a scan past it on every claim.
 */
export async function claimDueDeliveries(
  sql: Sql,
  me: string,
  leaseMs: number,
  limit: number,
  caps: InFlightCaps,
): Promise<Claim> {
  const none: Claim = { deliveries: [], heldEndpoints: new Set(), heldWorkspaces: new Set() }
  if (limit <= 0) return none
  type Held = { readonly held_eps: number[]; readonly held_ws: number[] }
  const rows = await sql<Array<(ClaimedDelivery & Held) | ({ readonly id: null } & Held)>>`
    with recursive waiting (endpoint_id) as (
      (select d.endpoint_id from webhook_deliveries d
        where d.status = 'pending' and d.next_attempt_at is not null
        order by d.endpoint_id limit 1)
      union all
      select (select d.endpoint_id from webhook_deliveries d
          where d.status = 'pending' and d.next_attempt_at is not null and d.endpoint_id > w.endpoint_id
          order by d.endpoint_id limit 1)
      from waiting w where w.endpoint_id is not null
    ), leased as (
      select endpoint_id, tenant_id from webhook_deliveries
      where locked_until is not null and locked_until >= now() and locked_by = ${me}
    ), ep_busy as (
      select endpoint_id, count(*)::int as n from leased group by endpoint_id
    ), ws_busy as (
      select tenant_id, count(*)::int as n from leased group by tenant_id
    ), picks as (
      -- Each endpoint's oldest due deliveries, as many as its cap has room for, and one more to tell
      -- that some were held back.
      select x.id, x.next_attempt_at, ep.id as endpoint_id, ep.tenant_id,
        row_number() over (partition by ep.id order by x.next_attempt_at, x.id) > room.n as endpoint_full
      from waiting w
      join webhook_endpoints ep on ep.id = w.endpoint_id and ep.enabled and ep.deleted_at is null
      left join ep_busy eb on eb.endpoint_id = ep.id
      cross join lateral (
        select greatest(
          case when ep.failing_since is null then ${caps.perEndpoint}::int else ${caps.perFailingEndpoint}::int end
            - coalesce(eb.n, 0),
          0) as n
      ) room
      cross join lateral (
        -- In the index's order alone (no tie-break, no window here): the scan stops after these few rows.
        select d.id, d.next_attempt_at
        from webhook_deliveries d
        where d.endpoint_id = ep.id and d.status = 'pending' and d.next_attempt_at is not null
          and d.next_attempt_at <= now() and (d.locked_until is null or d.locked_until < now())
        order by d.next_attempt_at
        limit room.n + 1
      ) x
    ), ranked as (
      select p.id, p.next_attempt_at, p.endpoint_id, p.tenant_id, p.endpoint_full,
        not p.endpoint_full and coalesce(wb.n, 0)
          + row_number() over (partition by p.tenant_id order by p.endpoint_full, p.next_attempt_at, p.id)
          <= ${caps.perWorkspace} as fits
      from picks p left join ws_busy wb on wb.tenant_id = p.tenant_id
    ), due as (
      -- By primary key (a join to the picks may be planned as a scan of the whole queue).
      select d.id from webhook_deliveries d
      where d.id = any(array(select id from ranked where fits)) and d.status = 'pending'
        and d.next_attempt_at <= now() and (d.locked_until is null or d.locked_until < now())
      order by d.next_attempt_at, d.id
      limit ${limit}
      for update of d skip locked
    ), claimed as (
      update webhook_deliveries d
        set locked_until = now() + make_interval(secs => ${leaseMs / 1000}), locked_by = ${me}
      from due, webhook_events e, webhook_endpoints ep
      where d.id = due.id and e.id = d.event_id and ep.id = d.endpoint_id
      returning d.id, d.tenant_id, d.event_id, d.endpoint_id, d.attempts, e.body::text as body, ep.url,
        ep.secret_ciphertext,
        case when ep.previous_secret_expires_at > now() then ep.previous_secret_ciphertext end
          as previous_secret_ciphertext,
        extract(epoch from now() - e.created_at)::float8 as lag_seconds,
        ep.failing_since is not null as endpoint_failing
    ), held as (
      select
        coalesce(jsonb_agg(distinct endpoint_id) filter (where not fits), '[]') as held_eps,
        coalesce(jsonb_agg(distinct tenant_id) filter (where not fits and not endpoint_full), '[]') as held_ws
      from ranked
    )
    -- One row even when nothing was claimed, so the caller always learns what was held back.
    select c.*, held.held_eps, held.held_ws from held left join claimed c on true`
  const first = rows[0]
  if (first === undefined) return none
  return {
    deliveries: rows.filter((r): r is ClaimedDelivery & Held => r.id !== null),
    heldEndpoints: new Set(first.held_eps.map(Number)),
    heldWorkspaces: new Set(first.held_ws.map(Number)),
  }
}

export interface AttemptRecord {
  readonly deliveryId: number
  readonly me: string
  /** This attempt's number (1-based). */
  readonly attempt: number
  readonly startedAt: Date
  readonly outcome: "delivered" | "retry" | "failed"
  readonly statusCode: number | null
  readonly latencyMs: number
  readonly error: string | null
  /** For a retry: how long from now the next attempt is due. */
  readonly retryInMs: number | null
}

/**
 * Writes one attempt's row and moves its delivery on (delivered, failed, or pending again later),
 * releasing the lease, in one statement (inside `tx` when the endpoint's health changes with it).
 * Only while `me` still holds the delivery: a process whose lease ran out (and whose delivery
 * another process took) records nothing, so a delivery is never moved back from delivered.
 * Returns whether it was recorded.
 */
export async function recordAttempt(tx: Tx | Sql, a: AttemptRecord): Promise<boolean> {
  return (await recordAttempts(tx, [a]))[0] === true
}

/**
 * recordAttempt for several attempts in one statement (the delivery worker groups the successes
 * that finish together); element i says whether attempt i was recorded.
 */
export async function recordAttempts(tx: Tx | Sql, attempts: ReadonlyArray<AttemptRecord>): Promise<boolean[]> {
  if (attempts.length === 0) return []
  const input = attempts.map((a) => ({
    delivery_id: a.deliveryId,
    me: a.me,
    attempt: a.attempt,
    started_at: a.startedAt.toISOString(),
    outcome: a.outcome,
    status_code: a.statusCode,
    latency_ms: a.latencyMs,
    error: a.error,
    retry_in_s: a.retryInMs === null ? null : a.retryInMs / 1000,
  }))
  const rows = await tx<Array<{ delivery_id: number }>>`
    with i as (
      select * from jsonb_to_recordset(${tx.json(input as never)}) as x(delivery_id bigint, me text, attempt int,
        started_at timestamptz, outcome text, status_code int, latency_ms int, error text, retry_in_s float8)
    ), d as (
      update webhook_deliveries w set
        status = case when i.outcome = 'retry' then 'pending' else i.outcome end,
        attempts = i.attempt,
        next_attempt_at = case when i.outcome = 'retry' then now() + make_interval(secs => i.retry_in_s) end,
        locked_until = null, locked_by = null,
        last_status_code = i.status_code, last_error = i.error, last_latency_ms = i.latency_ms,
        last_attempt_at = i.started_at,
        delivered_at = case when i.outcome = 'delivered' then now() end
      from i
      where w.id = i.delivery_id and w.locked_by = i.me and w.status = 'pending'
      returning w.id, w.tenant_id, w.endpoint_id, w.event_id, w.next_attempt_at, i.attempt, i.started_at,
        i.status_code, i.latency_ms, i.error, i.outcome
    )
    insert into webhook_attempts
      (tenant_id, delivery_id, endpoint_id, event_id, attempt, started_at, status_code, latency_ms, error,
       outcome, next_attempt_at)
    select d.tenant_id, d.id, d.endpoint_id, d.event_id, d.attempt, d.started_at, d.status_code, d.latency_ms,
      d.error, d.outcome, d.next_attempt_at
    from d
    returning delivery_id`
  const recorded = new Set(rows.map((r) => Number(r.delivery_id)))
  return attempts.map((a) => recorded.has(a.deliveryId))
}

/**
 * Retention: deletes up to `limit` events older than `days` days none of whose deliveries is still
 * pending to a live endpoint (their deliveries and attempts go with them). Returns how many.
 */
export async function pruneOldEvents(sql: Sql, days: number, limit: number): Promise<number> {
  const rows = await sql`
    delete from webhook_events where id in (
      select e.id from webhook_events e
      where e.created_at < now() - make_interval(days => ${days})
        and not exists (
          select 1 from webhook_deliveries d join webhook_endpoints ep on ep.id = d.endpoint_id
          where d.event_id = e.id and d.status = 'pending' and ep.deleted_at is null)
      limit ${limit})
    returning id`
  return rows.length
}

/** The delivery queue as the gauges show it, in every workspace. */
export interface QueueState {
  /** Deliveries waiting to go out to live endpoints (due or scheduled). */
  readonly queued: number
  /**
   * How long the longest-waiting due delivery has been due, in seconds (0 when none): grows while
   * the queue is stalled, when no claim happens to sample the lag.
   */
  readonly oldestDueSeconds: number
}

export async function queueState(sql: Sql): Promise<QueueState> {
  // Parked deliveries (a disabled or deleted endpoint's, migration 0037) have no due time.
  const [row] = await sql<[{ queued: number; oldest_due_seconds: number }]>`
    select
      (select count(*)::int from webhook_deliveries d join webhook_endpoints ep on ep.id = d.endpoint_id
        where d.status = 'pending' and ep.enabled and ep.deleted_at is null) as queued,
      coalesce((select greatest(extract(epoch from now() - min(next_attempt_at)), 0)::float8
        from webhook_deliveries where status = 'pending' and next_attempt_at <= now()), 0) as oldest_due_seconds`
  return { queued: row.queued, oldestDueSeconds: row.oldest_due_seconds }
}

/**
 * A data-subject erase (src/dsr/): outbound events of the contact's calls (call.*, approval.* and
 * call.analyzed carry data.call_id) or quoting the identifier (message.* carry the address) go, their
 * deliveries and attempts with them (on delete cascade): a delivery still queued must not send the
 * contact after the erase. One statement, so the pending deliveries counted are the ones the cascade
 * removes.
 */
export async function eraseContactEvents(
  tx: Tx,
  m: ContactMatch,
  callIds: readonly number[],
): Promise<{ events: number; pending: number }> {
  const [gone] = await tx<[{ events: number; pending: number }]>`
    with gone as (
      delete from webhook_events where tenant_id = ${m.tenantId}
        and ((body -> 'data' ->> 'call_id') = any(${tx.array(callIds.map(String))}::text[]) or ${m.mentions("body")})
      returning id)
    select (select count(*)::int from gone) as events,
      (select count(*)::int from webhook_deliveries
        where event_id in (select id from gone) and status = 'pending') as pending`
  return gone
}
