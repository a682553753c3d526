// The wallet's rules: its view, history and precheck; top-ups that credit only when a gateway
// confirms settlement, exactly once per intent however often the news arrives; autocharge on a
// saved payment method; and the usage API that reserves a call's cost before dialing and settles
// it at hangup.
import { randomUUID } from "node:crypto"
import { Cause, Effect, Option } from "effect"
import { findTenant, type TenantRow } from "../auth/auth.repo.js"
import { Conflict, GatewayUnavailable, InsufficientFunds, NotFound, ValidationFailed, type FieldError } from "../platform/errors.js"
import { Mail } from "../providers/Mail.js"
import { Payments } from "../providers/Payments.js"
import { PaymentGatewayError, type GatewayName, type PaymentGateway, type SavedChargeResult } from "../providers/payments/payments.interface.js"
import { Clock } from "../platform/Clock.js"
import { Db, type Sql, type Tx } from "../platform/Db.js"
import { Log } from "../platform/Log.js"
import { AppConfig } from "../platform/AppConfig.js"
import { callTerms } from "./call-terms.js"
import { postEntry, type LedgerEntry } from "./ledger.js"
import { authoriseSubscription } from "./subscription.service.js"
import { AUTOCHARGE_MAX_FAILURES, AUTOCHARGE_MAX_MINOR, formatMinor, RATE_PER_MINUTE_MINOR, TOPUP_MINIMUM_MINOR, TOPUP_PRESETS_MINOR, type Currency } from "./pricing.js"

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

/**
 * Opens a pending intent with the gateway for the workspace's currency; nothing is credited yet.
 * `saveMethod` asks the gateway to keep the payer's method for autocharge once this payment succeeds.
 */
