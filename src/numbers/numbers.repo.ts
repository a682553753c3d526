// SQL of the workspaces' phone numbers: the claim that makes a number one workspace's, its
// activation and release, and the monthly-rental bookkeeping.

import { isUniqueViolation, type Sql, type Tx } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"
import type { ListPage } from "../platform/page.cursor.js"

export type NumberSource = "provisioned" | "imported"
export type NumberStatus = "pending" | "active" | "released"
export type NumberProvider = "sim" | "telco_a"
export type AccountOwner = "platform" | "tenant"

export interface NumberRow {
  readonly id: number
  readonly tenant_id: number
  readonly phone_e164: string
  readonly country: string
  readonly source: NumberSource
  readonly provider: NumberProvider
  readonly account: AccountOwner
  readonly account_ref: string | null
  readonly provider_number_id: string | null
  readonly status: NumberStatus
  readonly monthly_cost_minor: number
  readonly currency: Currency
  readonly workflow_id: number | null
  readonly capabilities: { voice: boolean; sms: boolean }
  readonly voice_url: string | null
  readonly status_url: string | null
  readonly current_period_start: Date | null
  readonly current_period_end: Date | null
  readonly rent_due_at: Date | null
  readonly created_at: Date
  readonly activated_at: Date | null
  readonly released_at: Date | null
}

/** A claim older than this was left by a process that died mid-provisioning; it no longer holds the number. */
const STALE_CLAIM = "10 minutes"

export interface Claim {
  readonly tenantId: number
  readonly phone: string
  readonly country: string
  readonly source: NumberSource
  readonly provider: NumberProvider
  readonly account: AccountOwner
  readonly accountRef: string | null
  readonly monthlyCostMinor: number
  readonly currency: Currency
  readonly workflowId: number | null
  readonly voiceUrl: string
  readonly statusUrl: string
  readonly capabilities: { voice: boolean; sms: boolean }
}

/** Claims the number for the workspace (status pending); undefined when another claim or active number holds it. */
export async function claim(sql: Sql, c: Claim): Promise<number | undefined> {
  await sql`delete from phone_numbers where phone_e164 = ${c.phone} and status = 'pending'
    and created_at < now() - ${STALE_CLAIM}::interval`
  try {
    const [row] = await sql<[{ id: number }]>`
      insert into phone_numbers (tenant_id, phone_e164, country, source, provider, account, account_ref, status,
        monthly_cost_minor, currency, workflow_id, voice_url, status_url, capabilities)
      values (${c.tenantId}, ${c.phone}, ${c.country}, ${c.source}, ${c.provider}, ${c.account}, ${c.accountRef},
        'pending', ${c.monthlyCostMinor}, ${c.currency}, ${c.workflowId}, ${c.voiceUrl}, ${c.statusUrl},
        ${sql.json(c.capabilities)})
      returning id`
    return row.id
  } catch (e) {
    if (isUniqueViolation(e, "phone_numbers_one_holder")) return undefined
    throw e
  }
}

/** Forgets a claim the provider did not honour. */
export async function dropClaim(sql: Sql | Tx, id: number): Promise<void> {
  await sql`delete from phone_numbers where id = ${id} and status = 'pending'`
}

export async function activate(
  tx: Tx,
  id: number,
  a: { providerNumberId: string; now: Date; periodEnd: Date | null },
): Promise<NumberRow> {
  const [row] = await tx<[NumberRow]>`
    update phone_numbers set status = 'active', provider_number_id = ${a.providerNumberId}, activated_at = ${a.now},
      current_period_start = ${a.periodEnd === null ? null : a.now}, current_period_end = ${a.periodEnd},
        rent_due_at = ${a.periodEnd}
    where id = ${id} and status = 'pending'
    returning *`
  return row
}

/** Which of `phones` some workspace holds (claimed or active). */
export async function held(sql: Sql, phones: ReadonlyArray<string>): Promise<Set<string>> {
  if (phones.length === 0) return new Set()
  const rows = await sql<Array<{ phone_e164: string }>>`
    select phone_e164 from phone_numbers where phone_e164 = any (${sql.array([...phones], 25)}::text[])
      and status in ('pending', 'active')`
  return new Set(rows.map((r) => r.phone_e164))
}

/**
 * One page of the workspace's numbers, newest first (one row more to tell if there is a next); claims in flight are
 * not shown.
 */
export async function list(
  sql: Sql,
  tenantId: number,
  status: "active" | "released" | undefined,
  page: ListPage,
): Promise<NumberRow[]> {
  const rows = await sql<NumberRow[]>`
    select * from phone_numbers
    where tenant_id = ${tenantId} and ${status === undefined ? sql`status <> 'pending'` : sql`status = ${status}`}
      ${page.before === undefined ? sql`` : sql`and id < ${page.before}`}
    order by id desc
    limit ${page.limit + 1}`
  return [...rows]
}

export async function find(sql: Sql, tenantId: number, id: number): Promise<NumberRow | undefined> {
  const [row] = await sql<
    [NumberRow?]
  >`select * from phone_numbers where id = ${id} and tenant_id = ${tenantId} and status <> 'pending'`
  return row
}

/**
 * The active number with this E.164, whichever workspace holds it (inbound calls find their workspace and workflow
 * here).
 */
export async function findActiveByPhone(sql: Sql, phone: string): Promise<NumberRow | undefined> {
  const [row] = await sql<[NumberRow?]>`select * from phone_numbers where phone_e164 = ${phone} and status = 'active'`
  return row
}

/** Marks an active number released; undefined when it was not active (a concurrent release won). */
export async function markReleased(sql: Sql, tenantId: number, id: number, now: Date): Promise<NumberRow | undefined> {
  const [row] = await sql<[NumberRow?]>`
    update phone_numbers set status = 'released', released_at = ${now}, rent_due_at = null
    where id = ${id} and tenant_id = ${tenantId} and status = 'active'
    returning *`
  return row
}

export async function workflowInTenant(sql: Sql, tenantId: number, workflowId: number): Promise<boolean> {
  const [row] =
    await sql`select 1 from workflows where id = ${workflowId} and tenant_id = ${tenantId} and archived_at is null`
  return row !== undefined
}

/** Active rented numbers whose next charge is due, locked for this renewer (others skip them). */
export async function dueForRent(tx: Tx, now: Date, limit: number): Promise<NumberRow[]> {
  const rows = await tx<NumberRow[]>`
    select * from phone_numbers
    where status = 'active' and monthly_cost_minor > 0 and rent_due_at <= ${now}
    order by rent_due_at limit ${limit}
    for update skip locked`
  return [...rows]
}

export async function advanceRent(tx: Tx, id: number, start: Date, end: Date): Promise<void> {
  await tx`update phone_numbers set current_period_start = ${start}, current_period_end = ${end}, rent_due_at = ${end}
    where id = ${id}`
}

/** A charge the wallet could not pay is tried again at `at`. */
export async function postponeRent(tx: Tx, id: number, at: Date): Promise<void> {
  await tx`update phone_numbers set rent_due_at = ${at} where id = ${id}`
}
