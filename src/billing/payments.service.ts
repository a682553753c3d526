// Top-ups and what gateways tell us about them: a top-up credits only when a gateway confirms
// settlement, exactly once per intent however often the news arrives (webhooks and the answers of
// autocharges alike go through applyGatewayEvent); and the payment methods saved for autocharge.
import { randomUUID } from "node:crypto"
import { Effect, Option } from "effect"
import { adminEmails } from "../auth/auth.repo.js"
import { Db, type Tx } from "../platform/Db.js"
import { GatewayUnavailable, NotFound } from "../platform/errors.js"
import { Log } from "../platform/Log.js"
import type { Currency } from "../platform/money.js"
import { Mail } from "../providers/Mail.js"
import { Payments } from "../providers/Payments.js"
import type { GatewayName } from "../providers/payments/payments.interface.js"
import { postEntry } from "./ledger.repo.js"
import type { IntentRow } from "./payments.repo.js"
import * as repo from "./payments.repo.js"
import { AUTOCHARGE_MAX_FAILURES } from "./pricing.js"
import { authoriseSubscription } from "./subscription.service.js"
import * as wallets from "./wallet.repo.js"
import { loadWallet } from "./wallet.service.js"

const intentView = (i: {
  id: number
  amount_minor: number
  currency: Currency
  status: string
  external_id: string
  checkout_url: string | null
  gateway: GatewayName
}) => ({
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
export const topup = (
  tenantId: number,
  amountMinor: number,
  opts: { returnUrl: string | undefined; baseUrl: string; saveMethod?: boolean },
) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const payments = yield* Payments
    const wallet = yield* loadWallet(sql, tenantId)
    // No gateway for the currency (and no stub deployment): refuse before storing anything.
    const gateway = payments.forCurrency(wallet.currency)
    if (gateway === undefined)
      return yield* Effect.fail(
        new GatewayUnavailable({ message: `no payment gateway is configured for ${wallet.currency} top-ups` }),
      )
    const saveMethod = opts.saveMethod === true
    const returnUrl = opts.returnUrl ?? `${opts.baseUrl}/billing/return`
    const intentId = yield* Effect.promise(() =>
      repo.insertIntent(sql, {
        tenantId,
        gateway: gateway.name,
        placeholderId: `unassigned:${randomUUID()}`,
        amountMinor,
        currency: wallet.currency,
        purpose: "topup",
        returnUrl,
        saveMethod,
      }),
    )
    const intent = { id: intentId }
    const session = yield* Effect.tryPromise({
      try: () =>
        gateway.createCheckout({
          intentId: intent.id,
          tenantId,
          amountMinor,
          currency: wallet.currency,
          returnUrl,
          baseUrl: opts.baseUrl,
          savePaymentMethod: saveMethod,
        }),
      catch: (e) =>
        new GatewayUnavailable({
          message: `the ${gateway.name} gateway did not create the checkout: ${(e as Error).message}`,
        }),
    }).pipe(Effect.tapError(() => Effect.promise(() => repo.markIntentFailed(sql, intent.id))))
    const row = yield* Effect.promise(() =>
      repo.attachCheckout(sql, intent.id, session.externalId, session.checkoutUrl),
    )
    return intentView(row)
  })

