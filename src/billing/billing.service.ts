// The wallet's rules: its view, history and precheck; top-ups that credit only when a gateway
// confirms settlement, exactly once per intent however often the news arrives; autocharge; and
// the usage API that reserves a call's cost before dialing and settles it at hangup.
import { randomUUID } from "node:crypto"
import { Effect } from "effect"
import { findTenant, type TenantRow } from "../auth/auth.repo.js"
import { GatewayUnavailable, InsufficientFunds, NotFound } from "../errors.js"
import { Payments } from "../providers/Payments.js"
import type { GatewayName } from "../providers/payments/payments.interface.js"
import { Clock } from "../services/Clock.js"
import { Db, type Sql, type Tx } from "../services/Db.js"
import { Log } from "../services/Log.js"
import { AppConfig } from "../services/AppConfig.js"
import { callTerms } from "./call-terms.js"
import { postEntry, type LedgerEntry } from "./ledger.js"
import { authoriseSubscription } from "./subscription.service.js"
import { RATE_PER_MINUTE_MINOR, TOPUP_PRESETS_MINOR, type Currency } from "./pricing.js"

export const DEFAULT_PRECHECK_SECONDS = 180

/** Cost of `seconds` of a connected call at the bundled rate, billed per second, rounded up. */
export const callCostMinor = (seconds: number, currency: Currency): number => Math.ceil((seconds * RATE_PER_MINUTE_MINOR[currency]) / 60)

interface WalletRow {
  readonly tenant_id: number
  readonly currency: Currency
  readonly balance_minor: number
  readonly autocharge_enabled: boolean
  readonly autocharge_threshold_minor: number | null
  readonly autocharge_amount_minor: number | null
}

const loadTenant = (sql: Sql, tenantId: number) =>
  Effect.flatMap(
    Effect.promise(() => findTenant(sql, tenantId)),
    (t) => (t ? Effect.succeed(t) : Effect.fail(new NotFound({ message: "workspace not found" }))),
  )

const loadWallet = (sql: Sql, tenantId: number) =>
  Effect.promise(async () => {
    const [w] = await sql<[WalletRow]>`
      select tenant_id, currency, balance_minor, autocharge_enabled, autocharge_threshold_minor, autocharge_amount_minor
      from wallets where tenant_id = ${tenantId}`
    return w
  })

const walletView = (t: TenantRow, w: WalletRow) => {
  const rate = RATE_PER_MINUTE_MINOR[w.currency]
  return {
    tenant_id: t.id,
    currency: w.currency,
    balance_minor: w.balance_minor,
    plan_tier: t.plan_tier,
    trial_expires_at: t.trial_expires_at?.toISOString() ?? null,
    minutes_remaining_at_bundled_rate: Math.floor(w.balance_minor / rate),
    rate_per_minute_minor: rate,
    autocharge: { enabled: w.autocharge_enabled, threshold_minor: w.autocharge_threshold_minor, amount_minor: w.autocharge_amount_minor },
    topup_presets_minor: TOPUP_PRESETS_MINOR[w.currency],
  }
}

export const balance = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const tenant = yield* loadTenant(sql, tenantId)
    return walletView(tenant, yield* loadWallet(sql, tenantId))
  })

export const history = (tenantId: number, limit: number, beforeId: number | undefined) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const rows = yield* Effect.promise(
      () => sql<LedgerEntry[]>`
        select id, tenant_id, currency, amount_minor, kind, reference, balance_after_minor, idempotency_key, created_at
        from ledger_entries
        where tenant_id = ${tenantId} ${beforeId === undefined ? sql`` : sql`and id < ${beforeId}`}
        order by id desc limit ${limit}`,
    )
    const entries = rows.map((e) => ({ ...e, created_at: e.created_at.toISOString() }))
    return { entries, next_before: entries.length === limit ? entries[entries.length - 1]!.id : null }
  })

export type PrecheckStatus = "ok" | "insufficient_funds" | "trial_expired" | "account_suspended"

