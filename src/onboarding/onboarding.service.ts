// Onboarding: the tenant's mode (bundled: the platform's provider accounts; byok: its own), its
// provider credentials (checked against the catalogue, validated live, stored encrypted, never
// returned), the completion checklist, and completion itself (reset whenever what it certified changes).
import { Effect } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import { Clock } from "../platform/Clock.js"
import { Db, type Sql, type Tx } from "../platform/Db.js"
import { Conflict, EncryptionUnavailable, NotFound, ValidationFailed } from "../platform/errors.js"
import { Log } from "../platform/Log.js"
import { type Currency, formatAmount } from "../platform/money.js"
import { iso } from "../platform/time.js"
import { type Mode, markCompleted, resetCompletion, switchMode } from "../workspaces/workspaces.repo.js"
import { credentialCryptoFor } from "./Credentials.js"
import { maskSecret } from "./credentials.crypto.js"
import { type ValidationOutcome, validateCredential } from "./credentials.validators.js"
import type { CredentialRow, CredentialStatus, ReadinessFacts } from "./onboarding.repo.js"
import * as repo from "./onboarding.repo.js"
import {
  type CredentialInput,
  checkCredentialInput,
  isProviderId,
  PROVIDERS,
  type ProviderId,
} from "./providers.catalogue.js"
import { privateUrlReason } from "./public-url.js"

export type ChecklistItemId =
  | "email_verified"
  | "wallet_funded"
  | "byok_subscription"
  | "llm_credential"
  | "telephony_credential"
  | "tts_credential"
  | "stt_credential"

export interface ChecklistItem {
  readonly item: ChecklistItemId
  readonly done: boolean
  readonly detail: string
}

export interface ProviderStatusView {
  readonly provider: ProviderId
  readonly kind: string
  readonly configured: boolean
  readonly status: CredentialStatus | "not_configured"
  readonly hint: string | null
  readonly primary_id: string | null
  readonly validation_method: "live" | "format" | null
  readonly validated_at: string | null
  readonly updated_at: string | null
  readonly error?: string
  /** Saved but not used: the tenant is in bundled mode. */
  readonly dormant: boolean
}

export interface OnboardingStatus {
  readonly mode: Mode
  readonly completed: boolean
  readonly completed_at: string | null
  /** Every checklist item is done: POST /onboarding/complete would succeed. */
  readonly ready: boolean
  readonly providers: ReadonlyArray<ProviderStatusView>
  readonly checklist: ReadonlyArray<ChecklistItem>
  readonly missing: ReadonlyArray<ChecklistItemId>
}

export interface CredentialView {
  readonly provider: string
  readonly status: CredentialStatus
  readonly hint: string
  readonly primary_id: string | null
  readonly extra: Record<string, unknown>
  readonly validation_method: "live" | "format" | null
  readonly validated_at: string | null
  readonly created_at: string
  readonly updated_at: string
}

const credentialView = (r: CredentialRow): CredentialView => ({
  provider: r.provider,
  status: r.status,
  hint: r.hint,
  primary_id: r.primary_id,
  extra: r.extra,
  validation_method: r.validation_method,
  validated_at: iso(r.validated_at),
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
})

// ---------------------------------------------------------------------------------------------
// The checklist

const credentialItem = (
  item: ChecklistItemId,
  what: string,
  providers: ReadonlyArray<ProviderId>,
  creds: ReadonlyMap<string, CredentialRow>,
): ChecklistItem => {
  const validated = providers.find((p) => creds.get(p)?.status === "validated")
  if (validated !== undefined) return { item, done: true, detail: `${what}: ${validated} credential validated` }
  const saved = providers.map((p) => creds.get(p)).find((c) => c !== undefined)
  const where = providers.map((p) => `PUT /onboarding/credentials/${p}`).join(" or ")
  if (saved === undefined) return { item, done: false, detail: `${what}: save a credential (${where})` }
  if (saved.status === "failed")
    return {
      item,
      done: false,
      detail:
        `${what}: the ${saved.provider} credential failed validation (${saved.validation_error ?? "rejected"})` +
        "; save a working one",
    }
  return {
    item,
    done: false,
    detail:
      `${what}: the ${saved.provider} credential could not be validated yet ` +
      `(${saved.validation_error ?? "no answer"}); save it again`,
  }
}

/**
 * What onboarding needs. Both modes: an owner's email address verified. Bundled: a funded wallet
 * (the trial credit counts). Byok: the platform-fee subscription active (plan_tier byok) and a
 * validated credential for the language model, for one telephony provider (telco_a or telco_b),
 * for speech synthesis and for speech recognition.
 */