/** The gw_upi intent our hosted checkout page renders, by its gateway order id (and intent id, on a legacy link). */
export const upiCheckoutIntent = (orderId: string, intentId: number | undefined) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const row = yield* Effect.promise(() => repo.findCheckoutIntent(sql, orderId, intentId))
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
  /**
   * The intent's gateway and external id; undefined when the event is about no intent of ours.
   * `paymentId`: the payment's own id when the event also names one (gw_card: the PaymentIntent's
   * data.object.id beside the data.object.payment_intent the spec finds the intent by), tried second.
   */
  readonly intent:
    | { readonly gateway: GatewayName | "any"; readonly externalId: string; readonly paymentId?: string | undefined }
    | undefined
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
  /**
   * Our intent id from the metadata of a checkout's PaymentIntent (gw_card, successes only): finds
   * the top-up whose checkout session that payment belongs to when the event names neither the
   * session nor a stored charge, so the payment credits whichever of its events arrives first.
   */
  readonly checkoutIntentId?: number | undefined
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
          const recorded = await repo.recordEvent(tx, ev)
          if (recorded === undefined) return { outcome: "duplicate" as SettleOutcome, tenantId: undefined }
          const outcome = await settle(tx, ev)
          await repo.setEventOutcome(tx, recorded, outcome.outcome, outcome.intentId ?? null)
          return outcome
        }) as Promise<SettleResult>,
    )
    log.info({ source: ev.source, event_id: ev.eventId, type: ev.type, outcome: result.outcome }, "payment event")
    if (result.autochargeDisabled !== undefined) yield* notifyAutochargeDisabled(result.autochargeDisabled)
    return result
  })

/**
 * The intent an event is about, locked: by the external id it names, then by the payment's own id,
 * then by our own id (an autocharge still waiting for its charge id, or a checkout top-up named by
 * its PaymentIntent's metadata). Each event locks one intent at most, so events cannot deadlock.
 */
async function findIntent(
  tx: Tx,
  ev: GatewayEvent & { intent: NonNullable<GatewayEvent["intent"]> },
): Promise<IntentRow | undefined> {
  const { gateway, externalId, paymentId } = ev.intent
  for (const id of new Set([externalId, paymentId ?? ""])) {
    if (id === "") continue
    const byExternal = await repo.lockIntentByExternal(tx, id, gateway)
    if (byExternal) return byExternal
  }
  if (gateway === "any") return undefined
  // Only an intent still waiting for its charge id is named after the charge found by our own id.
  if (ev.intentId !== undefined) {
    const byId = await repo.lockUnassignedIntent(tx, ev.intentId, gateway)
    const chargeId = paymentId ?? externalId
    if (byId && chargeId !== "") await repo.setExternalId(tx, byId.id, chargeId)
    if (byId) return byId
  }
  // A checkout top-up keeps its session id as external id: its payment finds it without renaming it.
  if (ev.checkoutIntentId !== undefined) return repo.lockCheckoutTopup(tx, ev.checkoutIntentId, gateway)
  return undefined
}

