// SQL of usage_events: the events internal callers report, one row per (workspace, event id), and
// how each was billed. The wallet changes only through the ledger (billing/ledger.repo.ts).
import type { ContactMatch } from "../erasure/contact-match.repo.js"
import type { Tx } from "../platform/Db.js"

export interface UsageEventIn {
  readonly event_id: string
  readonly kind: string
  readonly quantity: number
  readonly unit: string
  readonly at: string
  readonly attributes?: Record<string, unknown> | undefined
}

export interface InsertedEvent {
  readonly id: number
  readonly event_id: string
  readonly kind: string
  readonly quantity: string
  readonly unit: string
}

export type Billing =
  | { readonly status: "charged"; readonly chargedMinor: number; readonly ledgerEntryId: number | null }
  | { readonly status: "unbilled"; readonly reason: "insufficient_funds" | "unit_mismatch" }

/**
 * Inserts the events not stored yet (one statement, in the given order) and returns the rows this
 * call inserted: an event id already stored, or inserted by a concurrent transaction (this
 * statement waits for it to commit), is left out. Those rows are this transaction's to bill.
 */
export async function insertNew(
  tx: Tx,
  tenantId: number,
  events: ReadonlyArray<UsageEventIn>,
): Promise<InsertedEvent[]> {
  const rows = await tx<InsertedEvent[]>`
    insert into usage_events (tenant_id, event_id, kind, quantity, unit, at, attributes)
    select ${tenantId}, e, k, q::numeric, u, a::timestamptz, x::jsonb
    from unnest(
      ${tx.array(
        events.map((e) => e.event_id),
        25,
      )}::text[],
      ${tx.array(
        events.map((e) => e.kind),
        25,
      )}::text[],
      ${tx.array(
        events.map((e) => String(e.quantity)),
        25,
      )}::text[],
      ${tx.array(
        events.map((e) => e.unit),
        25,
      )}::text[],
      ${tx.array(
        events.map((e) => e.at),
        25,
      )}::text[],
      ${tx.array(
        events.map((e) => (e.attributes === undefined ? null : JSON.stringify(e.attributes))),
        25,
      )}::text[]
    ) with ordinality as t(e, k, q, u, a, x, i)
    order by i
    on conflict (tenant_id, event_id) do nothing
    returning id, event_id, kind, quantity::text as quantity, unit`
  return [...rows]
}

/** Records how the inserted rows were billed (rows not named stay `unpriced`). */
export async function markBilling(
  tx: Tx,
  rows: ReadonlyArray<{ readonly id: number; readonly billing: Billing }>,
): Promise<void> {
  if (rows.length === 0) return
  await tx`
    update usage_events u set billing_status = t.s, billing_reason = t.r, charged_minor = t.c, ledger_entry_id = t.l
    from unnest(
      ${tx.array(
        rows.map((r) => r.id),
        20,
      )}::bigint[],
      ${tx.array(
        rows.map((r) => r.billing.status),
        25,
      )}::text[],
      ${tx.array(
        rows.map((r) => (r.billing.status === "unbilled" ? r.billing.reason : null)),
        25,
      )}::text[],
      ${tx.array(
        rows.map((r) => (r.billing.status === "charged" ? r.billing.chargedMinor : 0)),
        20,
      )}::bigint[],
      ${tx.array(
        rows.map((r) => (r.billing.status === "charged" ? r.billing.ledgerEntryId : null)),
        20,
      )}::bigint[]
    ) as t(id, s, r, c, l)
    where u.id = t.id`
}

/** A data-subject erase (src/dsr/): usage events are kept (billing), the contact scrubbed out of their attributes. */
export async function scrubUsageEvents(tx: Tx, m: ContactMatch): Promise<number> {
  const kept = await tx`
    update usage_events set attributes = ${m.scrub("attributes")}::jsonb
    where tenant_id = ${m.tenantId} and ${m.mentions("attributes")}`
  return kept.count
}
