// A wallet as its owner sees it: the balance and settings, the ledger's history, and the precheck
// that says whether a call may be placed now (and what it would hold); and a new workspace's
// wallet with its trial credit.
import { Effect } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import { Clock } from "../platform/Clock.js"
import { Db, type Sql, type Tx } from "../platform/Db.js"
import { NotFound } from "../platform/errors.js"
import type { Currency } from "../platform/money.js"
import { findTenant, type TenantRow } from "../workspaces/workspaces.repo.js"
import { callTerms } from "./call-terms.js"
import { listEntries, postEntry } from "./ledger.repo.js"
import * as payments from "./payments.repo.js"
import { RATE_PER_MINUTE_MINOR, TRIAL_CREDIT_MINOR } from "./pricing.js"
import { findWallet, openWallet, type WalletRow } from "./wallet.repo.js"
import { walletObject } from "./wallet.view.js"

export const DEFAULT_PRECHECK_SECONDS = 180

/**
 * Cost of `seconds` of a connected call at the bundled rate (or `ratePerMinute`: the bundled rate with
 * hosted speech, pricing.ts), billed per second, rounded up.
 */
export const callCostMinor = (seconds: number, currency: Currency, ratePerMinute = RATE_PER_MINUTE_MINOR[currency]) =>
  Math.ceil((seconds * ratePerMinute) / 60)

/**
 * A new workspace's wallet in its currency, credited with the trial (in signup's transaction; the
 * credit's idempotency key makes it once per workspace).
 */
export async function openTrialWallet(tx: Tx, tenantId: number, currency: Currency): Promise<void> {
  await openWallet(tx, tenantId, currency)
  await postEntry(tx, {
    tenantId,
    amountMinor: TRIAL_CREDIT_MINOR[currency],
    kind: "trial_credit",
    reference: "signup",
    idempotencyKey: `trial_credit:${tenantId}`,
  })
}

export const loadTenant = (sql: Sql, tenantId: number) =>
  Effect.flatMap(
    Effect.promise(() => findTenant(sql, tenantId)),
    (t) => (t ? Effect.succeed(t) : Effect.fail(new NotFound({ message: "workspace not found" }))),
  )

export const loadWallet = (sql: Sql, tenantId: number) => Effect.promise(() => findWallet(sql, tenantId))

/** The wallet object of GET /billing/balance, built as the wallet.* events build theirs. */
const walletView = (t: TenantRow, w: WalletRow) => walletObject(t, w)

export const balance = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const tenant = yield* loadTenant(sql, tenantId)
    return walletView(tenant, yield* loadWallet(sql, tenantId))
  })

export const history = (tenantId: number, limit: number, beforeId: number | undefined) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const rows = yield* Effect.promise(() => listEntries(sql, tenantId, limit, beforeId))
    const entries = rows.map((e) => ({ ...e, created_at: e.created_at.toISOString() }))
    return { entries, next_before: entries.length === limit ? entries[entries.length - 1]!.id : null }
  })

export type PrecheckStatus = "ok" | "insufficient_funds" | "trial_expired" | "account_suspended"

export const precheck = (tenantId: number, expectedSeconds: number) =>
  Effect.map(precheckExact(tenantId, BigInt(expectedSeconds)), (r) => ({
    ...r,
    required_minor: Number(r.required_minor),
    expected_seconds: Number(r.expected_seconds),
  }))

/**
 * The precheck for any whole number of seconds (the spec sets no maximum), in exact integers: a
 * call longer than any wallet can pay is `insufficient_funds`, never an overflow.
 */
export const precheckExact = (tenantId: number, expectedSeconds: bigint) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const config = yield* AppConfig
    const tenant = yield* loadTenant(sql, tenantId)
    const wallet = yield* loadWallet(sql, tenantId)
    const terms = yield* Effect.promise(() => callTerms(sql, tenantId, clock.now(), config.telcoA !== undefined))
    // callCostMinor in exact arithmetic: per second at the bundled rate, rounded up.
    const rate = BigInt(RATE_PER_MINUTE_MINOR[wallet.currency])
    const required = terms.billing === "byok" ? 0n : (expectedSeconds * rate + 59n) / 60n
    let status: PrecheckStatus = "ok"
    if (tenant.status !== "active") status = "account_suspended"
    else if (
      tenant.plan_tier === "free" &&
      tenant.trial_expires_at !== null &&
      tenant.trial_expires_at <= clock.now()
    ) {
      // The trial's end only stops a workspace that never paid: top-ups are theirs to spend.
      const paid = yield* Effect.promise(() => payments.hasPaid(sql, tenantId))
      if (!paid) status = "trial_expired"
    }
    if (status === "ok" && BigInt(wallet.balance_minor) < required) status = "insufficient_funds"
    return {
      status,
      balance_minor: wallet.balance_minor,
      required_minor: required,
      currency: wallet.currency,
      expected_seconds: expectedSeconds,
      billing: terms.billing,
      ...(terms.byokMissing.length > 0 && { byok_missing: terms.byokMissing }),
    }
  })