export const topup = (tenantId: number, amountMinor: number, opts: { returnUrl: string | undefined; baseUrl: string; saveMethod?: boolean }) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const payments = yield* Payments
    const wallet = yield* loadWallet(sql, tenantId)
    // No gateway for the currency (and no stub deployment): refuse before storing anything.
    const gateway = payments.forCurrency(wallet.currency)
    if (gateway === undefined) return yield* Effect.fail(new GatewayUnavailable({ message: `no payment gateway is configured for ${wallet.currency} top-ups` }))
    const saveMethod = opts.saveMethod === true
    const returnUrl = opts.returnUrl ?? `${opts.baseUrl}/billing/return`
    const [intent] = yield* Effect.promise(
      () => sql<[{ id: number }]>`
        insert into payment_intents (tenant_id, gateway, external_id, amount_minor, currency, purpose, return_url, save_method)
        values (${tenantId}, ${gateway.name}, ${`unassigned:${randomUUID()}`}, ${amountMinor}, ${wallet.currency}, 'topup', ${returnUrl}, ${saveMethod})
        returning id`,
    )
    const session = yield* Effect.tryPromise({
      try: () => gateway.createCheckout({ intentId: intent.id, tenantId, amountMinor, currency: wallet.currency, returnUrl, baseUrl: opts.baseUrl, savePaymentMethod: saveMethod }),
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

/** The pending gw_upi intent our hosted checkout page renders; the order id must match the stored one. */
export const upiCheckoutIntent = (intentId: number, orderId: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const [row] = yield* Effect.promise(
      () => sql<[{ id: number; amount_minor: number; currency: Currency; status: string; external_id: string; save_method: boolean }?]>`
        select id, amount_minor, currency, status, external_id, save_method from payment_intents
        where id = ${intentId} and gateway = 'gw_upi' and external_id = ${orderId}`,
    )
    if (!row) return yield* Effect.fail(new NotFound({ message: "no such checkout" }))
    return row
  })

export type SettleOutcome =
  | "credited"
  | "failed"
  | "duplicate"
  | "unknown_intent"
  | "already_settled"
  | "amount_mismatch"
  | "currency_mismatch"
  | "ignored"
  | "subscription_activated"

export interface SavedMethodInfo {
  readonly customerId: string
  readonly methodId: string
  /** What the owner sees ("visa •••• 4242", a masked VPA). */
  readonly hint: string
}

export interface GatewayEvent {
  readonly source: "gw_card" | "gw_upi" | "stub" | "payment"
  readonly eventId: string
  readonly type: string
  /** The intent's gateway and external id; undefined when the event is about no intent of ours. */
  readonly intent: { readonly gateway: GatewayName | "any"; readonly externalId: string } | undefined
  readonly outcome: "succeeded" | "failed" | "ignore"
  /** Amount the gateway says it captured, checked against the intent when present. */
  readonly amountMinor: number | undefined
  /** Currency the gateway says it charged (any case), checked against the intent when present. */
  readonly currency?: string | undefined
  /** A success credits only when the event states amount and currency (the real gateways always do). */
  readonly requireAmount?: boolean
  /**
   * Our intent id from the gateway's copy of the metadata we sent: finds an autocharge whose
   * charge id we have not stored yet (the webhook can overtake the charge's own answer).
   */
  readonly intentId?: number | undefined
  /** A method the gateway saved with this payment, kept when the top-up asked for it. */
  readonly savedMethod?: SavedMethodInfo | undefined
  readonly payload: unknown
}

interface SettleResult {
  outcome: SettleOutcome
  intentId?: number
  tenantId: number | undefined
  /** The workspace whose autocharge this event turned off (its admins are told after commit). */
  autochargeDisabled?: number
}

/**
 * Records a gateway event once (by source and event id) and applies it: a success credits the
 * intent's amount once, in the same transaction that marks it succeeded. Every credit goes
 * through here, webhooks and the synchronous answers of autocharges alike.
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
        }) as Promise<SettleResult>,
    )
    log.info({ source: ev.source, event_id: ev.eventId, type: ev.type, outcome: result.outcome }, "payment event")
    if (result.autochargeDisabled !== undefined) yield* notifyAutochargeDisabled(result.autochargeDisabled)
    return result
  })

interface IntentRow {
  readonly id: number
  readonly tenant_id: number
  readonly gateway: GatewayName
  readonly amount_minor: number
  readonly currency: Currency
  readonly status: string
  readonly purpose: string
  readonly external_id: string
  readonly save_method: boolean
}

async function findIntent(tx: Tx, ev: GatewayEvent & { intent: NonNullable<GatewayEvent["intent"]> }): Promise<IntentRow | undefined> {
  const { gateway, externalId } = ev.intent
  if (externalId !== "") {
    const [byExternal] = await tx<[IntentRow?]>`
      select id, tenant_id, gateway, amount_minor, currency, status, purpose, external_id, save_method from payment_intents
      where external_id = ${externalId} ${gateway === "any" ? tx`` : tx`and gateway = ${gateway}`}
      for update`
    if (byExternal) return byExternal
  }
  // Only an intent still waiting for its charge id can be found by our own id.
  if (ev.intentId === undefined || gateway === "any") return undefined
  const [byId] = await tx<[IntentRow?]>`
    select id, tenant_id, gateway, amount_minor, currency, status, purpose, external_id, save_method from payment_intents
    where id = ${ev.intentId} and gateway = ${gateway} and external_id like 'unassigned:%'
    for update`
  if (byId && externalId !== "") await tx`update payment_intents set external_id = ${externalId} where id = ${byId.id}`
  return byId
}

async function settle(tx: Tx, ev: GatewayEvent): Promise<SettleResult> {
  if (ev.outcome === "ignore" || ev.intent === undefined) return { outcome: "ignored", tenantId: undefined }
  const intent = await findIntent(tx, { ...ev, intent: ev.intent })
  if (!intent) {
    if (ev.savedMethod !== undefined && ev.outcome === "succeeded") await saveMethodForIntent(tx, ev, undefined)
    // Not a payment of ours: perhaps the authorisation of a subscription's mandate.
    if (ev.source !== "stub" || ev.outcome !== "succeeded") return { outcome: "unknown_intent", tenantId: undefined }
    const authorised = await authoriseSubscription(tx, ev.intent.externalId, new Date())
    return { outcome: authorised === "activated" ? "subscription_activated" : authorised === "unknown" ? "unknown_intent" : "already_settled", tenantId: undefined }
  }
  const base = { intentId: intent.id, tenantId: intent.tenant_id }
  if (ev.outcome === "succeeded") {
    // A payment in another currency or of another amount is not this intent's, whatever it names.
    if (ev.currency !== undefined ? ev.currency.toUpperCase() !== intent.currency : ev.requireAmount === true) return { outcome: "currency_mismatch", ...base }
    if (ev.amountMinor !== undefined ? ev.amountMinor !== intent.amount_minor : ev.requireAmount === true) return { outcome: "amount_mismatch", ...base }
    await saveMethodForIntent(tx, ev, intent)
  }
  if (intent.status !== "pending") return { outcome: "already_settled", ...base }
  if (ev.outcome === "failed") {
    await tx`update payment_intents set status = 'failed', settled_at = now() where id = ${intent.id}`
    if (intent.purpose !== "autocharge") return { outcome: "failed", ...base }
    const [w] = await tx<[{ autocharge_enabled: boolean; autocharge_failures: number }]>`
      select autocharge_enabled, autocharge_failures from wallets where tenant_id = ${intent.tenant_id} for update`
    const failures = w.autocharge_failures + 1
    const disable = w.autocharge_enabled && failures >= AUTOCHARGE_MAX_FAILURES
    await tx`
      update wallets set autocharge_failures = ${failures}, autocharge_enabled = ${w.autocharge_enabled && !disable}
      where tenant_id = ${intent.tenant_id}`
    return { outcome: "failed", ...base, ...(disable && { autochargeDisabled: intent.tenant_id }) }
  }
  await tx`update payment_intents set status = 'succeeded', settled_at = now() where id = ${intent.id}`
  await postEntry(tx, { tenantId: intent.tenant_id, amountMinor: intent.amount_minor, kind: intent.purpose, reference: `intent:${intent.id}`, idempotencyKey: `intent:${intent.id}` })
  if (intent.purpose === "autocharge") await tx`update wallets set autocharge_failures = 0 where tenant_id = ${intent.tenant_id}`
  return { outcome: "credited", ...base }
}

/**
 * Keeps the method a successful top-up asked to save. The card gateway names the saved card on
 * the checkout's payment_intent event, which carries our intent id in metadata only the secret
 * key can set; UPI tokens arrive on the payment of the order itself. The stub saves a stand-in.
 */
async function saveMethodForIntent(tx: Tx, ev: GatewayEvent, found: IntentRow | undefined): Promise<void> {
  let intent = found
  if (intent === undefined && ev.source === "gw_card" && ev.intentId !== undefined) {
    ;[intent] = await tx<[IntentRow?]>`
      select id, tenant_id, gateway, amount_minor, currency, status, purpose, external_id, save_method from payment_intents
      where id = ${ev.intentId} and gateway = 'gw_card'`
  }
  if (!intent || !intent.save_method || intent.purpose !== "topup") return
  const method: SavedMethodInfo | undefined =
    ev.savedMethod ?? (intent.gateway === "stub" ? { customerId: `stub_cus_${intent.tenant_id}`, methodId: `stub_pm_${intent.id}`, hint: "stub test method" } : undefined)
  if (method === undefined) return
  await tx`
    insert into payment_methods (tenant_id, gateway, customer_id, method_id, display_hint)
    values (${intent.tenant_id}, ${intent.gateway}, ${method.customerId}, ${method.methodId}, ${method.hint.slice(0, 100)})
    on conflict (tenant_id, gateway, method_id) do update set status = 'active', removed_at = null, customer_id = excluded.customer_id`
}

/** Tells every owner and admin of the workspace that autocharge turned itself off. */
const notifyAutochargeDisabled = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const log = yield* Log
    // Optional: the usage API runs where only the core services are promised (runtime host).
    const mail = yield* Effect.serviceOption(Mail)
    if (Option.isNone(mail)) return log.warn({ tenant_id: tenantId }, "autocharge disabled; no mail service to tell the admins")
    const admins = yield* Effect.promise(
      () => sql<Array<{ email: string }>>`select email from users where tenant_id = ${tenantId} and role in ('owner', 'admin') and status = 'active' order by id`,
    )
    const text = `Parley tried to top up your wallet automatically ${AUTOCHARGE_MAX_FAILURES} times in a row and the payment failed each time, so autocharge is now off. Top up manually or save a new payment method, then turn autocharge on again.`
    for (const a of admins) {
      yield* Effect.tryPromise(() =>
        mail.value.send({ to: a.email, kind: "autocharge_disabled", subject: "Parley autocharge turned off after failed payments", text, html: `<p>${text}</p>`, links: [] }),
      ).pipe(Effect.catchAll((e) => Effect.sync(() => log.warn({ err: e.error, tenant_id: tenantId }, "autocharge mail not sent"))))
    }
  })

