// The ledger core: every credit and debit of a wallet goes through postEntry, which changes the
// balance and appends its entry in one transaction, idempotently on a key, never below zero.
import type { Currency } from "./pricing.js"
import type { Tx } from "../services/Db.js"

export interface LedgerEntry {
  readonly id: number
  readonly tenant_id: number
  readonly currency: Currency
  readonly amount_minor: number
  readonly kind: string
  readonly reference: string | null
  readonly balance_after_minor: number
  readonly idempotency_key: string
  readonly created_at: Date
}

export type PostResult =
  | { readonly ok: true; readonly entry: LedgerEntry; readonly replayed: boolean }
  | { readonly ok: false; readonly reason: "insufficient_funds"; readonly balanceMinor: number }

export interface PostEntry {
  readonly tenantId: number
  readonly amountMinor: number
  readonly kind: string
  readonly reference?: string
  /** Globally unique; a second post with the same key returns the first entry and changes nothing. */
  readonly idempotencyKey: string
}

/** Creates the tenant's wallet (balance 0); call inside the transaction that creates the tenant. */
export async function openWallet(tx: Tx, tenantId: number, currency: Currency): Promise<void> {
  await tx`insert into wallets (tenant_id, currency) values (${tenantId}, ${currency})`
}

/**
 * Posts one entry. Must run inside a transaction (`sql.begin`): the wallet row is locked first,
 * so concurrent posts to one wallet, and concurrent replays of one key, are serialised there.
 */
export async function postEntry(tx: Tx, p: PostEntry): Promise<PostResult> {
  if (!Number.isSafeInteger(p.amountMinor) || p.amountMinor === 0) throw new RangeError(`amount_minor must be a non-zero integer, got ${p.amountMinor}`)
  const [wallet] = await tx<[{ currency: Currency; balance_minor: number }?]>`
    select currency, balance_minor from wallets where tenant_id = ${p.tenantId} for update`
  if (!wallet) throw new Error(`tenant ${p.tenantId} has no wallet`)
  const [existing] = await tx<[LedgerEntry?]>`select * from ledger_entries where idempotency_key = ${p.idempotencyKey}`
  if (existing) {
    if (existing.tenant_id !== p.tenantId || existing.amount_minor !== p.amountMinor)
      throw new Error(`idempotency key ${p.idempotencyKey} was used for a different entry`)
    return { ok: true, entry: existing, replayed: true }
  }
  const balance = wallet.balance_minor + p.amountMinor
  // Past 2^53 a JS number would round the balance; no real wallet gets there, but refuse to guess.
  if (!Number.isSafeInteger(balance)) throw new RangeError(`balance of tenant ${p.tenantId} would leave the exact integer range`)
  if (balance < 0) return { ok: false, reason: "insufficient_funds", balanceMinor: wallet.balance_minor }
  await tx`update wallets set balance_minor = ${balance}, updated_at = now() where tenant_id = ${p.tenantId}`
  const [entry] = await tx<[LedgerEntry]>`
    insert into ledger_entries (tenant_id, currency, amount_minor, kind, reference, balance_after_minor, idempotency_key)
    values (${p.tenantId}, ${wallet.currency}, ${p.amountMinor}, ${p.kind}, ${p.reference ?? null}, ${balance}, ${p.idempotencyKey})
    returning *`
  return { ok: true, entry, replayed: false }
}
