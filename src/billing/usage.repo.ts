// SQL for usage reservations: the cost held for one call before it is dialed, settled at hangup.
import type { Tx } from "../platform/Db.js"
import { ledgerPosts } from "./ledger.metrics.js"
import { checkWallets } from "./wallet-events.js"

export interface Reservation {
  readonly call_ref: string
  readonly reserved_minor: number
  readonly status: "reserved" | "settled" | "released"
  readonly settled_minor: number | null
}

/** The reservations among `callRefs` already made (a batch's replays). */
export const findReservations = (tx: Tx, callRefs: readonly string[]) =>
  tx<Reservation[]>`select call_ref, reserved_minor, status, settled_minor from usage_reservations
    where call_ref = any(${callRefs as string[]}::text[])`

/**
 * Posts a batch of call reservations of one workspace in one statement: `ledger_post` once per
 * call, in order (each locks the wallet as a single post does; the lock is held for this round trip
 * and the commit), then a reservation row for each posted one. Per call: posted (or replayed) with
 * its row, or the balance that could not pay it.
 */
export const postReservations = async (
  tx: Tx,
  tenantId: number,
  callRefs: readonly string[],
  costMinor: number,
  /** The per-minute rate held at, and the hosted speech in it, when not the bundled rate alone. */
  rate: { readonly perMinuteMinor: number; readonly hostedSpeech: readonly string[] } | undefined = undefined,
): Promise<Array<{ call_ref: string; outcome: "posted" | "replayed" | "insufficient_funds"; balance: number }>> => {
  const rows = await tx<{ call_ref: string; r: { outcome: string; balance_minor?: number } }[]>`
    select u.ref as call_ref,
      ledger_post(${tenantId}, ${-costMinor}, 'call_reservation', u.ref, 'reserve:' || u.ref) as r
    from unnest(${callRefs as string[]}::text[]) with ordinality as u(ref, n)
    order by u.n`
  for (const x of rows) ledgerPosts.labels(x.r.outcome).inc()
  const posted = rows.filter((x) => x.r.outcome !== "insufficient_funds").map((x) => x.call_ref)
  if (posted.length > 0) {
    await tx`insert into usage_reservations (tenant_id, call_ref, reserved_minor, rate_per_minute_minor, hosted_speech)
      select ${tenantId}, ref, ${costMinor}, ${rate?.perMinuteMinor ?? null}, ${(rate?.hostedSpeech ?? []) as string[]}
      from unnest(${posted}::text[]) as ref
      on conflict do nothing`
    // One check for the batch (wallet.low / wallet.exhausted); releases only give holds back, so
    // postReleases needs none (wallet-events.ts).
    await checkWallets(tx, [tenantId], false)
  }
  return rows.map((x) => ({
    call_ref: x.call_ref,
    outcome: x.r.outcome as "posted" | "replayed" | "insufficient_funds",
    balance: Number(x.r.balance_minor ?? 0),
  }))
}

/** The reservations among `callRefs` with their workspace, locked (in call_ref order) for the transaction. */
export const lockReservations = (tx: Tx, callRefs: readonly string[]) =>
  tx<(Reservation & { tenant_id: number; rate_per_minute_minor: number | null })[]>`
    select tenant_id, call_ref, reserved_minor, status, settled_minor, rate_per_minute_minor from usage_reservations
      where call_ref = any(${callRefs as string[]}::text[]) order by call_ref for update`

/**
 * Gives back the unused part of many reservations in one statement: `ledger_post` once per release,
 * in the order given (the caller sorts them by workspace, so wallets are locked in one order).
 */
export const postReleases = async (
  tx: Tx,
  releases: ReadonlyArray<{ tenantId: number; callRef: string; amountMinor: number }>,
): Promise<void> => {
  if (releases.length === 0) return
  const rows = await tx<{ r: { outcome: string } }[]>`
    select ledger_post(u.tenant, u.amount, 'call_release', u.ref, 'release:' || u.ref) as r
    from unnest(${releases.map((x) => x.tenantId)}::bigint[], ${releases.map((x) => x.amountMinor)}::bigint[],
      ${releases.map((x) => x.callRef)}::text[]) with ordinality as u(tenant, amount, ref, n)
    order by u.n`
  for (const x of rows) ledgerPosts.labels(x.r.outcome).inc()
}

/** Marks many reservations settled or released, with what each was charged, in one statement. */
export const markSettledMany = async (
  tx: Tx,
  rows: ReadonlyArray<{ callRef: string; status: Reservation["status"]; settledMinor: number }>,
): Promise<void> => {
  if (rows.length === 0) return
  await tx`update usage_reservations r set status = u.status, settled_minor = u.settled, settled_at = now()
    from unnest(${rows.map((x) => x.callRef)}::text[], ${rows.map((x) => x.status)}::text[],
      ${rows.map((x) => x.settledMinor)}::bigint[]) as u(ref, status, settled)
    where r.call_ref = u.ref`
}