/**
 * Sets autocharge. Amount and threshold are bounded per currency (pricing.ts); enabling needs an
 * active method saved with the gateway that takes this workspace's currency. Enabling again
 * clears the count of failed charges.
 */
export const setAutocharge = (tenantId: number, s: { enabled: boolean; thresholdMinor: number | null; amountMinor: number | null }) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const payments = yield* Payments
    const wallet = yield* loadWallet(sql, tenantId)
    const c = wallet.currency
    const max = AUTOCHARGE_MAX_MINOR[c]
    const errors: FieldError[] = []
    if (s.thresholdMinor !== null && s.thresholdMinor > max) errors.push({ field: "threshold_minor", message: `must be at most ${max} (${formatMinor(max, c)})` })
    if (s.amountMinor !== null && (s.amountMinor < TOPUP_MINIMUM_MINOR[c] || s.amountMinor > max))
      errors.push({ field: "amount_minor", message: `must be between ${TOPUP_MINIMUM_MINOR[c]} and ${max} (${formatMinor(TOPUP_MINIMUM_MINOR[c], c)} to ${formatMinor(max, c)})` })
    if (errors.length > 0) return yield* Effect.fail(new ValidationFailed({ message: errors.map((e) => `${e.field}: ${e.message}`).join("; "), errors }))
    if (s.enabled) {
      const gateway = payments.forCurrency(c)
      const [method] =
        gateway?.chargeSaved === undefined
          ? []
          : yield* Effect.promise(() => sql`select 1 from payment_methods where tenant_id = ${tenantId} and gateway = ${gateway.name} and status = 'active' limit 1`)
      if (!method)
        return yield* Effect.fail(
          new Conflict({
            code: "PAYMENT_METHOD_REQUIRED",
            message: "autocharge needs a saved payment method: top up once with save_payment_method: true, then enable it",
          }),
        )
    }
    yield* Effect.promise(
      () => sql`
        update wallets set autocharge_enabled = ${s.enabled}, autocharge_threshold_minor = ${s.thresholdMinor}, autocharge_amount_minor = ${s.amountMinor},
          autocharge_failures = case when ${s.enabled} then 0 else autocharge_failures end
        where tenant_id = ${tenantId}`,
    )
    const w = yield* loadWallet(sql, tenantId)
    return { enabled: w.autocharge_enabled, threshold_minor: w.autocharge_threshold_minor, amount_minor: w.autocharge_amount_minor }
  })

