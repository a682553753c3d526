// SQL of the workspace (tenant) row: the only file that writes `tenants` (its name, plan tier and
// onboarding state included). Other repositories read a tenant's columns by join where they need
// them; the row as a whole, its public shape and its country are read here.

import type { TenantCountry } from "../phones/phone.js"
import type { Sql, Tx } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"

/** How a workspace reaches its providers: the platform's accounts (bundled) or its own (byok). */
export type Mode = "bundled" | "byok"

export interface TenantRow {
  readonly id: number
  readonly name: string
  readonly status: "active" | "suspended" | "closed"
  readonly plan_tier: string
  readonly country: string
  readonly currency: Currency
  readonly onboarding_mode: Mode
  readonly trial_expires_at: Date | null
  readonly created_at: Date
  /** How many days the workspace's call recordings are kept (1–3650, default 90; src/recordings/). */
  readonly recording_retention_days: number
}

export const insertTenant = async (
  tx: Tx,
  t: { name: string; country: string; currency: Currency; trialExpiresAt: Date },
): Promise<TenantRow> => {
  const [row] = await tx<[TenantRow]>`
    insert into tenants (name, country, currency, trial_expires_at)
    values (${t.name}, ${t.country}, ${t.currency}, ${t.trialExpiresAt})
    returning *`
  return row
}

export const findTenant = async (sql: Sql | Tx, tenantId: number): Promise<TenantRow | undefined> => {
  const [row] = await sql<[TenantRow?]>`select * from tenants where id = ${tenantId}`
  return row
}

/** The workspace's currency and plan tier (the billing pages read only these). */
export const findTenantPlan = async (
  sql: Sql | Tx,
  tenantId: number,
): Promise<{ currency: Currency; plan_tier: string }> => {
  const [row] = await sql<
    [{ currency: Currency; plan_tier: string }]
  >`select currency, plan_tier from tenants where id = ${tenantId}`
  return row
}

/** The workspace's country: the default for numbers written without one, and the DNC registry's. */
export async function tenantCountry(sql: Sql, tenantId: number): Promise<TenantCountry> {
  const [row] = await sql<[{ country: TenantCountry }]>`select country from tenants where id = ${tenantId}`
  return row.country
}

/** Renames the workspace; its name before (callees hear the new one from the next run on). */
export const renameTenant = async (
  tx: Tx,
  tenantId: number,
  name: string,
): Promise<{ before: string; after: TenantRow }> => {
  const [old] = await tx<[{ name: string }]>`select name from tenants where id = ${tenantId} for update`
  const [row] = await tx<[TenantRow]>`update tenants set name = ${name} where id = ${tenantId} returning *`
  return { before: old.name, after: row }
}

/** Moves the workspace onto `to` (only from `from` when given: cancelling leaves other tiers alone). */
export const setPlanTier = async (sql: Sql | Tx, tenantId: number, to: string, from?: string): Promise<void> => {
  if (from === undefined) await sql`update tenants set plan_tier = ${to} where id = ${tenantId}`
  else await sql`update tenants set plan_tier = ${to} where id = ${tenantId} and plan_tier = ${from}`
}

/** How many days the workspace keeps its call recordings. */
export async function recordingRetentionDays(sql: Sql | Tx, tenantId: number): Promise<number | undefined> {
  const [row] = await sql<[{ days: number }?]>`
    select recording_retention_days as days from tenants where id = ${tenantId}`
  return row?.days
}

/** Sets the recordings' retention; the days before, undefined when there is no such workspace. */
export async function setRecordingRetentionDays(tx: Tx, tenantId: number, days: number): Promise<number | undefined> {
  const [old] = await tx<[{ days: number }?]>`
    select recording_retention_days as days from tenants where id = ${tenantId} for update`
  if (old === undefined) return undefined
  await tx`update tenants set recording_retention_days = ${days} where id = ${tenantId}`
  return old.days
}

// The workspace's onboarding state (src/onboarding decides it; the row is written only here).

/** Switches the mode and resets completion; false when the tenant was already in that mode. */
export const switchMode = async (tx: Tx, tenantId: number, mode: Mode): Promise<boolean> => {
  const rows = await tx`
    update tenants set onboarding_mode = ${mode}, onboarding_completed_at = null
    where id = ${tenantId} and onboarding_mode <> ${mode} returning id`
  return rows.length > 0
}

export const resetCompletion = (tx: Tx, tenantId: number) =>
  tx`update tenants set onboarding_completed_at = null where id = ${tenantId} and onboarding_completed_at is not null`

/** Marks onboarding done; completing again keeps the first time. */
export const markCompleted = (tx: Tx, tenantId: number, now: Date) =>
  tx`update tenants set onboarding_completed_at = coalesce(onboarding_completed_at, ${now}) where id = ${tenantId}`

/** The public shape of a workspace (GET /api/workspace, and `tenant` in the auth responses). */
export const tenantView = (t: TenantRow) => ({
  id: t.id,
  name: t.name,
  status: t.status,
  plan_tier: t.plan_tier,
  created_at: t.created_at.toISOString(),
  onboarding_mode: t.onboarding_mode,
  country: t.country,
  currency: t.currency,
})

/** The workspace as GET and PATCH /api/workspace show it: its public shape and its settings. */
export const workspaceView = (t: TenantRow) => ({
  ...tenantView(t),
  recording_retention_days: t.recording_retention_days,
})
