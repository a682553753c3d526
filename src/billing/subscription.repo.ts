// SQL for byok subscriptions and the charges of their periods (subscriptions, subscription_charges).
import type { Sql, Tx } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"

export interface SubscriptionRow {
  readonly id: number
  readonly tenant_id: number
  readonly plan: string
  readonly status: "pending_authorisation" | "active" | "cancelled"
  readonly amount_minor: number
  readonly currency: Currency
  readonly external_id: string
  readonly short_url: string
  readonly current_period_start: Date | null
  readonly current_period_end: Date | null
  readonly created_at: Date
  readonly cancelled_at: Date | null
}

/** The workspace's subscription that is not cancelled (at most one, by index). */
export const findOpen = async (sql: Sql | Tx, tenantId: number): Promise<SubscriptionRow | undefined> => {
  const [row] = await sql<
    [SubscriptionRow?]
  >`select * from subscriptions where tenant_id = ${tenantId} and status <> 'cancelled'`
  return row
}

/** Throws the unique violation `subscriptions_one_open` when the workspace already has one open. */
export const insertPending = async (
  sql: Sql,
  s: { tenantId: number; amountMinor: number; currency: Currency; externalId: string; shortUrl: string },
): Promise<SubscriptionRow> => {
  const [row] = await sql<[SubscriptionRow]>`
    insert into subscriptions (tenant_id, status, amount_minor, currency, external_id, short_url)
    values (${s.tenantId}, 'pending_authorisation', ${s.amountMinor}, ${s.currency}, ${s.externalId}, ${s.shortUrl})
    returning *`
  return row
}

export const cancelOpen = async (sql: Sql, tenantId: number): Promise<SubscriptionRow | undefined> => {
  const [row] = await sql<[SubscriptionRow?]>`
    update subscriptions set status = 'cancelled', cancelled_at = now()
    where tenant_id = ${tenantId} and status <> 'cancelled'
    returning *`
  return row
}

/** Records the period's charge once; false when that period was already charged. */
export const insertCharge = async (tx: Tx, s: SubscriptionRow, start: Date, end: Date): Promise<boolean> => {
  const [charge] = await tx<[{ id: number }?]>`
    insert into subscription_charges (subscription_id, period_start, period_end, amount_minor)
    values (${s.id}, ${start}, ${end}, ${s.amount_minor})
    on conflict (subscription_id, period_start) do nothing
    returning id`
  return charge !== undefined
}

export const setPeriod = async (tx: Tx, id: number, start: Date, end: Date): Promise<void> => {
  await tx`update subscriptions set current_period_start = ${start}, current_period_end = ${end} where id = ${id}`
}

export const lockByExternalId = async (tx: Tx, externalId: string): Promise<SubscriptionRow | undefined> => {
  const [row] = await tx<[SubscriptionRow?]>`select * from subscriptions where external_id = ${externalId} for update`
  return row
}

export const activate = async (tx: Tx, id: number): Promise<void> => {
  await tx`update subscriptions set status = 'active' where id = ${id}`
}

/** Active subscriptions whose period ended by `now`, locked; those another process holds are skipped. */
export const lockDue = (tx: Tx, now: Date, limit: number): Promise<SubscriptionRow[]> =>
  tx<SubscriptionRow[]>`
    select * from subscriptions
    where status = 'active' and current_period_end <= ${now}
    order by current_period_end limit ${limit}
    for update skip locked`
