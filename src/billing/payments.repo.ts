// SQL for payments: intents (a top-up or autocharge waiting for its gateway), the gateway events
// recorded once each, and the payment methods saved for autocharge.
import type { PendingQuery, Row } from "postgres"
import type { Sql, Tx } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"
import type { GatewayName } from "../providers/payments/payments.interface.js"

export interface IntentRow {
  readonly id: number
  readonly tenant_id: number
  readonly gateway: GatewayName
  readonly amount_minor: number
  readonly currency: Currency
  readonly status: string
  readonly purpose: string
  readonly external_id: string
  readonly save_method: boolean
}

export interface IntentView {
  readonly id: number
  readonly amount_minor: number
  readonly currency: Currency
  readonly status: string
  readonly external_id: string
  readonly checkout_url: string | null
  readonly gateway: GatewayName
}

export interface CheckoutIntent {
  readonly id: number
  readonly amount_minor: number
  readonly currency: Currency
  readonly status: string
  readonly external_id: string
  readonly save_method: boolean
}

export interface SavedMethodRow {
  readonly id: number
  readonly gateway: GatewayName
  readonly display_hint: string
  readonly status: string
  readonly created_at: Date
}

// --- intents ------------------------------------------------------------------------------

/** Whether the workspace ever paid (a succeeded intent). */
export const hasPaid = async (sql: Sql, tenantId: number): Promise<boolean> => {
  const [row] = await sql`select 1 from payment_intents where tenant_id = ${tenantId} and status = 'succeeded' limit 1`
  return row !== undefined
}

/** A pending intent whose external id is a placeholder until the gateway names it. */
export const insertIntent = async (
  sql: Sql | Tx,
  i: {
    tenantId: number
    gateway: GatewayName
    placeholderId: string
    amountMinor: number
    currency: Currency
    purpose: "topup" | "autocharge"
    returnUrl?: string
    saveMethod?: boolean
    paymentMethodId?: number
  },
): Promise<number> => {
  const [row] =
    i.purpose === "topup"
      ? await sql<[{ id: number }]>`
          insert into payment_intents (tenant_id, gateway, external_id, amount_minor, currency, purpose, return_url,
            save_method)
          values (${i.tenantId}, ${i.gateway}, ${i.placeholderId}, ${i.amountMinor}, ${i.currency}, 'topup',
            ${i.returnUrl ?? null},
            ${i.saveMethod ?? false})
          returning id`
      : await sql<[{ id: number }]>`
          insert into payment_intents (tenant_id, gateway, external_id, amount_minor, currency, purpose,
            payment_method_id)
          values (${i.tenantId}, ${i.gateway}, ${i.placeholderId}, ${i.amountMinor}, ${i.currency}, 'autocharge',
            ${i.paymentMethodId ?? null})
          returning id`
  return row.id
}

export const attachCheckout = async (
  sql: Sql,
  intentId: number,
  externalId: string,
  checkoutUrl: string | null,
): Promise<IntentView> => {
  const [row] = await sql<[IntentView]>`
    update payment_intents set external_id = ${externalId}, checkout_url = ${checkoutUrl}
    where id = ${intentId}
    returning id, amount_minor, currency, status, external_id, checkout_url, gateway`
  return row
}

export const markIntentFailed = async (sql: Sql | Tx, intentId: number): Promise<void> => {
  await sql`update payment_intents set status = 'failed', settled_at = now() where id = ${intentId}`
}

export const markIntentSucceeded = async (tx: Tx, intentId: number): Promise<void> => {
  await tx`update payment_intents set status = 'succeeded', settled_at = now() where id = ${intentId}`
}

/** Names the intent's charge, unless it already has a name. */
export const assignExternalId = async (sql: Sql, intentId: number, externalId: string): Promise<void> => {
  await sql`update payment_intents set external_id = ${externalId} where id = ${intentId}
    and external_id like 'unassigned:%'`
}

/** The gw_upi intent of a gateway order id (unique per gateway), and of that intent id when one is given. */
export const findCheckoutIntent = async (
  sql: Sql,
  orderId: string,
  intentId: number | undefined,
): Promise<CheckoutIntent | undefined> => {
  const [row] = await sql<[CheckoutIntent?]>`
    select id, amount_minor, currency, status, external_id, save_method from payment_intents
    where gateway = 'gw_upi' and external_id = ${orderId} ${intentId === undefined ? sql`` : sql`and id = ${intentId}`}`
  return row
}

/** The one intent matching `where`, locked for the transaction. */
const lockIntent = async (tx: Tx, where: PendingQuery<Row[]>): Promise<IntentRow | undefined> => {
  const [row] = await tx<[IntentRow?]>`
    select id, tenant_id, gateway, amount_minor, currency, status, purpose, external_id, save_method
      from payment_intents
    where ${where}
    for update`
  return row
}

