// The building blocks the numbers service shares across its operations: which account a
// workspace's numbers live on (and the seam that supplies byok accounts), the public view of a
// stored number, the webhooks we wire, and the checks and provider-failure mapping that search,
// provision, import and release all use.
import { Context, Effect } from "effect"
import { parsePhoneNumberFromString } from "libphonenumber-js/max"
import { NUMBER_MONTHLY_MINOR } from "../billing/pricing.js"
import { type TenantCountry, toE164 } from "../phones/phone.js"
import { AppConfig } from "../platform/AppConfig.js"
import type { Sql } from "../platform/Db.js"
import { Conflict, type DomainError, GatewayUnavailable, NotFound, ValidationFailed } from "../platform/errors.js"
import { iso } from "../platform/time.js"
import {
  type NumberAccount,
  platformNumberAccount,
  type TelcoAccountResolver,
  tenantNumberAccount,
} from "../providers/accounts.js"
import { ProviderCallError } from "../providers/http.util.js"
import { NumberInventoryError } from "../providers/telephony/numbers.interface.js"
import { makeSimNumbers } from "../providers/telephony/sim.numbers.js"
import type { TelcoAOptions } from "../providers/telephony/telco-a.numbers.js"
import { findTenant, type TenantRow } from "../workspaces/workspaces.repo.js"
import type { NumberRow } from "./numbers.repo.js"
import * as repo from "./numbers.repo.js"

// --- which account ---------------------------------------------------------------------------

export interface NumberAccountsService {
  /**
   * Where byok workspaces' accounts come from. Absent (no credential store wired): byok
   * workspaces buy from the platform's account, or the simulator, like bundled ones. Present:
   * byok workspaces use only what it returns, and undefined refuses with 409 CREDENTIAL_MISSING.
   */
  readonly byokTelcoA?: TelcoAccountResolver
  /** Timeouts (and a fetch) for the telco_a client. */
  readonly telcoA?: TelcoAOptions
}

export type { NumberAccount, TelcoAccountResolver } from "../providers/accounts.js"

/** The seam through which the credential store reaches numbers; defaults to no resolver. */
export class NumberAccounts extends Context.Reference<NumberAccounts>()("parley/NumberAccounts", {
  defaultValue: (): NumberAccountsService => ({}),
}) {}

/**
 * The account a workspace buys numbers on: bundled → the platform's (src/providers/accounts.ts);
 * byok → the workspace's own telco_a account from the injected resolver (see NumberAccounts).
 */
export const accountFor = (
  tenant: Pick<TenantRow, "id" | "onboarding_mode">,
): Effect.Effect<NumberAccount, Conflict, AppConfig> =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const seam = yield* NumberAccounts
    if (tenant.onboarding_mode !== "byok" || seam.byokTelcoA === undefined)
      return platformNumberAccount(config, seam.telcoA)
    const resolve = seam.byokTelcoA
    const own = yield* Effect.promise(() => resolve(tenant.id))
    if (own === undefined)
      return yield* Effect.fail(
        new Conflict({
          code: "CREDENTIAL_MISSING",
          message:
            "byok mode buys numbers on your own telco_a account: save a valid telco_a credential under " +
            "/onboarding/credentials/telco_a first",
        }),
      )
    return tenantNumberAccount(own, config, seam.telcoA)
  })

/** The inventory that holds a stored number, or undefined when that account is no longer reachable. */
export const inventoryOfRow = (row: NumberRow) =>
  Effect.gen(function* () {
    if (row.provider === "sim") return makeSimNumbers()
    const config = yield* AppConfig
    const seam = yield* NumberAccounts
    if (row.account === "platform")
      return config.telcoA?.accountSid === row.account_ref
        ? platformNumberAccount(config, seam.telcoA).inventory
        : undefined
    const resolve = seam.byokTelcoA
    if (resolve === undefined) return undefined
    const own = yield* Effect.promise(() => resolve(row.tenant_id))
    return own?.sid === row.account_ref ? tenantNumberAccount(own, config, seam.telcoA).inventory : undefined
  })

// --- views and helpers -----------------------------------------------------------------------