export function checklistFor(
  mode: Mode,
  tenant: { readonly plan_tier: string; readonly currency: Currency },
  facts: ReadinessFacts,
  creds: ReadonlyMap<string, CredentialRow>,
): ChecklistItem[] {
  const email: ChecklistItem = facts.owner_email_verified
    ? { item: "email_verified", done: true, detail: "the owner's email address is verified" }
    : { item: "email_verified", done: false, detail: "verify the owner's email address (the link in the signup email)" }
  if (mode === "bundled")
    return [
      email,
      facts.balance_minor > 0
        ? {
            item: "wallet_funded",
            done: true,
            detail: `wallet balance ${formatAmount(facts.balance_minor, tenant.currency)}`,
          }
        : { item: "wallet_funded", done: false, detail: "the wallet is empty: top it up (POST /billing/topup)" },
    ]
  return [
    email,
    tenant.plan_tier === "byok"
      ? { item: "byok_subscription", done: true, detail: "the byok platform-fee subscription is active" }
      : {
          item: "byok_subscription",
          done: false,
          detail: "subscribe to the byok plan (POST /billing/subscription) and authorise the mandate",
        },
    credentialItem("llm_credential", "language model", ["llm"], creds),
    credentialItem("telephony_credential", "telephony", ["telco_a", "telco_b"], creds),
    credentialItem("tts_credential", "speech synthesis", ["tts"], creds),
    credentialItem("stt_credential", "speech recognition", ["stt"], creds),
  ]
}

async function readStatus(
  sql: Sql | Tx,
  tenantId: number,
): Promise<{ status: OnboardingStatus; tenant: repo.TenantOnboardingRow }> {
  const tenant = await repo.tenantOnboarding(sql, tenantId)
  const rows = await repo.listCredentials(sql, tenantId)
  const facts = await repo.readinessFacts(sql, tenantId)
  const creds = new Map(rows.map((r) => [r.provider, r]))
  const checklist = checklistFor(tenant.mode, tenant, facts, creds)
  const missing = checklist.filter((c) => !c.done).map((c) => c.item)
  const providers = PROVIDERS.map((p): ProviderStatusView => {
    const c = creds.get(p.id)
    return {
      provider: p.id,
      kind: p.kind,
      configured: c !== undefined,
      status: c?.status ?? "not_configured",
      hint: c?.hint ?? null,
      primary_id: c?.primary_id ?? null,
      validation_method: c?.validation_method ?? null,
      validated_at: iso(c?.validated_at ?? null),
      updated_at: iso(c?.updated_at ?? null),
      ...(c?.validation_error != null && { error: c.validation_error }),
      dormant: c !== undefined && tenant.mode === "bundled",
    }
  })
  return {
    tenant,
    status: {
      mode: tenant.mode,
      completed: tenant.completed_at !== null,
      completed_at: iso(tenant.completed_at),
      ready: missing.length === 0,
      providers,
      checklist,
      missing,
    },
  }
}

// ---------------------------------------------------------------------------------------------
// Operations

export const onboardingStatus = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    return (yield* Effect.promise(() => readStatus(sql, tenantId))).status
  })

/** Switching keeps saved credentials (dormant in bundled mode) and resets completion; the same mode is a no-op. */
export const setOnboardingMode = (tenantId: number, mode: Mode) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const log = yield* Log
    const changed = yield* Effect.promise(() => sql.begin((tx) => switchMode(tx, tenantId, mode)) as Promise<boolean>)
    if (changed) log.info({ tenant_id: tenantId, mode }, "onboarding mode switched")
    return yield* onboardingStatus(tenantId)
  })

const providerOf = (provider: string) =>
  isProviderId(provider)
    ? Effect.succeed(provider)
    : Effect.fail(new NotFound({ message: `no provider ${provider}; GET /onboarding/providers lists them` }))

const bundledConflict = () =>
  new Conflict({
    code: "MODE_IS_BUNDLED",
    message:
      "the workspace is in bundled mode and uses the platform's providers; switch to byok first (PUT /onboarding/mode)",
  })

const storedOutcome = (
  o: ValidationOutcome,
): { status: CredentialStatus; method: "live" | "format" | null; error: string | null } =>
  o.result === "valid"
    ? { status: "validated", method: o.method, error: null }
    : { status: o.result === "rejected" ? "failed" : "unvalidated", method: "live", error: o.message.slice(0, 500) }

export interface SaveResult {
  readonly saved: true
  readonly validated: boolean
  readonly error?: string
  /** The names of the extra keys the provider does not use: stored encrypted, never used or returned. */
  readonly ignored_extra: ReadonlyArray<string>
  readonly credential: CredentialView
}

/**
 * Checks the credential against the catalogue, validates it live, and stores it encrypted
 * (replacing any earlier one, with a fresh nonce) whatever the validation said: a rejected
 * credential is stored as failed, one the provider could not judge as unvalidated. A save that
 * does not validate resets completion, as the credential it replaced may have been the one
 * completion certified. Extra keys the provider does not use are stored encrypted beside the
 * secret (they may be secrets too) and answered by name only.
 */