async function settle(tx: Tx, ev: GatewayEvent): Promise<SettleResult> {
  if (ev.outcome === "ignore" || ev.intent === undefined) return { outcome: "ignored", tenantId: undefined }
  const intent = await findIntent(tx, { ...ev, intent: ev.intent })
  if (!intent) {
    if (ev.savedMethod !== undefined && ev.outcome === "succeeded") await saveMethodForIntent(tx, ev, undefined)
    // Not a payment of ours: perhaps the authorisation of a subscription's mandate.
    if (ev.source !== "stub" || ev.outcome !== "succeeded") return { outcome: "unknown_intent", tenantId: undefined }
    const authorised = await authoriseSubscription(tx, ev.intent.externalId, new Date())
    return {
      outcome:
        authorised === "activated"
          ? "subscription_activated"
          : authorised === "unknown"
            ? "unknown_intent"
            : "already_settled",
      tenantId: undefined,
    }
  }
  const base = { intentId: intent.id, tenantId: intent.tenant_id }
  if (ev.outcome === "succeeded") {
    // A payment in another currency or of another amount is not this intent's, whatever it names.
    if (ev.currency !== undefined ? ev.currency.toUpperCase() !== intent.currency : ev.requireAmount === true)
      return { outcome: "currency_mismatch", ...base }
    if (ev.amountMinor !== undefined ? ev.amountMinor !== intent.amount_minor : ev.requireAmount === true)
      return { outcome: "amount_mismatch", ...base }
    await saveMethodForIntent(tx, ev, intent)
  }
  if (intent.status !== "pending") return { outcome: "already_settled", ...base }
  if (ev.outcome === "failed") {
    await repo.markIntentFailed(tx, intent.id)
    if (intent.purpose !== "autocharge") return { outcome: "failed", ...base }
    const w = await wallets.lockAutochargeState(tx, intent.tenant_id)
    const failures = w.autocharge_failures + 1
    const disable = w.autocharge_enabled && failures >= AUTOCHARGE_MAX_FAILURES
    await wallets.setAutochargeFailures(tx, intent.tenant_id, failures, w.autocharge_enabled && !disable)
    return { outcome: "failed", ...base, ...(disable && { autochargeDisabled: intent.tenant_id }) }
  }
  await repo.markIntentSucceeded(tx, intent.id)
  await postEntry(tx, {
    tenantId: intent.tenant_id,
    amountMinor: intent.amount_minor,
    kind: intent.purpose,
    reference: `intent:${intent.id}`,
    idempotencyKey: `intent:${intent.id}`,
  })
  if (intent.purpose === "autocharge") await wallets.resetAutochargeFailures(tx, intent.tenant_id)
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
    intent = await repo.findCardIntent(tx, ev.intentId)
  }
  if (!intent?.save_method || intent.purpose !== "topup") return
  const method: SavedMethodInfo | undefined =
    ev.savedMethod ??
    (intent.gateway === "stub"
      ? { customerId: `stub_cus_${intent.tenant_id}`, methodId: `stub_pm_${intent.id}`, hint: "stub test method" }
      : undefined)
  if (method === undefined) return
  await repo.upsertMethod(tx, {
    tenantId: intent.tenant_id,
    gateway: intent.gateway,
    customerId: method.customerId,
    methodId: method.methodId,
    hint: method.hint.slice(0, 100),
  })
}

/** Tells every owner and admin of the workspace that autocharge turned itself off. */
const notifyAutochargeDisabled = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const log = yield* Log
    // Optional: the usage API runs where only the core services are promised (runtime host).
    const mail = yield* Effect.serviceOption(Mail)
    if (Option.isNone(mail))
      return log.warn({ tenant_id: tenantId }, "autocharge disabled; no mail service to tell the admins")
    const admins = yield* Effect.promise(() => adminEmails(sql, tenantId))
    const text =
      `Parley tried to top up your wallet automatically ${AUTOCHARGE_MAX_FAILURES} times in a row ` +
      "and the payment failed each time, so autocharge is now off. " +
      "Top up manually or save a new payment method, then turn autocharge on again."
    for (const email of admins) {
      yield* Effect.tryPromise(() =>
        mail.value.send({
          to: email,
          kind: "autocharge_disabled",
          subject: "Parley autocharge turned off after failed payments",
          text,
          html: `<p>${text}</p>`,
          links: [],
        }),
      ).pipe(
        Effect.catchAll((e) =>
          Effect.sync(() => log.warn({ err: e.error, tenant_id: tenantId }, "autocharge mail not sent")),
        ),
      )
    }
  })

/** The workspace's active saved methods, newest first. */
export const listPaymentMethods = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const rows = yield* Effect.promise(() => repo.listActiveMethods(sql, tenantId))
    return { payment_methods: rows.map((r) => ({ ...r, created_at: r.created_at.toISOString() })) }
  })

/** Forgets a saved method; autocharge turns off when its gateway has no active method left. */
export const removePaymentMethod = (tenantId: number, id: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const result = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          const removed = await repo.removeMethod(tx, tenantId, id)
          if (removed === undefined) return undefined
          const left = await repo.hasActiveMethod(tx, tenantId, removed)
          if (!left) await wallets.disableAutocharge(tx, tenantId)
          return { id, status: "removed" as const, autocharge_disabled: !left }
        }) as Promise<{ id: number; status: "removed"; autocharge_disabled: boolean } | undefined>,
    )
    if (result === undefined) return yield* Effect.fail(new NotFound({ message: "no such payment method" }))
    return result
  })
