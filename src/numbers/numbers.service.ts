// A workspace's phone numbers: search the inventory of the account it buys from, provision (buy
// with our webhooks wired, first month charged), import an owned number (byok), list, release
// (unwired at the provider, rental stopped), and the monthly rental renewal.

import { Context, Effect } from "effect"
import { parsePhoneNumberFromString } from "libphonenumber-js/max"
import { findTenant, type TenantRow } from "../auth/auth.repo.js"
import { postEntry } from "../billing/ledger.repo.js"
import { NUMBER_MONTHLY_MINOR } from "../billing/pricing.js"
import { addMonth } from "../billing/subscription.service.js"
import { balanceOf } from "../billing/wallet.repo.js"
import { type TenantCountry, toE164 } from "../phones/phone.js"
import { AppConfig } from "../platform/AppConfig.js"
import { Clock } from "../platform/Clock.js"
import { Db, type Sql } from "../platform/Db.js"
import {
  Conflict,
  type DomainError,
  GatewayUnavailable,
  InsufficientFunds,
  NotFound,
  ValidationFailed,
} from "../platform/errors.js"
import { Log } from "../platform/Log.js"
import { type ListPage, pageOf } from "../platform/page.cursor.js"
import { iso } from "../platform/time.js"
import {
  type NumberAccount,
  platformNumberAccount,
  type TelcoAccountResolver,
  tenantNumberAccount,
} from "../providers/accounts.js"
import { ProviderCallError } from "../providers/http.util.js"
import { type AvailableNumber, NumberInventoryError } from "../providers/telephony/numbers.interface.js"
import { makeSimNumbers } from "../providers/telephony/sim.numbers.js"
import type { TelcoAOptions } from "../providers/telephony/telco-a.numbers.js"
import type { NumberRow } from "./numbers.repo.js"
import * as repo from "./numbers.repo.js"

export const SEARCH_LIMIT_MAX = 50
/** How many offers provisioning without a number looks through for one nobody holds. */
const AUTO_PICK_OFFERS = 20
/** A rental the wallet could not pay is tried again this much later. */

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
            "byok mode buys numbers on your own telco_a account: save a valid telco_a credential under /onboarding/credentials/telco_a first",
        }),
      )
    return tenantNumberAccount(own, config, seam.telcoA)
  })

/** The inventory that holds a stored number, or undefined when that account is no longer reachable. */
const inventoryOfRow = (row: NumberRow) =>
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

const loadTenant = (sql: Sql, tenantId: number) =>
  Effect.flatMap(
    Effect.promise(() => findTenant(sql, tenantId)),
    (t) => (t ? Effect.succeed(t) : Effect.fail(new NotFound({ message: "workspace not found" }))),
  )

const checkWorkflow = (sql: Sql, tenantId: number, workflowId: number | undefined) =>
  workflowId === undefined
    ? Effect.void
    : Effect.flatMap(
        Effect.promise(() => repo.workflowInTenant(sql, tenantId, workflowId)),
        (ok) => (ok ? Effect.void : Effect.fail(new NotFound({ message: `workflow ${workflowId} not found` }))),
      )

const phoneOf = (raw: string, country: string) =>
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

const countryOf = (phone: string, fallback: string) => parsePhoneNumberFromString(phone)?.country ?? fallback

/** What Parley charges a month for a number on this account: the rental on the platform's, nothing on the workspace's own. */
const monthlyPrice = (account: NumberAccount, tenant: TenantRow) =>
  account.owner === "platform" ? NUMBER_MONTHLY_MINOR[tenant.currency] : 0

/** A provider failure as the caller's answer; anything that is not a provider error is a defect. */
function providerFailure(
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
              message: `${provider} refused your stored credential: save it again under /onboarding/credentials/${provider}`,
            })
          : new GatewayUnavailable({ message: `${provider} refused the platform's account` }),
      )
    case "failed":
      return Effect.fail(new GatewayUnavailable({ message: `${provider} did not complete the request: ${e.message}` }))
  }
}

