// Autocharge: the settings that let a wallet top itself up from a saved payment method, and the
// charge itself, decided under the wallet's lock after a debit and settled like any gateway event.

import { randomUUID } from "node:crypto"
import { Cause, Effect, Option } from "effect"
import type { AuditActor } from "../audit/audit.repo.js"
import { recordAudit } from "../audit/audit.repo.js"
import { Db } from "../platform/Db.js"
import { Conflict, type FieldError, ValidationFailed } from "../platform/errors.js"
import { Log } from "../platform/Log.js"
import { type Currency, formatAmount } from "../platform/money.js"
import { Payments } from "../providers/Payments.js"
import {
  type PaymentGateway,
  PaymentGatewayError,
  type SavedChargeResult,
} from "../providers/payments/payments.interface.js"
import * as repo from "./payments.repo.js"
import { applyGatewayEvent } from "./payments.service.js"
import { AUTOCHARGE_MAX_MINOR, TOPUP_MINIMUM_MINOR } from "./pricing.js"
import * as wallets from "./wallet.repo.js"
import { loadWallet } from "./wallet.service.js"

/**
 * Sets autocharge. Amount and threshold are bounded per currency (pricing.ts); enabling needs an
 * active method saved with the gateway that takes this workspace's currency. Enabling again
 * clears the count of failed charges.
 */
export const setAutocharge = (
  who: AuditActor,
  s: { enabled: boolean; thresholdMinor: number | null; amountMinor: number | null },
) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const payments = yield* Payments
    const tenantId = who.tenantId
    const wallet = yield* loadWallet(sql, tenantId)
    const c = wallet.currency
    const max = AUTOCHARGE_MAX_MINOR[c]
    const errors: FieldError[] = []
    if (s.thresholdMinor !== null && s.thresholdMinor > max)
      errors.push({ field: "threshold_minor", message: `must be at most ${max} (${formatAmount(max, c)})` })
    if (s.amountMinor !== null && (s.amountMinor < TOPUP_MINIMUM_MINOR[c] || s.amountMinor > max))
      errors.push({
        field: "amount_minor",
        message:
          `must be between ${TOPUP_MINIMUM_MINOR[c]} and ${max} ` +
          `(${formatAmount(TOPUP_MINIMUM_MINOR[c], c)} to ${formatAmount(max, c)})`,
      })
    if (errors.length > 0)
      return yield* Effect.fail(
        new ValidationFailed({ message: errors.map((e) => `${e.field}: ${e.message}`).join("; "), errors }),
      )
    if (s.enabled) {
      const gateway = payments.forCurrency(c)
      const method =
        gateway?.chargeSaved === undefined
          ? false
          : yield* Effect.promise(() => repo.hasActiveMethod(sql, tenantId, gateway.name))
      if (!method)
        return yield* Effect.fail(
          new Conflict({
            code: "PAYMENT_METHOD_REQUIRED",
            message:
              "autocharge needs a saved payment method: top up once with save_payment_method: true, then enable it",
          }),
        )
    }
    // The change and its audit entry (money settings are logged with the state before) commit together.
    yield* Effect.promise(() =>
      sql.begin(async (tx) => {
        const before = await wallets.lockAutochargeSettings(tx, tenantId)
        await wallets.updateAutocharge(tx, tenantId, s)
        await recordAudit(tx, who, {
          action: "autocharge.updated",
          target: "wallet",
          before,
          after: { enabled: s.enabled, threshold_minor: s.thresholdMinor, amount_minor: s.amountMinor },
        })
      }),
    )
    const w = yield* loadWallet(sql, tenantId)
    return {
      enabled: w.autocharge_enabled,
      threshold_minor: w.autocharge_threshold_minor,
      amount_minor: w.autocharge_amount_minor,
    }
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
          const w = await wallets.lockWallet(tx, tenantId)
          if (!w.autocharge_enabled || w.autocharge_threshold_minor === null || w.autocharge_amount_minor === null)
            return undefined
          if (w.balance_minor >= w.autocharge_threshold_minor) return undefined
          const gateway = payments.value.forCurrency(w.currency)
          if (gateway?.chargeSaved === undefined) return undefined
          if (await repo.autochargeInFlight(tx, tenantId, AUTOCHARGE_STALE_AFTER)) return undefined
          const method = await repo.newestActiveMethod(tx, tenantId, gateway.name)
          if (!method) return undefined
          const intentId = await repo.insertIntent(tx, {
            tenantId,
            gateway: gateway.name,
            placeholderId: `unassigned:${randomUUID()}`,
            amountMinor: w.autocharge_amount_minor,
            currency: w.currency,
            purpose: "autocharge",
            paymentMethodId: method.id,
          })
          return {
            intentId,
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
  }).pipe(
    Effect.catchAllCause((cause) =>
      Effect.flatMap(Log, (log) =>
        Effect.sync(() => {
          log.error({ tenant_id: tenantId, cause: Cause.pretty(cause) }, "autocharge decision failed")
          return undefined
        }),
      ),
    ),
  )

/** Charges the saved method for a pending autocharge intent and settles what the gateway answered. */
const chargeAutocharge = (d: AutochargeDecision) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const log = yield* Log
    const charged = yield* Effect.either(
      Effect.tryPromise(() =>
        d.gateway.chargeSaved!({
          intentId: d.intentId,
          tenantId: d.tenantId,
          amountMinor: d.amountMinor,
          currency: d.currency,
          customerId: d.customerId,
          methodId: d.methodId,
        }),
      ),
    )
    let result: SavedChargeResult
    if (charged._tag === "Left") {
      const err = charged.left.error
      // Unreachable or 5xx after retries: the charge may have happened, so the intent stays pending
      // for the webhook; it stops blocking the next autocharge after AUTOCHARGE_STALE_AFTER.
      if (!(err instanceof PaymentGatewayError) || err.retryable) {
        log.warn(
          { tenant_id: d.tenantId, intent_id: d.intentId, err: (err as Error).message },
          "autocharge outcome unknown; waiting for the gateway's webhook",
        )
        return
      }
      result = {
        status: "failed",
        externalId: undefined,
        amountMinor: undefined,
        currency: undefined,
        reason: err.message,
        raw: { error: err.message },
      }
    } else result = charged.right
    log.info(
      { tenant_id: d.tenantId, intent_id: d.intentId, status: result.status, reason: result.reason },
      "autocharge charged",
    )
    if (result.status === "pending") {
      if (result.externalId !== undefined)
        yield* Effect.promise(() => repo.assignExternalId(sql, d.intentId, result.externalId!))
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
      log.error(
        { tenant_id: d.tenantId, intent_id: d.intentId, outcome: settled.outcome },
        "autocharge charged an unexpected amount; not credited",
      )
  }).pipe(
    Effect.catchAllCause((cause) =>
      Effect.flatMap(Log, (log) =>
        Effect.sync(() => log.error({ intent_id: d.intentId, cause: Cause.pretty(cause) }, "autocharge failed")),
      ),
    ),
  )