/** The intent a gateway's external id names (of that gateway, or any), locked. */
export const lockIntentByExternal = (
  tx: Tx,
  externalId: string,
  gateway: GatewayName | "any",
): Promise<IntentRow | undefined> =>
  lockIntent(tx, tx`external_id = ${externalId} ${gateway === "any" ? tx`` : tx`and gateway = ${gateway}`}`)

/** Our intent still waiting for its charge id, locked. */
export const lockUnassignedIntent = (tx: Tx, intentId: number, gateway: GatewayName): Promise<IntentRow | undefined> =>
  lockIntent(tx, tx`id = ${intentId} and gateway = ${gateway} and external_id like 'unassigned:%'`)

/** A top-up of ours whose hosted checkout was created (its external id names the session), locked. */
export const lockCheckoutTopup = (tx: Tx, intentId: number, gateway: GatewayName): Promise<IntentRow | undefined> =>
  lockIntent(
    tx,
    tx`id = ${intentId} and gateway = ${gateway} and purpose = 'topup' and external_id not like 'unassigned:%'`,
  )

export const setExternalId = async (tx: Tx, intentId: number, externalId: string): Promise<void> => {
  await tx`update payment_intents set external_id = ${externalId} where id = ${intentId}`
}

export const findCardIntent = async (tx: Tx, intentId: number): Promise<IntentRow | undefined> => {
  const [row] = await tx<[IntentRow?]>`
    select id, tenant_id, gateway, amount_minor, currency, status, purpose, external_id, save_method
      from payment_intents
    where id = ${intentId} and gateway = 'gw_card'`
  return row
}

/** Whether an autocharge of the workspace is pending and younger than `staleAfter` (an interval). */
export const autochargeInFlight = async (tx: Tx, tenantId: number, staleAfter: string): Promise<boolean> => {
  const [row] = await tx`
    select 1 from payment_intents
    where tenant_id = ${tenantId} and purpose = 'autocharge' and status = 'pending'
      and created_at > now() - ${staleAfter}::interval
    limit 1`
  return row !== undefined
}

// --- gateway events -----------------------------------------------------------------------

/** Records an event once per source and id; undefined when it was recorded before. */
export const recordEvent = async (
  tx: Tx,
  e: { source: string; eventId: string; type: string; payload: unknown },
): Promise<number | undefined> => {
  const [row] = await tx<[{ id: number }?]>`
    insert into payment_events (source, event_id, type, payload)
    values (${e.source}, ${e.eventId}, ${e.type}, ${tx.json(e.payload as never)})
    on conflict (source, event_id) do nothing
    returning id`
  return row?.id
}

export const setEventOutcome = async (
  tx: Tx,
  eventId: number,
  outcome: string,
  intentId: number | null,
): Promise<void> => {
  await tx`update payment_events set outcome = ${outcome}, intent_id = ${intentId} where id = ${eventId}`
}

// --- saved methods ------------------------------------------------------------------------

export const hasActiveMethod = async (sql: Sql | Tx, tenantId: number, gateway: GatewayName): Promise<boolean> => {
  const [row] = await sql`select 1 from payment_methods where tenant_id = ${tenantId} and gateway = ${gateway}
      and status = 'active' limit 1`
  return row !== undefined
}

export const newestActiveMethod = async (
  tx: Tx,
  tenantId: number,
  gateway: GatewayName,
): Promise<{ id: number; customer_id: string; method_id: string } | undefined> => {
  const [row] = await tx<[{ id: number; customer_id: string; method_id: string }?]>`
    select id, customer_id, method_id from payment_methods
    where tenant_id = ${tenantId} and gateway = ${gateway} and status = 'active'
    order by id desc limit 1`
  return row
}

/** Saves a method (or brings a removed one back). */
export const upsertMethod = async (
  tx: Tx,
  m: { tenantId: number; gateway: GatewayName; customerId: string; methodId: string; hint: string },
): Promise<void> => {
  await tx`
    insert into payment_methods (tenant_id, gateway, customer_id, method_id, display_hint)
    values (${m.tenantId}, ${m.gateway}, ${m.customerId}, ${m.methodId}, ${m.hint})
    on conflict (tenant_id, gateway, method_id) do update set status = 'active', removed_at = null,
      customer_id = excluded.customer_id`
}

export const listActiveMethods = (sql: Sql, tenantId: number): Promise<SavedMethodRow[]> =>
  sql<SavedMethodRow[]>`
    select id, gateway, display_hint, status, created_at from payment_methods
    where tenant_id = ${tenantId} and status = 'active' order by id desc limit 50`

/** Marks an active method removed; its gateway, or undefined when there was none to remove. */
export const removeMethod = async (tx: Tx, tenantId: number, id: number): Promise<GatewayName | undefined> => {
  const [row] = await tx<[{ gateway: GatewayName }?]>`
    update payment_methods set status = 'removed', removed_at = now()
    where id = ${id} and tenant_id = ${tenantId} and status = 'active'
    returning gateway`
  return row?.gateway
}