export const precheck = (tenantId: number, expectedSeconds: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const config = yield* AppConfig
    const tenant = yield* loadTenant(sql, tenantId)
    const wallet = yield* loadWallet(sql, tenantId)
    const terms = yield* Effect.promise(() => callTerms(sql, tenantId, clock.now(), config.telcoA !== undefined))
    const required = terms.billing === "byok" ? 0 : callCostMinor(expectedSeconds, wallet.currency)
    let status: PrecheckStatus = "ok"
    if (tenant.status !== "active") status = "account_suspended"
    else if (tenant.plan_tier === "free" && tenant.trial_expires_at !== null && tenant.trial_expires_at <= clock.now()) {
      // The trial's end only stops a workspace that never paid: top-ups are theirs to spend.
      const [paid] = yield* Effect.promise(() => sql`select 1 from payment_intents where tenant_id = ${tenantId} and status = 'succeeded' limit 1`)
      if (!paid) status = "trial_expired"
    }
    if (status === "ok" && wallet.balance_minor < required) status = "insufficient_funds"
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

const intentView = (i: { id: number; amount_minor: number; currency: Currency; status: string; external_id: string; checkout_url: string | null; gateway: GatewayName }) => ({
  intent_id: i.id,
  amount_minor: i.amount_minor,
  currency: i.currency,
  status: i.status,
  external_id: i.external_id,
  checkout_url: i.checkout_url,
  gateway: i.gateway,
})

/** Opens a pending intent with the gateway for the workspace's currency; nothing is credited yet. */
export const topup = (tenantId: number, amountMinor: number, opts: { returnUrl: string | undefined; baseUrl: string }) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const payments = yield* Payments
    const wallet = yield* loadWallet(sql, tenantId)
    const gateway = payments.forCurrency(wallet.currency)
    // The stub settles on an unsigned webhook: it stands in only where no gateway is configured.
    if (gateway.name === "stub" && (payments.live.gw_card || payments.live.gw_upi))
      return yield* Effect.fail(new GatewayUnavailable({ message: `no payment gateway is configured for ${wallet.currency} top-ups` }))
    const returnUrl = opts.returnUrl ?? `${opts.baseUrl}/billing/return`
    const [intent] = yield* Effect.promise(
      () => sql<[{ id: number }]>`
        insert into payment_intents (tenant_id, gateway, external_id, amount_minor, currency, purpose, return_url)
        values (${tenantId}, ${gateway.name}, ${`unassigned:${randomUUID()}`}, ${amountMinor}, ${wallet.currency}, 'topup', ${returnUrl})
        returning id`,
    )
    const session = yield* Effect.tryPromise({
      try: () => gateway.createCheckout({ intentId: intent.id, tenantId, amountMinor, currency: wallet.currency, returnUrl, baseUrl: opts.baseUrl }),
      catch: (e) => new GatewayUnavailable({ message: `the ${gateway.name} gateway did not create the checkout: ${(e as Error).message}` }),
    }).pipe(Effect.tapError(() => Effect.promise(() => sql`update payment_intents set status = 'failed', settled_at = now() where id = ${intent.id}`)))
    const [row] = yield* Effect.promise(
      () => sql<[Parameters<typeof intentView>[0]]>`
        update payment_intents set external_id = ${session.externalId}, checkout_url = ${session.checkoutUrl}
        where id = ${intent.id}
        returning id, amount_minor, currency, status, external_id, checkout_url, gateway`,
    )
    return intentView(row)
  })

export type SettleOutcome = "credited" | "failed" | "duplicate" | "unknown_intent" | "already_settled" | "amount_mismatch" | "ignored" | "subscription_activated"

export interface GatewayEvent {
  readonly source: "gw_card" | "gw_upi" | "stub" | "payment"
  readonly eventId: string
  readonly type: string
  /** The intent's gateway and external id; undefined when the event is about no intent of ours. */
  readonly intent: { readonly gateway: GatewayName | "any"; readonly externalId: string } | undefined
  readonly outcome: "succeeded" | "failed" | "ignore"
  /** Amount the gateway says it captured, checked against the intent when present. */
  readonly amountMinor: number | undefined
  readonly payload: unknown
}

/**
 * Records a gateway event once (by source and event id) and applies it: a success credits the
 * intent's amount once, in the same transaction that marks it succeeded.
 */