/** Offers from the account's inventory that no workspace holds, up to `limit`. */
const freeOffers = (
  sql: Sql,
  account: NumberAccount,
  q: { country: string; areaCode: string | undefined; limit: number },
) =>
  Effect.gen(function* () {
    const inventory = account.inventory
    const ask = (limit: number) =>
      Effect.tryPromise({
        try: () =>
          inventory.search({ country: q.country, ...(q.areaCode !== undefined && { areaCode: q.areaCode }), limit }),
        catch: (e) => e,
      }).pipe(Effect.catchAll((e) => providerFailure(e, account, inventory.provider, `numbers in ${q.country}`)))
    const free = async (offers: AvailableNumber[]) => {
      const taken = await repo.held(
        sql,
        offers.map((o) => o.phone_e164),
      )
      return offers.filter((o) => !taken.has(o.phone_e164))
    }
    let offers = yield* ask(q.limit)
    let available = yield* Effect.promise(() => free(offers))
    // Numbers we hold still show in the provider's stock (the simulator's always): ask once more
    // for enough to fill the page.
    if (available.length < q.limit && offers.length === q.limit && q.limit < SEARCH_LIMIT_MAX) {
      offers = yield* ask(Math.min(SEARCH_LIMIT_MAX, q.limit + (offers.length - available.length)))
      available = yield* Effect.promise(() => free(offers))
    }
    return available.slice(0, q.limit)
  })

// --- search, provision, import ----------------------------------------------------------------

export const searchNumbers = (tenantId: number, q: { country: string; areaCode: string | undefined; limit: number }) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const tenant = yield* loadTenant(sql, tenantId)
    const account = yield* accountFor(tenant)
    const price = monthlyPrice(account, tenant)
    const offers = yield* freeOffers(sql, account, { ...q, country: q.country.toUpperCase() })
    return {
      provider: account.inventory.provider,
      currency: tenant.currency,
      numbers: offers.map((o) => ({ ...o, monthly_cost_minor: price })),
    }
  })

export interface ProvisionRequest {
  readonly phoneNumber: string | undefined
  readonly country: string | undefined
  readonly areaCode: string | undefined
  readonly workflowId: number | undefined
}

/**
 * Buys a number on the workspace's account with its webhooks wired, and charges the first
 * month from the wallet when it is the platform's account. The number is claimed first (one
 * holder across workspaces); a claim the provider does not honour is dropped again.
 */
