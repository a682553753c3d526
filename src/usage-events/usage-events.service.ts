// Usage events from internal callers: stored once per (workspace, event id) for reporting, and the
// priced kinds (billing/pricing.ts USAGE_PRICES) charged from the wallet exactly once, never into
// overdraft: what the balance cannot pay is recorded as unbilled (insufficient_funds).
import { Effect } from "effect"
import { maybeAutocharge } from "../billing/autocharge.service.js"
import { postEntry } from "../billing/ledger.repo.js"
import { USAGE_PRICES } from "../billing/pricing.js"
import { lockWallet } from "../billing/wallet.repo.js"
import { loadTenant } from "../billing/wallet.service.js"
import { Db, type Tx } from "../platform/Db.js"
import { ValidationFailed } from "../platform/errors.js"
import type { Currency } from "../platform/money.js"
import type { Billing, InsertedEvent, UsageEventIn } from "./usage-events.repo.js"
import * as repo from "./usage-events.repo.js"

export const MAX_BATCH = 1000

export interface UsageEvent extends UsageEventIn {
  readonly tenant_id: number
}

export interface BatchResult {
  readonly accepted: number
  readonly duplicates: number
  readonly charged_minor: number
  readonly currency: Currency
  readonly unbilled: number
}

/** The cost of one event in minor units, or why it is not charged; undefined: a kind with no price. */
export function eventCost(
  e: { kind: string; quantity: number; unit: string },
  currency: Currency,
): number | "unit_mismatch" | undefined {
  const price = Object.hasOwn(USAGE_PRICES, e.kind) ? USAGE_PRICES[e.kind] : undefined
  if (price === undefined) return undefined
  if (price.unit !== e.unit) return "unit_mismatch"
  // Rounded up to a whole minor unit per event; the epsilon keeps float noise from adding one.
  return Math.max(0, Math.ceil((e.quantity * price.minor[currency]) / price.per - 1e-9))
}

/**
 * Records a batch for `tenantId`: every event must name that workspace (422 otherwise). Replays of
 * stored event ids are counted as duplicates and change nothing; concurrent copies of one batch
 * insert (and so bill) each event in exactly one transaction, the others waiting on the unique
 * index and finding it there. Event ids are taken in sorted order so overlapping batches lock in
 * the same order.
 */
export const recordUsage = (tenantId: number, events: ReadonlyArray<UsageEvent>) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const errors = events.flatMap((e, i) =>
      e.tenant_id === tenantId ? [] : [{ field: `events[${i}].tenant_id`, message: "must equal X-Tenant-Id" as const }],
    )
    if (errors.length > 0)
      return yield* Effect.fail(
        new ValidationFailed({ message: "every event's tenant_id must equal X-Tenant-Id", errors }),
      )
    yield* loadTenant(sql, tenantId)
    // The first copy of an event id counts; later copies in the batch are duplicates.
    const firsts = new Map<string, UsageEvent>()
    for (const e of events) if (!firsts.has(e.event_id)) firsts.set(e.event_id, e)
    const unique = [...firsts.values()].sort((x, y) => (x.event_id < y.event_id ? -1 : x.event_id > y.event_id ? 1 : 0))
    const result = yield* Effect.promise(() =>
      withDeadlockRetry(
        () => sql.begin((tx) => record(tx, tenantId, unique)) as Promise<Omit<BatchResult, "duplicates">>,
      ),
    )
    const out: BatchResult = { ...result, duplicates: events.length - result.accepted }
    if (out.charged_minor > 0) yield* maybeAutocharge(tenantId)
    return out
  })

async function record(
  tx: Tx,
  tenantId: number,
  events: ReadonlyArray<UsageEvent>,
): Promise<Omit<BatchResult, "duplicates">> {
  const inserted = await repo.insertNew(tx, tenantId, events)
  const wallet = await lockWallet(tx, tenantId)
  let available = wallet.balance_minor
  let total = 0
  const priced: Array<{ row: InsertedEvent; billing: Billing | { status: "pending"; cost: number } }> = []
  for (const row of inserted) {
    const cost = eventCost({ kind: row.kind, quantity: Number(row.quantity), unit: row.unit }, wallet.currency)
    if (cost === undefined) continue
    if (cost === "unit_mismatch") priced.push({ row, billing: { status: "unbilled", reason: "unit_mismatch" } })
    else if (cost > available) priced.push({ row, billing: { status: "unbilled", reason: "insufficient_funds" } })
    else {
      available -= cost
      total += cost
      priced.push({ row, billing: { status: "pending", cost } })
    }
  }
  let ledgerEntryId: number | null = null
  if (total > 0) {
    const first = priced.find((p) => p.billing.status === "pending")!.row
    const posted = await postEntry(tx, {
      tenantId,
      amountMinor: -total,
      kind: "usage",
      reference: `usage_events:${first.id}`,
      idempotencyKey: `usage:${tenantId}:${first.id}`,
    })
    // The wallet is locked above and `total` fits its balance, so this cannot be refused.
    if (!posted.ok) throw new Error(`usage charge refused: balance ${posted.balanceMinor}, charge ${total}`)
    ledgerEntryId = posted.entry.id
  }
  const marks = priced.map(({ row, billing }) => ({
    id: row.id,
    billing:
      billing.status === "pending"
        ? ({
            status: "charged",
            chargedMinor: billing.cost,
            ledgerEntryId: billing.cost > 0 ? ledgerEntryId : null,
          } as const)
        : billing,
  }))
  await repo.markBilling(tx, marks)
  return {
    accepted: inserted.length,
    charged_minor: total,
    currency: wallet.currency,
    unbilled: marks.filter((m) => m.billing.status === "unbilled").length,
  }
}

/** Overlapping batches lock in one order, so a deadlock is unexpected; one is retried, twice. */
async function withDeadlockRetry<T>(f: () => Promise<T>, attempts = 3): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await f()
    } catch (e) {
      if (i >= attempts || (e as { code?: string }).code !== "40P01") throw e
    }
  }
}
