// SQL for a wallet (wallets): its opening, settings and autocharge state. Balances change only
// through the ledger (ledger.repo.ts, the SQL function ledger_post), never here.
import type { Sql, Tx } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"

export interface WalletRow {
  readonly tenant_id: number
  readonly currency: Currency
  readonly balance_minor: number
  readonly autocharge_enabled: boolean
  readonly autocharge_threshold_minor: number | null
  readonly autocharge_amount_minor: number | null
}

/** Creates the tenant's wallet (balance 0); call inside the transaction that creates the tenant. */
export async function openWallet(tx: Tx, tenantId: number, currency: Currency): Promise<void> {
  await tx`insert into wallets (tenant_id, currency) values (${tenantId}, ${currency})`
}

export const findWallet = async (sql: Sql, tenantId: number): Promise<WalletRow> => {
  const [w] = await sql<[WalletRow]>`
    select tenant_id, currency, balance_minor, autocharge_enabled, autocharge_threshold_minor, autocharge_amount_minor
    from wallets where tenant_id = ${tenantId}`
  return w
}

/** The wallet, locked for the rest of the transaction. */
export const lockWallet = async (tx: Tx, tenantId: number): Promise<WalletRow> => {
  const [w] = await tx<[WalletRow]>`
    select tenant_id, currency, balance_minor, autocharge_enabled, autocharge_threshold_minor, autocharge_amount_minor
    from wallets where tenant_id = ${tenantId} for update`
  return w
}

export const balanceOf = async (sql: Sql, tenantId: number): Promise<number> => {
  const [w] = await sql<[{ balance_minor: number }]>`select balance_minor from wallets where tenant_id = ${tenantId}`
  return w.balance_minor
}

/** The autocharge settings as the API shows them, locked for the rest of the transaction. */
export const lockAutochargeSettings = async (
  tx: Tx,
  tenantId: number,
): Promise<{ enabled: boolean; threshold_minor: number | null; amount_minor: number | null }> => {
  const [w] = await tx<[{ enabled: boolean; threshold_minor: number | null; amount_minor: number | null }]>`
    select autocharge_enabled as enabled, autocharge_threshold_minor as threshold_minor,
      autocharge_amount_minor as amount_minor
    from wallets where tenant_id = ${tenantId} for update`
  return w
}

/** Stores the autocharge settings; enabling clears the count of failed charges. */
export const updateAutocharge = async (
  sql: Sql | Tx,
  tenantId: number,
  s: { enabled: boolean; thresholdMinor: number | null; amountMinor: number | null },
): Promise<void> => {
  await sql`
    update wallets set autocharge_enabled = ${s.enabled}, autocharge_threshold_minor = ${s.thresholdMinor},
      autocharge_amount_minor = ${s.amountMinor},
      autocharge_failures = case when ${s.enabled} then 0 else autocharge_failures end
    where tenant_id = ${tenantId}`
}

/** The autocharge state, locked for the rest of the transaction. */
export const lockAutochargeState = async (
  tx: Tx,
  tenantId: number,
): Promise<{ autocharge_enabled: boolean; autocharge_failures: number }> => {
  const [w] = await tx<[{ autocharge_enabled: boolean; autocharge_failures: number }]>`
    select autocharge_enabled, autocharge_failures from wallets where tenant_id = ${tenantId} for update`
  return w
}

export const setAutochargeFailures = async (
  tx: Tx,
  tenantId: number,
  failures: number,
  enabled: boolean,
): Promise<void> => {
  await tx`update wallets set autocharge_failures = ${failures}, autocharge_enabled = ${enabled}
    where tenant_id = ${tenantId}`
}

export const resetAutochargeFailures = async (tx: Tx, tenantId: number): Promise<void> => {
  await tx`update wallets set autocharge_failures = 0 where tenant_id = ${tenantId}`
}

export const disableAutocharge = async (tx: Tx, tenantId: number): Promise<void> => {
  await tx`update wallets set autocharge_enabled = false where tenant_id = ${tenantId}`
}
