// SQL of onboarding: the tenant's mode and completion, its provider credentials (the encrypted
// secret is read only by `activeCredentialRow`, the encrypted ignored extra keys by nothing), and
// the facts the completion checklist reads.

import type { Sql, Tx } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"
import type { Mode } from "../workspaces/workspaces.repo.js"
export type CredentialStatus = "validated" | "failed" | "unvalidated"

export interface TenantOnboardingRow {
  readonly mode: Mode
  readonly completed_at: Date | null
  readonly plan_tier: string
  readonly currency: Currency
}

/** A stored credential without its secret. */
export interface CredentialRow {
  readonly provider: string
  readonly primary_id: string | null
  readonly extra: Record<string, unknown>
  readonly hint: string
  readonly status: CredentialStatus
  readonly validation_method: "live" | "format" | null
  readonly validation_error: string | null
  readonly validated_at: Date | null
  readonly created_at: Date
  readonly updated_at: Date
}

export interface ReadinessFacts {
  readonly owner_email_verified: boolean
  readonly balance_minor: number
}

const credentialColumns = (sql: Sql | Tx) =>
  sql`provider, primary_id, extra, hint, status, validation_method, validation_error, validated_at, created_at,
    updated_at`

export const tenantOnboarding = async (sql: Sql | Tx, tenantId: number): Promise<TenantOnboardingRow> => {
  const [row] = await sql<[TenantOnboardingRow]>`
    select onboarding_mode as mode, onboarding_completed_at as completed_at, plan_tier, currency from tenants
      where id = ${tenantId}`
  return row
}

/** The tenant row locked for the transaction: completion, mode switches and credential changes serialise on it. */
export const lockTenantOnboarding = async (tx: Tx, tenantId: number): Promise<TenantOnboardingRow> => {
  const [row] = await tx<[TenantOnboardingRow]>`
    select onboarding_mode as mode, onboarding_completed_at as completed_at, plan_tier, currency from tenants
      where id = ${tenantId} for update`
  return row
}

export const listCredentials = (sql: Sql | Tx, tenantId: number) =>
  sql<
    CredentialRow[]
  >`select ${credentialColumns(sql)} from provider_credentials where tenant_id = ${tenantId} order by provider`

export const readinessFacts = async (sql: Sql | Tx, tenantId: number): Promise<ReadinessFacts> => {
  const [row] = await sql<[ReadinessFacts]>`
    select
      exists (select 1 from users where tenant_id = ${tenantId} and role = 'owner' and email_verified)
        as owner_email_verified,
      coalesce((select balance_minor from wallets where tenant_id = ${tenantId}), 0) as balance_minor`
  return row
}

export interface CredentialWrite {
  readonly tenantId: number
  readonly provider: string
  readonly primaryId: string | null
  readonly secretEnc: string
  readonly extra: Record<string, unknown>
  /** The extra keys the provider does not use, encrypted as JSON; null when there were none. */
  readonly ignoredExtraEnc: string | null
  readonly hint: string
  readonly status: CredentialStatus
  readonly validationMethod: "live" | "format" | null
  readonly validationError: string | null
  readonly now: Date
}

/** Inserts or replaces the tenant's credential for the provider (created_at survives a replace). */
export const upsertCredential = async (tx: Tx, w: CredentialWrite): Promise<CredentialRow> => {
  const validatedAt = w.status === "validated" ? w.now : null
  const [row] = await tx<[CredentialRow]>`
    insert into provider_credentials
      (tenant_id, provider, primary_id, secret_enc, extra, ignored_extra_enc, hint, status, validation_method,
        validation_error, validated_at, created_at, updated_at)
    values
      (${w.tenantId}, ${w.provider}, ${w.primaryId}, ${w.secretEnc}, ${tx.json(w.extra as never)},
        ${w.ignoredExtraEnc}, ${w.hint}, ${w.status},
       ${w.validationMethod}, ${w.validationError}, ${validatedAt}, ${w.now}, ${w.now})
    on conflict (tenant_id, provider) do update set
      primary_id = excluded.primary_id, secret_enc = excluded.secret_enc, extra = excluded.extra,
      ignored_extra_enc = excluded.ignored_extra_enc, hint = excluded.hint,
      status = excluded.status, validation_method = excluded.validation_method,
        validation_error = excluded.validation_error,
      validated_at = excluded.validated_at, updated_at = excluded.updated_at
    returning ${credentialColumns(tx)}`
  return row
}

export const deleteCredential = async (tx: Tx, tenantId: number, provider: string): Promise<boolean> => {
  const rows =
    await tx`delete from provider_credentials where tenant_id = ${tenantId} and provider = ${provider} returning id`
  return rows.length > 0
}

export interface SecretRow {
  readonly provider: string
  readonly primary_id: string | null
  readonly secret_enc: string
  readonly extra: Record<string, unknown>
}

/** The credential a byok tenant's runtime may use: validated, and the tenant in byok mode. */
export const activeCredentialRow = async (
  sql: Sql | Tx,
  tenantId: number,
  provider: string,
): Promise<SecretRow | undefined> => {
  const [row] = await sql<[SecretRow?]>`
    select c.provider, c.primary_id, c.secret_enc, c.extra
    from provider_credentials c join tenants t on t.id = c.tenant_id
    where c.tenant_id = ${tenantId} and c.provider = ${provider} and c.status = 'validated'
      and t.onboarding_mode = 'byok'`
  return row
}
