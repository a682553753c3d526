// The wallet object: what GET /billing/balance answers and what wallet.low / wallet.exhausted
// carry (with the threshold crossed and `version`), built by one function so the two never differ.
import type { Currency } from "../platform/money.js"
import type { EventType } from "../webhooks/events.js"
import type { EmitInput } from "../webhooks/outbox.repo.js"
import { RATE_PER_MINUTE_MINOR, TOPUP_PRESETS_MINOR } from "./pricing.js"

export interface WalletObjectTenant {
  readonly id: number
  readonly plan_tier: string
  readonly trial_expires_at: Date | null
}

export interface WalletObjectRow {
  readonly currency: Currency
  readonly balance_minor: number
  readonly autocharge_enabled: boolean
  readonly autocharge_threshold_minor: number | null
  readonly autocharge_amount_minor: number | null
}

/** The wallet object of GET /billing/balance. */
export const walletObject = (t: WalletObjectTenant, w: WalletObjectRow) => {
  const rate = RATE_PER_MINUTE_MINOR[w.currency]
  return {
    tenant_id: t.id,
    currency: w.currency,
    balance_minor: w.balance_minor,
    plan_tier: t.plan_tier,
    trial_expires_at: t.trial_expires_at?.toISOString() ?? null,
    minutes_remaining_at_bundled_rate: Math.floor(w.balance_minor / rate),
    rate_per_minute_minor: rate,
    autocharge: {
      enabled: w.autocharge_enabled,
      threshold_minor: w.autocharge_threshold_minor,
      amount_minor: w.autocharge_amount_minor,
    },
    topup_presets_minor: TOPUP_PRESETS_MINOR[w.currency],
  }
}

/**
 * wallet.low / wallet.exhausted: the wallet object, the threshold it crossed, and its version (the
 * epoch milliseconds of the wallet's change, as every event's in webhooks/event-data.ts).
 */
export const walletEvent = (
  type: Extract<EventType, "wallet.low" | "wallet.exhausted">,
  t: WalletObjectTenant,
  w: WalletObjectRow,
  lowThresholdMinor: number,
  changedAt: Date,
): EmitInput => ({
  tenantId: Number(t.id),
  type,
  data: { ...walletObject(t, w), low_threshold_minor: lowThresholdMinor, version: new Date(changedAt).getTime() },
})