export const provisionNumber = (tenantId: number, req: ProvisionRequest, baseUrl: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const log = yield* Log
    const tenant = yield* loadTenant(sql, tenantId)
    yield* checkWorkflow(sql, tenantId, req.workflowId)
    const account = yield* accountFor(tenant)
    const provider = account.inventory.provider
    const price = monthlyPrice(account, tenant)
    if (price > 0) {
      const balance = yield* Effect.promise(() => balanceOf(sql, tenantId))
      if (balance < price)
        return yield* Effect.fail(
          new InsufficientFunds({
            message: "the wallet cannot pay the number's first month",
            balanceMinor: balance,
            requiredMinor: price,
          }),
        )
    }
    const webhooks = webhooksFor(baseUrl, tenantId)

    // The number to buy: the one asked for, or the first offer nobody holds.
    let candidates: Array<{ phone: string; capabilities: { voice: boolean; sms: boolean } }>
    if (req.phoneNumber !== undefined) {
      candidates = [
        { phone: yield* phoneOf(req.phoneNumber, tenant.country), capabilities: { voice: true, sms: false } },
      ]
    } else {
      const offers = yield* freeOffers(sql, account, {
        country: (req.country ?? tenant.country).toUpperCase(),
        areaCode: req.areaCode,
        limit: AUTO_PICK_OFFERS,
      })
      if (offers.length === 0)
        return yield* Effect.fail(
          new Conflict({
            code: "NO_NUMBERS_AVAILABLE",
            message: "no number is available for that country and area code",
          }),
        )
      candidates = offers.map((o) => ({ phone: o.phone_e164, capabilities: o.capabilities }))
    }
    let claimed: { id: number; phone: string } | undefined
    for (const c of candidates) {
      const id = yield* Effect.promise(() =>
        repo.claim(sql, {
          tenantId,
          phone: c.phone,
          country: countryOf(c.phone, tenant.country),
          source: "provisioned",
          provider,
          account: account.owner,
          accountRef: account.ref,
          monthlyCostMinor: price,
          currency: tenant.currency,
          workflowId: req.workflowId ?? null,
          capabilities: c.capabilities,
          ...webhooks,
        }),
      )
      if (id !== undefined) {
        claimed = { id, phone: c.phone }
        break
      }
    }
    if (claimed === undefined)
      return yield* Effect.fail(
        new Conflict({
          code: "NUMBER_UNAVAILABLE",
          message:
            req.phoneNumber !== undefined
              ? `${candidates[0]!.phone} is already in use`
              : "every offered number was taken meanwhile; try again",
        }),
      )
    const { id, phone } = claimed

    const bought = yield* Effect.tryPromise({
      try: () => account.inventory.provision({ phoneE164: phone, ...webhooks }),
      catch: (e) => e,
    }).pipe(
      Effect.catchAll((e) =>
        Effect.zipRight(
          Effect.promise(() => repo.dropClaim(sql, id)),
          providerFailure(e, account, provider, phone),
        ),
      ),
    )

    const now = clock.now()
    const periodEnd = price > 0 ? addMonth(now) : null
    const done = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          if (price > 0) {
            const posted = await postEntry(tx, {
              tenantId,
              amountMinor: -price,
              kind: "number_rental",
              reference: `number:${id}`,
              idempotencyKey: `number:${id}:${now.toISOString()}`,
            })
            if (!posted.ok) return { ok: false as const, balanceMinor: posted.balanceMinor }
          }
          return {
            ok: true as const,
            row: await repo.activate(tx, id, { providerNumberId: bought.providerNumberId, now, periodEnd }),
          }
        }) as Promise<{ ok: true; row: NumberRow } | { ok: false; balanceMinor: number }>,
    )
    if (!done.ok) {
      // The wallet was spent meanwhile: give the number back rather than hold it unpaid.
      yield* Effect.tryPromise(() => account.inventory.release(bought.providerNumberId)).pipe(
        Effect.catchAll((e) =>
          Effect.sync(() =>
            log.error({ number_id: id, provider, err: String(e) }, "number bought but unpaid; releasing it failed"),
          ),
        ),
      )
      yield* Effect.promise(() => repo.dropClaim(sql, id))
      return yield* Effect.fail(
        new InsufficientFunds({
          message: "the wallet cannot pay the number's first month",
          balanceMinor: done.balanceMinor,
          requiredMinor: price,
        }),
      )
    }
    log.info({ tenant_id: tenantId, number_id: id, provider, account: account.owner }, "number provisioned")
    return { number: numberView(done.row), charged_minor: price }
  })

/**
 * Registers a number the byok workspace already owns on its provider account, with our webhooks
 * set there. The stored credential is used as it is (no re-validation); nothing is charged.
 */
