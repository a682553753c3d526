// SQL of webhook_wallet_state (migrations/0032), the only file that writes it: each workspace's
// wallet.low threshold, and the flags that make wallet.low and wallet.exhausted fire once per crossing.

import type { Sql, Tx } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"
import type { WalletObjectRow, WalletObjectTenant } from "./wallet.view.js"

/** A wallet whose last posting crossed a line, with what its event carries. */
export interface WalletCrossing extends WalletObjectRow {
  readonly tenant_id: number
  readonly plan_tier: string
  readonly trial_expires_at: Date | null
  readonly updated_at: Date
  readonly threshold: number
  /** The balance went below the threshold with wallet.low not yet sent since it was last above. */
  readonly low: boolean
  /**
   * The balance can no longer pay for one minute at the bundled rate (zero, or the few minor units
   * a reservation cannot use: postings never take a wallet below zero, so "reached zero" is this),
   * with wallet.exhausted not yet sent since it was last above.
   */
  readonly exhausted: boolean
}

export const tenantOf = (c: WalletCrossing): WalletObjectTenant => ({
  id: c.tenant_id,
  plan_tier: c.plan_tier,
  trial_expires_at: c.trial_expires_at,
})

/**
 * After postings to these wallets in `tx` (their rows locked by ledger_post until the commit, so
 * the checks of one wallet run one at a time): sets each wallet's flags from its balance and
 * returns the wallets that have just crossed. A flag is raised below its line and lowered only by
 * a `refill` back above it (see wallet-events.ts). One statement; a wallet with nothing to change
 * is only read. `defaults`: the threshold of a workspace that set none, per currency; `minute`: the
 * price of one minute at the bundled rate, per currency (below it, the wallet is exhausted).
 */
export const walletCrossings = (
  tx: Tx,
  tenantIds: readonly number[],
  refill: boolean,
  defaults: { INR: number; USD: number },
  minute: { INR: number; USD: number },
) =>
  tx<WalletCrossing[]>`
    with w as (
      select w.tenant_id, w.currency, w.balance_minor, w.autocharge_enabled, w.autocharge_threshold_minor,
        w.autocharge_amount_minor, w.updated_at, t.plan_tier, t.trial_expires_at,
        coalesce(s.low_threshold_minor,
          case w.currency when 'INR' then ${defaults.INR}::bigint else ${defaults.USD}::bigint end) as threshold,
        case w.currency when 'INR' then ${minute.INR}::bigint else ${minute.USD}::bigint end as minute_minor,
        coalesce(s.low_fired, false) as low_was, coalesce(s.exhausted_fired, false) as exhausted_was
      from wallets w join tenants t on t.id = w.tenant_id
        left join webhook_wallet_state s on s.tenant_id = w.tenant_id
      where w.tenant_id = any(${tenantIds as number[]}::bigint[])
    ), n as (
      select w.*,
        case when balance_minor < threshold then true when ${refill} then false else low_was end as low_now,
        case when balance_minor < minute_minor then true when ${refill} then false
          else exhausted_was end as exhausted_now
      from w
    ), up as (
      insert into webhook_wallet_state (tenant_id, low_fired, exhausted_fired)
      select tenant_id, low_now, exhausted_now from n where low_now <> low_was or exhausted_now <> exhausted_was
      on conflict (tenant_id) do update set low_fired = excluded.low_fired, exhausted_fired = excluded.exhausted_fired
    )
    select tenant_id, currency, balance_minor, autocharge_enabled, autocharge_threshold_minor, autocharge_amount_minor,
      updated_at, plan_tier, trial_expires_at, threshold,
      low_now and not low_was as low, exhausted_now and not exhausted_was as exhausted
    from n where (low_now and not low_was) or (exhausted_now and not exhausted_was)`

/** The wallet's currency and the workspace's own threshold (null: the default). */
export const lowThreshold = async (
  sql: Sql,
  tenantId: number,
): Promise<{ currency: Currency; low_threshold_minor: number | null }> => {
  const [row] = await sql<[{ currency: Currency; low_threshold_minor: number | null }]>`
    select w.currency, s.low_threshold_minor from wallets w
      left join webhook_wallet_state s on s.tenant_id = w.tenant_id
    where w.tenant_id = ${tenantId}`
  return row
}

/**
 * Sets the workspace's threshold (null: back to the default). The wallet row is locked first, as a
 * posting holds it, so a check never runs beside the change; wallet.low is armed again, and the
 * next posting below the new line sends it.
 */
export const setLowThreshold = async (sql: Sql, tenantId: number, thresholdMinor: number | null): Promise<void> => {
  await sql.begin(async (tx) => {
    await tx`select 1 from wallets where tenant_id = ${tenantId} for update`
    await tx`
      insert into webhook_wallet_state (tenant_id, low_threshold_minor) values (${tenantId}, ${thresholdMinor})
      on conflict (tenant_id) do update set low_threshold_minor = excluded.low_threshold_minor, low_fired = false`
  })
}