/** An autocharge intent older than this no longer blocks the next one (its gateway went quiet). */
const AUTOCHARGE_STALE_AFTER = "1 hour"

interface AutochargeDecision {
  readonly intentId: number
  readonly tenantId: number
  readonly gateway: PaymentGateway
  readonly amountMinor: number
  readonly currency: Currency
  readonly customerId: string
  readonly methodId: string
}

/**
 * After a debit: if the balance fell under the autocharge threshold, charge the saved payment
 * method once. The decision holds the wallet's row lock only for a short transaction that inserts
 * a pending autocharge intent (so concurrent debits see it and never start a second one); the
 * gateway is called after that, in the background; the wallet is credited only when the gateway
 * confirms, through applyGatewayEvent like any webhook. Never fails: the debit already happened.
 */
export const maybeAutocharge = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    // Optional: the usage API runs where only the core services are promised (runtime host); the
    // app runtime behind every role carries Payments.
    const payments = yield* Effect.serviceOption(Payments)
    if (Option.isNone(payments)) return undefined
    const decision = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          const [w] = await tx<[WalletRow]>`
            select tenant_id, currency, balance_minor, autocharge_enabled, autocharge_threshold_minor, autocharge_amount_minor
            from wallets where tenant_id = ${tenantId} for update`
          if (!w.autocharge_enabled || w.autocharge_threshold_minor === null || w.autocharge_amount_minor === null) return undefined
          if (w.balance_minor >= w.autocharge_threshold_minor) return undefined
          const gateway = payments.value.forCurrency(w.currency)
          if (gateway?.chargeSaved === undefined) return undefined
          const [inFlight] = await tx`
            select 1 from payment_intents
            where tenant_id = ${tenantId} and purpose = 'autocharge' and status = 'pending' and created_at > now() - ${AUTOCHARGE_STALE_AFTER}::interval
            limit 1`
          if (inFlight) return undefined
          const [method] = await tx<[{ id: number; customer_id: string; method_id: string }?]>`
            select id, customer_id, method_id from payment_methods
            where tenant_id = ${tenantId} and gateway = ${gateway.name} and status = 'active'
            order by id desc limit 1`
          if (!method) return undefined
          const [intent] = await tx<[{ id: number }]>`
            insert into payment_intents (tenant_id, gateway, external_id, amount_minor, currency, purpose, payment_method_id)
            values (${tenantId}, ${gateway.name}, ${`unassigned:${randomUUID()}`}, ${w.autocharge_amount_minor}, ${w.currency}, 'autocharge', ${method.id})
            returning id`
          return {
            intentId: intent.id,
            tenantId,
            gateway,
            amountMinor: w.autocharge_amount_minor,
            currency: w.currency,
            customerId: method.customer_id,
            methodId: method.method_id,
          } satisfies AutochargeDecision
        }) as Promise<AutochargeDecision | undefined>,
    )
    if (decision === undefined) return undefined
    // The reservation must not wait on a gateway: the charge runs on its own fiber.
    yield* Effect.forkDaemon(chargeAutocharge(decision))
    return decision.intentId
  }).pipe(Effect.catchAllCause((cause) => Effect.flatMap(Log, (log) => Effect.sync(() => (log.error({ tenant_id: tenantId, cause: Cause.pretty(cause) }, "autocharge decision failed"), undefined)))))

