// The ledger core: every credit and debit of a wallet goes through postEntry, which changes the
// balance and appends its entry in one transaction, idempotently on a key, never below zero.

import type { Sql, Tx } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"
import { ledgerPosts } from "./ledger.metrics.js"
import { checkWallets, isRefill } from "./wallet-events.js"

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

/**
 * Posts one entry. Must run inside a transaction (`sql.begin`) so it commits with whatever the
 * caller changes alongside it. The work is one call of the SQL function `ledger_post`
 * (migrations/0002): the wallet row is locked first, so concurrent posts to one wallet, and
 * concurrent replays of one key, are serialised there, and the lock is held for one round trip.
 */
export async function postEntry(tx: Tx, p: PostEntry): Promise<PostResult> {
  if (!Number.isSafeInteger(p.amountMinor) || p.amountMinor === 0)
    throw new RangeError(`amount_minor must be a non-zero integer, got ${p.amountMinor}`)
  let result:
    | { outcome: "posted" | "replayed"; entry: RawEntry }
    | { outcome: "insufficient_funds"; balance_minor: number }
  try {
    const [row] = await tx<[{ r: typeof result }]>`
      select ledger_post(${p.tenantId}, ${p.amountMinor}, ${p.kind}, ${p.reference ?? null}, ${p.idempotencyKey}) as r`
    result = row.r
  } catch (e) {
    const code = (e as { code?: string }).code
    if (code === "22003") throw new RangeError((e as Error).message)
    if (code === "P0001" || code === "P0002") throw new Error((e as Error).message)
    throw e
  }
  ledgerPosts.labels(result.outcome).inc()
  if (result.outcome === "insufficient_funds")
    return { ok: false, reason: "insufficient_funds", balanceMinor: Number(result.balance_minor) }
  // wallet.low / wallet.exhausted when this posting crossed a line: committed with it or not at all.
  // A release (a call's unused hold given back) neither goes down nor re-arms: no check to make.
  const refill = isRefill(p.amountMinor, p.kind)
  if (result.outcome === "posted" && (p.amountMinor < 0 || refill)) await checkWallets(tx, [p.tenantId], refill)
  return { ok: true, entry: fromJson(result.entry), replayed: result.outcome === "replayed" }
}

interface RawEntry extends Omit<LedgerEntry, "created_at"> {
  readonly created_at: string
}

// jsonb carries bigints as JSON numbers (exact below 2^53, which ledger_post guarantees) and
// timestamps as strings.
const fromJson = (e: RawEntry): LedgerEntry => ({ ...e, created_at: new Date(e.created_at) })

/** The workspace's entries, newest first, `limit` of them from before entry `beforeId` when given. */
export const listEntries = (
  sql: Sql,
  tenantId: number,
  limit: number,
  beforeId: number | undefined,
): Promise<LedgerEntry[]> =>
  sql<LedgerEntry[]>`
    select id, tenant_id, currency, amount_minor, kind, reference, balance_after_minor, idempotency_key, created_at
    from ledger_entries
    where tenant_id = ${tenantId} ${beforeId === undefined ? sql`` : sql`and id < ${beforeId}`}
    order by id desc limit ${limit}`