export const applyGatewayEvent = (ev: GatewayEvent) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const log = yield* Log
    const result = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          const [recorded] = await tx<[{ id: number }?]>`
            insert into payment_events (source, event_id, type, payload)
            values (${ev.source}, ${ev.eventId}, ${ev.type}, ${tx.json(ev.payload as never)})
            on conflict (source, event_id) do nothing
            returning id`
          if (!recorded) return { outcome: "duplicate" as SettleOutcome, tenantId: undefined }
          const outcome = await settle(tx, ev)
          await tx`update payment_events set outcome = ${outcome.outcome}, intent_id = ${outcome.intentId ?? null} where id = ${recorded.id}`
          return outcome
        }) as Promise<{ outcome: SettleOutcome; intentId?: number; tenantId: number | undefined }>,
    )
    log.info({ source: ev.source, event_id: ev.eventId, type: ev.type, outcome: result.outcome }, "payment event")
    return result
  })

async function settle(tx: Tx, ev: GatewayEvent): Promise<{ outcome: SettleOutcome; intentId?: number; tenantId: number | undefined }> {
  if (ev.outcome === "ignore" || ev.intent === undefined) return { outcome: "ignored", tenantId: undefined }
  const [intent] = await tx<[{ id: number; tenant_id: number; amount_minor: number; status: string; purpose: string }?]>`
    select id, tenant_id, amount_minor, status, purpose from payment_intents
    where external_id = ${ev.intent.externalId} ${ev.intent.gateway === "any" ? tx`` : tx`and gateway = ${ev.intent.gateway}`}
    for update`
  if (!intent) {
    // Not a payment of ours: perhaps the authorisation of a subscription's mandate.
    if (ev.source !== "stub" || ev.outcome !== "succeeded") return { outcome: "unknown_intent", tenantId: undefined }
    const authorised = await authoriseSubscription(tx, ev.intent.externalId, new Date())
    return { outcome: authorised === "activated" ? "subscription_activated" : authorised === "unknown" ? "unknown_intent" : "already_settled", tenantId: undefined }
  }
  const base = { intentId: intent.id, tenantId: intent.tenant_id }
  if (intent.status !== "pending") return { outcome: "already_settled", ...base }
  if (ev.outcome === "failed") {
    await tx`update payment_intents set status = 'failed', settled_at = now() where id = ${intent.id}`
    return { outcome: "failed", ...base }
  }
  if (ev.amountMinor !== undefined && ev.amountMinor !== intent.amount_minor) return { outcome: "amount_mismatch", ...base }
  await tx`update payment_intents set status = 'succeeded', settled_at = now() where id = ${intent.id}`
  await postEntry(tx, { tenantId: intent.tenant_id, amountMinor: intent.amount_minor, kind: intent.purpose, reference: `intent:${intent.id}`, idempotencyKey: `intent:${intent.id}` })
  return { outcome: "credited", ...base }
}

export const setAutocharge = (tenantId: number, s: { enabled: boolean; thresholdMinor: number | null; amountMinor: number | null }) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    yield* Effect.promise(
      () => sql`
        update wallets set autocharge_enabled = ${s.enabled}, autocharge_threshold_minor = ${s.thresholdMinor}, autocharge_amount_minor = ${s.amountMinor}
        where tenant_id = ${tenantId}`,
    )
    const w = yield* loadWallet(sql, tenantId)
    return { enabled: w.autocharge_enabled, threshold_minor: w.autocharge_threshold_minor, amount_minor: w.autocharge_amount_minor }
  })

/**
 * After a debit: if the balance fell under the autocharge threshold, charge the saved payment
 * method once. The decision and the credit happen in one transaction holding the wallet's row
 * lock, so concurrent debits see each other's autocharge and never start a second one.
 *
 * Off-session charges of a saved card or UPI mandate are simulated by the stub gateway, which
 * settles at once; the real gateways' adapters only create customer checkouts so far.
 */
export const maybeAutocharge = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const log = yield* Log
    const intentId = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          const [w] = await tx<[WalletRow]>`
            select tenant_id, currency, balance_minor, autocharge_enabled, autocharge_threshold_minor, autocharge_amount_minor
            from wallets where tenant_id = ${tenantId} for update`
          if (!w.autocharge_enabled || w.autocharge_threshold_minor === null || w.autocharge_amount_minor === null) return undefined
          if (w.balance_minor >= w.autocharge_threshold_minor) return undefined
          const [intent] = await tx<[{ id: number }]>`
            insert into payment_intents (tenant_id, gateway, external_id, amount_minor, currency, purpose, status, settled_at)
            values (${tenantId}, 'stub', ${`stub_autocharge_${randomUUID()}`}, ${w.autocharge_amount_minor}, ${w.currency}, 'autocharge', 'succeeded', now())
            returning id`
          await postEntry(tx, { tenantId, amountMinor: w.autocharge_amount_minor, kind: "autocharge", reference: `intent:${intent.id}`, idempotencyKey: `intent:${intent.id}` })
          return intent.id
        }) as Promise<number | undefined>,
    )
    if (intentId !== undefined) log.info({ tenant_id: tenantId, intent_id: intentId }, "autocharge")
    return intentId
  })