/** Charges the saved method for a pending autocharge intent and settles what the gateway answered. */
const chargeAutocharge = (d: AutochargeDecision) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const log = yield* Log
    const charged = yield* Effect.either(
      Effect.tryPromise(() =>
        d.gateway.chargeSaved!({ intentId: d.intentId, tenantId: d.tenantId, amountMinor: d.amountMinor, currency: d.currency, customerId: d.customerId, methodId: d.methodId }),
      ),
    )
    let result: SavedChargeResult
    if (charged._tag === "Left") {
      const err = charged.left.error
      // Unreachable or 5xx after retries: the charge may have happened, so the intent stays pending
      // for the webhook; it stops blocking the next autocharge after AUTOCHARGE_STALE_AFTER.
      if (!(err instanceof PaymentGatewayError) || err.retryable) {
        log.warn({ tenant_id: d.tenantId, intent_id: d.intentId, err: (err as Error).message }, "autocharge outcome unknown; waiting for the gateway's webhook")
        return
      }
      result = { status: "failed", externalId: undefined, amountMinor: undefined, currency: undefined, reason: err.message, raw: { error: err.message } }
    } else result = charged.right
    log.info({ tenant_id: d.tenantId, intent_id: d.intentId, status: result.status, reason: result.reason }, "autocharge charged")
    if (result.status === "pending") {
      if (result.externalId !== undefined)
        yield* Effect.promise(
          () => sql`update payment_intents set external_id = ${result.externalId!} where id = ${d.intentId} and external_id like 'unassigned:%'`,
        )
      return
    }
    const settled = yield* applyGatewayEvent({
      source: d.gateway.name,
      eventId: `charge:${d.intentId}`,
      type: `autocharge.${result.status}`,
      intent: { gateway: d.gateway.name, externalId: result.externalId ?? "" },
      intentId: d.intentId,
      outcome: result.status,
      amountMinor: result.amountMinor,
      currency: result.currency,
      requireAmount: result.status === "succeeded",
      payload: { charge: result.raw, ...(result.reason !== undefined && { reason: result.reason }) },
    })
    if (settled.outcome === "amount_mismatch" || settled.outcome === "currency_mismatch")
      log.error({ tenant_id: d.tenantId, intent_id: d.intentId, outcome: settled.outcome }, "autocharge charged an unexpected amount; not credited")
  }).pipe(Effect.catchAllCause((cause) => Effect.flatMap(Log, (log) => Effect.sync(() => log.error({ intent_id: d.intentId, cause: Cause.pretty(cause) }, "autocharge failed")))))

/** The workspace's active saved methods, newest first. */
export const listPaymentMethods = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const rows = yield* Effect.promise(
      () => sql<Array<{ id: number; gateway: GatewayName; display_hint: string; status: string; created_at: Date }>>`
        select id, gateway, display_hint, status, created_at from payment_methods
        where tenant_id = ${tenantId} and status = 'active' order by id desc limit 50`,
    )
    return { payment_methods: rows.map((r) => ({ ...r, created_at: r.created_at.toISOString() })) }
  })

/** Forgets a saved method; autocharge turns off when its gateway has no active method left. */
export const removePaymentMethod = (tenantId: number, id: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const result = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          const [removed] = await tx<[{ gateway: GatewayName }?]>`
            update payment_methods set status = 'removed', removed_at = now()
            where id = ${id} and tenant_id = ${tenantId} and status = 'active'
            returning gateway`
          if (!removed) return undefined
          const [left] = await tx`select 1 from payment_methods where tenant_id = ${tenantId} and gateway = ${removed.gateway} and status = 'active' limit 1`
          if (!left) await tx`update wallets set autocharge_enabled = false where tenant_id = ${tenantId}`
          return { id, status: "removed" as const, autocharge_disabled: !left }
        }) as Promise<{ id: number; status: "removed"; autocharge_disabled: boolean } | undefined>,
    )
    if (result === undefined) return yield* Effect.fail(new NotFound({ message: "no such payment method" }))
    return result
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