export const numberView = (r: NumberRow) => ({
  id: r.id,
  phone_e164: r.phone_e164,
  country: r.country,
  source: r.source,
  provider: r.provider,
  provider_number_id: r.provider_number_id,
  /** platform: bought on Parley's account (rented monthly); tenant: on the workspace's own account. */
  account: r.account,
  status: r.status,
  monthly_cost_minor: r.monthly_cost_minor,
  currency: r.currency,
  workflow_id: r.workflow_id,
  capabilities: r.capabilities,
  voice_url: r.voice_url,
  status_url: r.status_url,
  current_period_end: iso(r.current_period_end),
  next_charge_at: r.status === "active" && r.monthly_cost_minor > 0 ? iso(r.rent_due_at) : null,
  created_at: r.created_at.toISOString(),
  activated_at: iso(r.activated_at),
  released_at: iso(r.released_at),
})

export type NumberView = ReturnType<typeof numberView>

/** Where telco_a sends a number's inbound calls and call-status callbacks for this workspace. */
export const webhooksFor = (baseUrl: string, tenantId: number) => ({
  voiceUrl: `${baseUrl}/voice/telco_a/incoming?tenant_id=${tenantId}`,
  statusUrl: `${baseUrl}/api/telco_a/status?tenant_id=${tenantId}`,
})

export const loadTenant = (sql: Sql, tenantId: number) =>
  Effect.flatMap(
    Effect.promise(() => findTenant(sql, tenantId)),
    (t) => (t ? Effect.succeed(t) : Effect.fail(new NotFound({ message: "workspace not found" }))),
  )

export const checkWorkflow = (sql: Sql, tenantId: number, workflowId: number | undefined) =>
  workflowId === undefined
    ? Effect.void
    : Effect.flatMap(
        Effect.promise(() => repo.workflowInTenant(sql, tenantId, workflowId)),
        (ok) => (ok ? Effect.void : Effect.fail(new NotFound({ message: `workflow ${workflowId} not found` }))),
      )

export const phoneOf = (raw: string, country: string) =>
  Effect.suspend(() => {
    const r = toE164(raw, country as TenantCountry)
    return r.ok
      ? Effect.succeed(r.e164)
      : Effect.fail(
          new ValidationFailed({
            message: `phone_number: not a valid phone number (${r.reason})`,
            errors: [{ field: "phone_number", message: `must be a valid phone number (${r.reason})` }],
          }),
        )
  })

export const countryOf = (phone: string, fallback: string) => parsePhoneNumberFromString(phone)?.country ?? fallback

/**
 * What Parley charges a month for a number on this account: the rental on the platform's, nothing on the workspace's
 * own.
 */
export const monthlyPrice = (account: NumberAccount, tenant: TenantRow) =>
  account.owner === "platform" ? NUMBER_MONTHLY_MINOR[tenant.currency] : 0

/** A provider failure as the caller's answer; anything that is not a provider error is a defect. */
export function providerFailure(
  e: unknown,
  account: Pick<NumberAccount, "owner">,
  provider: string,
  phone: string,
): Effect.Effect<never, DomainError> {
  if (!(e instanceof ProviderCallError)) return Effect.die(e)
  const reason = e instanceof NumberInventoryError ? e.reason : "failed"
  switch (reason) {
    case "not_available":
      return Effect.fail(
        new Conflict({ code: "NUMBER_UNAVAILABLE", message: `${phone} is not available from ${provider}` }),
      )
    case "not_owned":
      return Effect.fail(
        new Conflict({ code: "NUMBER_NOT_OWNED", message: `your ${provider} account does not own ${phone}` }),
      )
    case "unauthorised":
      return Effect.fail(
        account.owner === "tenant"
          ? new Conflict({
              code: "CREDENTIAL_REJECTED",
              message:
                `${provider} refused your stored credential: ` +
                `save it again under /onboarding/credentials/${provider}`,
            })
          : new GatewayUnavailable({ message: `${provider} refused the platform's account` }),
      )
    case "failed":
      return Effect.fail(new GatewayUnavailable({ message: `${provider} did not complete the request: ${e.message}` }))
  }
}
