// wallet.low and wallet.exhausted: checked after every ledger posting, in its transaction
// (ledger.repo.ts postEntry, and the reservation batches of usage.repo.ts), so an event exists
// only if the posting committed. Each fires once per crossing: wallet.low when the balance goes
// below the workspace's threshold, wallet.exhausted when it reaches zero; each is armed again
// only by a refill back above its line. A refill is a credit other than a call's release: a
// reservation given back returns a hold, not money, and counting it would re-arm wallet.low on
// every call of a busy run whose holds straddle the line.
import { Effect } from "effect"
import { Db, type Sql, type Tx } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"
import type { EmitInput } from "../webhooks/outbox.repo.js"
import { emitEvents } from "../webhooks/outbox.repo.js"
import { RATE_PER_MINUTE_MINOR } from "./pricing.js"
import { walletEvent } from "./wallet.view.js"
import { lowThreshold, setLowThreshold, tenantOf, walletCrossings } from "./wallet-state.repo.js"

/** Minutes of calling at the bundled rate a workspace's default wallet.low threshold buys. */
export const DEFAULT_LOW_MINUTES = 30

export const defaultLowThresholdMinor = (currency: Currency): number =>
  DEFAULT_LOW_MINUTES * RATE_PER_MINUTE_MINOR[currency]

const DEFAULTS = { INR: defaultLowThresholdMinor("INR"), USD: defaultLowThresholdMinor("USD") }
/** Below one minute at the bundled rate the wallet is exhausted: no call can be reserved. */
const ONE_MINUTE = { INR: RATE_PER_MINUTE_MINOR.INR, USD: RATE_PER_MINUTE_MINOR.USD }

/** The ledger kind of a credit that is no refill (a reservation's unused part given back). */
const RELEASE_KIND = "call_release"

/** Whether a posting of `amountMinor` of `kind` may re-arm the events (see the module header). */
export const isRefill = (amountMinor: number, kind: string): boolean => amountMinor > 0 && kind !== RELEASE_KIND

/**
 * Sends wallet.low / wallet.exhausted for the wallets among `tenantIds` whose postings in `tx` just
 * crossed a line (one statement for the check, one more only when something crossed).
 */
export async function checkWallets(tx: Tx, tenantIds: readonly number[], refill: boolean): Promise<void> {
  if (tenantIds.length === 0) return
  const crossed = await walletCrossings(tx, tenantIds, refill, DEFAULTS, ONE_MINUTE)
  if (crossed.length === 0) return
  const events: EmitInput[] = []
  for (const c of crossed) {
    const t = tenantOf(c)
    if (c.low) events.push(walletEvent("wallet.low", t, c, Number(c.threshold), c.updated_at))
    if (c.exhausted) events.push(walletEvent("wallet.exhausted", t, c, Number(c.threshold), c.updated_at))
  }
  await emitEvents(tx, events)
}

export interface WalletThreshold {
  /** The workspace's own threshold; null when it uses the default. */
  readonly low_threshold_minor: number | null
  /** The threshold in force: the workspace's own, or the cost of 30 minutes at the bundled rate. */
  readonly effective_low_threshold_minor: number
  readonly default_low_threshold_minor: number
  readonly currency: Currency
}

const view = (sql: Sql, tenantId: number) =>
  Effect.promise(async (): Promise<WalletThreshold> => {
    const { currency, low_threshold_minor: own } = await lowThreshold(sql, tenantId)
    const fallback = defaultLowThresholdMinor(currency)
    return {
      low_threshold_minor: own,
      effective_low_threshold_minor: own ?? fallback,
      default_low_threshold_minor: fallback,
      currency,
    }
  })

/** GET /api/webhooks/wallet-threshold. */
export const getWalletThreshold = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    return yield* view(sql, tenantId)
  })

/** PUT /api/webhooks/wallet-threshold: the workspace's threshold, or null for the default. */
export const putWalletThreshold = (tenantId: number, thresholdMinor: number | null) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    yield* Effect.promise(() => setLowThreshold(sql, tenantId, thresholdMinor))
    return yield* view(sql, tenantId)
  })