// --- usage API for the call runtime -------------------------------------------------------

export interface Reservation {
  readonly call_ref: string
  readonly reserved_minor: number
  readonly status: "reserved" | "settled" | "released"
  readonly settled_minor: number | null
}

/**
 * Holds the cost of `expectedSeconds` before a call is dialed (idempotent on `callRef`). Fails
 * with InsufficientFunds rather than overdraw. Nothing is held only when the workspace's terms are
 * byok now (see call-terms.ts) AND the call really goes out on its own accounts (`onOwnAccounts`:
 * a run resolves its accounts once, so a workspace that became byok-ready mid-run still pays for
 * the calls that run places on the platform's accounts).
 */
export const reserveCall = (tenantId: number, callRef: string, expectedSeconds: number, opts: { onOwnAccounts: boolean } = { onOwnAccounts: false }) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const config = yield* AppConfig
    const clock = yield* Clock
    const tenant = yield* loadTenant(sql, tenantId)
    const terms = yield* Effect.promise(() => callTerms(sql, tenantId, clock.now(), config.telcoA !== undefined))
    if (terms.billing === "byok" && opts.onOwnAccounts) return { call_ref: callRef, reserved_minor: 0, status: "reserved", settled_minor: null } satisfies Reservation
    const cost = callCostMinor(expectedSeconds, tenant.currency)
    const r = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          const [existing] = await tx<[Reservation?]>`select call_ref, reserved_minor, status, settled_minor from usage_reservations where call_ref = ${callRef}`
          if (existing) return existing
          const posted = await postEntry(tx, { tenantId, amountMinor: -cost, kind: "call_reservation", reference: callRef, idempotencyKey: `reserve:${callRef}` })
          if (!posted.ok) return posted
          const [row] = await tx<[Reservation]>`
            insert into usage_reservations (tenant_id, call_ref, reserved_minor) values (${tenantId}, ${callRef}, ${cost})
            returning call_ref, reserved_minor, status, settled_minor`
          return row
        }) as Promise<Reservation | { ok: false; balanceMinor: number }>,
    )
    if ("ok" in r) return yield* Effect.fail(new InsufficientFunds({ message: "the wallet cannot pay for this call", balanceMinor: r.balanceMinor, requiredMinor: cost }))
    yield* maybeAutocharge(tenantId)
    return r
  })

/**
 * Settles a reserved call at hangup: the connected seconds are charged (never more than was held;
 * the runtime ends a call when its reservation is used up) and the rest is released. Idempotent.
 */
export const settleCall = (callRef: string, connectedSeconds: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    return yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          const [r] = await tx<[{ tenant_id: number; reserved_minor: number; status: Reservation["status"]; settled_minor: number | null }?]>`
            select tenant_id, reserved_minor, status, settled_minor from usage_reservations where call_ref = ${callRef} for update`
          if (!r) return undefined
          if (r.status !== "reserved") return { call_ref: callRef, reserved_minor: r.reserved_minor, status: r.status, settled_minor: r.settled_minor }
          const [t] = await tx<[{ currency: Currency }]>`select currency from tenants where id = ${r.tenant_id}`
          const charged = Math.min(r.reserved_minor, callCostMinor(connectedSeconds, t.currency))
          const unused = r.reserved_minor - charged
          if (unused > 0) await postEntry(tx, { tenantId: r.tenant_id, amountMinor: unused, kind: "call_release", reference: callRef, idempotencyKey: `release:${callRef}` })
          const status = connectedSeconds > 0 ? "settled" : "released"
          await tx`update usage_reservations set status = ${status}, settled_minor = ${charged}, settled_at = now() where call_ref = ${callRef}`
          return { call_ref: callRef, reserved_minor: r.reserved_minor, status, settled_minor: charged } satisfies Reservation
        }) as Promise<Reservation | undefined>,
    )
  })

/** Gives back a reservation whose call never connected. */
export const releaseCall = (callRef: string) => settleCall(callRef, 0)