export const saveCredential = (tenantId: number, providerParam: string, input: CredentialInput) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const config = yield* AppConfig
    const clock = yield* Clock
    const log = yield* Log
    const provider = yield* providerOf(providerParam)
    const tenant = yield* Effect.promise(() => repo.tenantOnboarding(sql, tenantId))
    if (tenant.mode === "bundled") return yield* Effect.fail(bundledConflict())
    const crypto = credentialCryptoFor(config)
    if (crypto === undefined)
      return yield* Effect.fail(
        new EncryptionUnavailable({
          message: "provider credentials cannot be stored: the server has no CREDENTIALS_MASTER_KEY configured",
        }),
      )
    const checked = checkCredentialInput(provider, input)
    if (!checked.ok)
      return yield* Effect.fail(
        new ValidationFailed({ message: `the ${provider} credential is invalid`, errors: checked.errors }),
      )
    const cred = checked.value
    if (!config.allowPrivateProviderUrls)
      for (const field of ["api_base_url", "base_url"] as const) {
        const url = cred.extra[field]
        if (typeof url !== "string") continue
        const reason = yield* Effect.promise(() => privateUrlReason(url))
        if (reason !== undefined)
          return yield* Effect.fail(
            new ValidationFailed({
              message: `the ${provider} credential is invalid`,
              errors: [{ field: `extra.${field}`, message: reason }],
            }),
          )
      }

    const outcome = yield* Effect.promise(() =>
      validateCredential(provider, cred, {
        platform: { llmBaseUrl: config.llmBaseUrl, telcoAApiUrl: config.telcoA?.apiUrl },
        allowPrivateProviderUrls: config.allowPrivateProviderUrls,
        providerResponseLimitBytes: config.providerResponseLimitBytes,
      }),
    )
    const stored = storedOutcome(outcome)
    const secretEnc = crypto.encrypt(cred.secret, { tenantId, provider })
    const ignoredExtra = Object.keys(cred.ignoredExtra)
    // Its own associated data: this envelope and the secret's cannot stand in for each other.
    const ignoredExtraEnc =
      ignoredExtra.length === 0
        ? null
        : crypto.encrypt(JSON.stringify(cred.ignoredExtra), { tenantId, provider: `${provider}/ignored_extra` })
    const now = clock.now()
    const row = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          // The mode may have switched while the provider was being asked.
          const locked = await repo.lockTenantOnboarding(tx, tenantId)
          if (locked.mode === "bundled") return undefined
          const written = await repo.upsertCredential(tx, {
            tenantId,
            provider,
            primaryId: cred.primaryId,
            secretEnc,
            extra: { ...cred.extra },
            ignoredExtraEnc,
            hint: maskSecret(cred.secret),
            status: stored.status,
            validationMethod: stored.method,
            validationError: stored.error,
            now,
          })
          if (stored.status !== "validated") await resetCompletion(tx, tenantId)
          return written
        }) as Promise<CredentialRow | undefined>,
    )
    if (row === undefined) return yield* Effect.fail(bundledConflict())
    log.info(
      {
        tenant_id: tenantId,
        provider,
        status: stored.status,
        validation: stored.method,
        ignored_extra_keys: ignoredExtra.length,
      },
      "provider credential saved",
    )
    const result: SaveResult = {
      saved: true,
      validated: stored.status === "validated",
      ...(stored.error !== null && { error: stored.error }),
      ignored_extra: ignoredExtra,
      credential: credentialView(row),
    }
    return result
  })

/** Removes the credential (bundled or byok); onboarding is no longer complete. */
export const removeCredential = (tenantId: number, providerParam: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const log = yield* Log
    const provider = yield* providerOf(providerParam)
    const deleted = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          await repo.lockTenantOnboarding(tx, tenantId)
          const gone = await repo.deleteCredential(tx, tenantId, provider)
          if (gone) await resetCompletion(tx, tenantId)
          return gone
        }) as Promise<boolean>,
    )
    if (!deleted) return yield* Effect.fail(new NotFound({ message: `no saved ${provider} credential` }))
    log.info({ tenant_id: tenantId, provider }, "provider credential deleted")
    return { deleted: true as const, provider }
  })

/** Marks onboarding done when every checklist item is; 409 ONBOARDING_INCOMPLETE with `missing` otherwise. */
export const completeOnboarding = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const now = clock.now()
    const missing = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          // Locked first, so a concurrent delete or mode switch lands wholly before or after.
          await repo.lockTenantOnboarding(tx, tenantId)
          const { status } = await readStatus(tx, tenantId)
          if (status.missing.length === 0) await markCompleted(tx, tenantId, now)
          return status.missing
        }) as Promise<ReadonlyArray<ChecklistItemId>>,
    )
    if (missing.length > 0)
      return yield* Effect.fail(
        new Conflict({
          code: "ONBOARDING_INCOMPLETE",
          message: `onboarding is not ready: ${missing.join(", ")} missing`,
          details: { missing },
        }),
      )
    return yield* onboardingStatus(tenantId)
  })
