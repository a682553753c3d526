// A workspace's phone numbers: search the inventory of the account it buys from, provision (buy
// with our webhooks wired, first month charged), import an owned number (byok), list, release
// (unwired at the provider, rental stopped), and the monthly rental renewal.

import { Effect } from "effect"
import { requireVerifiedOwner } from "../auth/verified-owner.js"
import { postEntry } from "../billing/ledger.repo.js"
import { addMonth } from "../billing/subscription.service.js"
import { balanceOf } from "../billing/wallet.repo.js"
import { Clock } from "../platform/Clock.js"
import { Db, type Sql } from "../platform/Db.js"
import { Conflict, InsufficientFunds, NotFound } from "../platform/errors.js"
import { Log } from "../platform/Log.js"
import { type ListPage, pageOf } from "../platform/page.cursor.js"
import type { NumberAccount } from "../providers/accounts.js"
import type { AvailableNumber } from "../providers/telephony/numbers.interface.js"
import {
  accountFor,
  checkWorkflow,
  countryOf,
  inventoryOfRow,
  loadTenant,
  monthlyPrice,
  numberView,
  phoneOf,
  providerFailure,
  webhooksFor,
} from "./numbers.parts.js"
import type { NumberRow } from "./numbers.repo.js"
import * as repo from "./numbers.repo.js"

// Re-exported so callers keep importing the service's public surface from here.
export type { NumberAccount, TelcoAccountResolver } from "../providers/accounts.js"
export {
  accountFor,
  NumberAccounts,
  type NumberAccountsService,
  type NumberView,
  numberView,
  webhooksFor,
} from "./numbers.parts.js"

export const SEARCH_LIMIT_MAX = 50
/** How many offers provisioning without a number looks through for one nobody holds. */
const AUTO_PICK_OFFERS = 20
/** A rental the wallet could not pay is tried again this much later. */

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
 * month from the wallet when it is the platform's account (which needs the owner's verified email).
 * The number is claimed first (one holder across workspaces); a claim the provider does not honour
 * is dropped again.
 */
export const provisionNumber = (tenantId: number, req: ProvisionRequest, baseUrl: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const log = yield* Log
    const tenant = yield* loadTenant(sql, tenantId)
    yield* checkWorkflow(sql, tenantId, req.workflowId)
    const account = yield* accountFor(tenant)
    // Parley's carrier account, charged to the wallet: only for a verified owner (the simulator too).
    if (account.owner === "platform") yield* requireVerifiedOwner(tenantId, "renting a number")
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
            "importing a number needs byok mode (PUT /onboarding/mode) and your own telco_a credential; bundled " +
            "workspaces provision numbers instead",
        }),
      )
    yield* checkWorkflow(sql, tenantId, req.workflowId)
    const phone = yield* phoneOf(req.phoneNumber, tenant.country)
    const account = yield* accountFor(tenant)
    // Without a byok credential store the number is wired on Parley's carrier account: as provisioning.
    if (account.owner === "platform") yield* requireVerifiedOwner(tenantId, "wiring a number on Parley's account")
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