export const importNumber = (
  tenantId: number,
  req: { phoneNumber: string; workflowId: number | undefined },
  baseUrl: string,
) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const log = yield* Log
    const tenant = yield* loadTenant(sql, tenantId)
    if (tenant.onboarding_mode !== "byok")
      return yield* Effect.fail(
        new Conflict({
          code: "BYOK_REQUIRED",
          message:
            "importing a number needs byok mode (PUT /onboarding/mode) and your own telco_a credential; bundled workspaces provision numbers instead",
        }),
      )
    yield* checkWorkflow(sql, tenantId, req.workflowId)
    const phone = yield* phoneOf(req.phoneNumber, tenant.country)
    const account = yield* accountFor(tenant)
    const provider = account.inventory.provider
    const webhooks = webhooksFor(baseUrl, tenantId)
    const id = yield* Effect.promise(() =>
      repo.claim(sql, {
        tenantId,
        phone,
        country: countryOf(phone, tenant.country),
        source: "imported",
        provider,
        account: account.owner,
        accountRef: account.ref,
        monthlyCostMinor: 0,
        currency: tenant.currency,
        workflowId: req.workflowId ?? null,
        capabilities: { voice: true, sms: false },
        ...webhooks,
      }),
    )
    if (id === undefined)
      return yield* Effect.fail(new Conflict({ code: "NUMBER_UNAVAILABLE", message: `${phone} is already in use` }))
    const owned = yield* Effect.tryPromise({
      try: () => account.inventory.registerOwned({ phoneE164: phone, ...webhooks }),
      catch: (e) => e,
    }).pipe(
      Effect.catchAll((e) =>
        Effect.zipRight(
          Effect.promise(() => repo.dropClaim(sql, id)),
          providerFailure(e, account, provider, phone),
        ),
      ),
    )
    const row = yield* Effect.promise(
      () =>
        sql.begin((tx) =>
          repo.activate(tx, id, { providerNumberId: owned.providerNumberId, now: clock.now(), periodEnd: null }),
        ) as Promise<NumberRow>,
    )
    log.info({ tenant_id: tenantId, number_id: id, provider }, "number imported")
    return { number: numberView(row) }
  })

// --- list, release ------------------------------------------------------------------------------

/** One page of the workspace's numbers and the cursor of the next (null on the last page). */
export const listNumbers = (tenantId: number, status: "active" | "released" | undefined, page: ListPage) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const { rows, next_cursor } = pageOf(
      yield* Effect.promise(() => repo.list(sql, tenantId, status, page)),
      page.limit,
    )
    return { numbers: rows.map(numberView), next_cursor }
  })

/**
 * Releases a number: a bought one is given back to the provider, an imported one only has its
 * webhooks cleared (it stays the owner's); its rental stops (no refund of the month begun).
 * Idempotent: releasing a released number answers it as it is. When the account that holds it is
 * no longer reachable (credential removed, platform account changed) the number is released here
 * and the skipped unwiring is logged.
 */
export const releaseNumber = (tenantId: number, numberId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const log = yield* Log
    const row = yield* Effect.promise(() => repo.find(sql, tenantId, numberId))
    if (row === undefined) return yield* Effect.fail(new NotFound({ message: `number ${numberId} not found` }))
    if (row.status === "released") return { released: true as const, number: numberView(row) }
    const inventory = yield* inventoryOfRow(row)
    if (inventory !== undefined && row.provider_number_id !== null) {
      const sid = row.provider_number_id
      yield* Effect.tryPromise({
        try: () => inventory.release(sid, { keep: row.source === "imported" }),
        catch: (e) => e,
      }).pipe(Effect.catchAll((e) => providerFailure(e, { owner: row.account }, row.provider, row.phone_e164)))
    } else {
      log.warn(
        { tenant_id: tenantId, number_id: numberId, provider: row.provider, account: row.account },
        "number released without unwiring: its provider account is not reachable any more",
      )
    }
    const updated = yield* Effect.promise(() => repo.markReleased(sql, tenantId, numberId, clock.now()))
    // undefined: a concurrent release marked it first.
    const final = updated ?? (yield* Effect.promise(() => repo.find(sql, tenantId, numberId)))!
    if (updated) log.info({ tenant_id: tenantId, number_id: numberId, provider: row.provider }, "number released")
    return { released: true as const, number: numberView(final) }
  })

/** The active number with this E.164 and the workspace (and workflow) it belongs to; for inbound calls. */
export const activeNumber = (phoneE164: string) =>
  Effect.flatMap(Db, ({ sql }) => Effect.promise(() => repo.findActiveByPhone(sql, phoneE164)))
