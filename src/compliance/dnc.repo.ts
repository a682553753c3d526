// SQL of the tenant's do-not-call list, and of the per-number suppression checks (DNC entry,
// recent contact) that GET /dnc/check answers with.

import type { Sql, Tx } from "../platform/Db.js"

export type DncSource = "manual" | "import" | "call" | "unsubscribe" | "erasure"

export interface DncRow {
  readonly id: number
  readonly phone_e164: string
  readonly reason: string | null
  readonly source: DncSource
  readonly added_at: Date
}

/** A callee asked not to be called again (inside the transaction that ends the call). */
export async function addDncFromCall(tx: Tx, tenantId: number, phone: string): Promise<void> {
  await tx`
    insert into dnc_entries (tenant_id, phone_e164, reason, source) values (${tenantId}, ${phone},
      'asked not to be called again', 'call')
    on conflict (tenant_id, phone_e164) do nothing`
}

export async function list(
  sql: Sql,
  tenantId: number,
  page: { limit: number; offset: number; source: DncSource | undefined },
): Promise<{ rows: DncRow[]; total: number }> {
  const bySource = page.source === undefined ? sql`` : sql`and source = ${page.source}`
  const rows = await sql<DncRow[]>`
    select id, phone_e164, reason, source, added_at from dnc_entries
    where tenant_id = ${tenantId} ${bySource}
    order by added_at desc, id desc
    limit ${page.limit} offset ${page.offset}`
  const [{ total }] = await sql<
    [{ total: number }]
  >`select count(*)::int as total from dnc_entries where tenant_id = ${tenantId} ${bySource}`
  return { rows: [...rows], total }
}

/** Adds a number, or refreshes its entry (one row per number: added_at and reason are the new ones). */
export async function upsert(
  sql: Sql,
  e: { tenantId: number; phone: string; reason: string | null; source: DncSource; now: Date },
): Promise<DncRow> {
  const [row] = await sql<[DncRow]>`
    insert into dnc_entries (tenant_id, phone_e164, reason, source, added_at)
    values (${e.tenantId}, ${e.phone}, ${e.reason}, ${e.source}, ${e.now})
    on conflict (tenant_id, phone_e164) do update set reason = excluded.reason, added_at = excluded.added_at
    returning id, phone_e164, reason, source, added_at`
  return row
}

/** Adds the numbers not on the list yet (a batch, one statement); returns how many were added. */
export async function addMissing(
  sql: Sql,
  b: { tenantId: number; rows: ReadonlyArray<{ phone: string; reason: string | null }>; source: DncSource; now: Date },
): Promise<number> {
  const added = await sql`
    insert into dnc_entries (tenant_id, phone_e164, reason, source, added_at)
    select ${b.tenantId}, p, r, ${b.source}, ${b.now}
    from unnest(${sql.array(
      b.rows.map((r) => r.phone),
      25,
    )}::text[], ${sql.array(
      b.rows.map((r) => r.reason),
      25,
    )}::text[]) with ordinality as t(p, r, i)
    order by i
    on conflict (tenant_id, phone_e164) do nothing
    returning 1`
  return added.count
}

/** Deletes the first of `candidates` on the tenant's list; returns the number deleted, if any. */
export async function removeFirst(
  sql: Sql,
  tenantId: number,
  candidates: ReadonlyArray<string>,
): Promise<string | undefined> {
  const [row] = await sql<[{ phone_e164: string }?]>`
    delete from dnc_entries where id = (
      select id from dnc_entries
      where tenant_id = ${tenantId} and phone_e164 = any (${sql.array([...candidates], 25)}::text[])
      order by array_position(${sql.array([...candidates], 25)}::text[], phone_e164)
      limit 1)
    returning phone_e164`
  return row?.phone_e164
}

/** Whether the number is on the tenant's list, and whether the tenant reached it since `cooldownSince`. */
export async function suppression(
  sql: Sql,
  tenantId: number,
  phone: string,
  cooldownSince: Date,
): Promise<{ on_dnc: boolean; in_cooldown: boolean }> {
  const [row] = await sql<[{ on_dnc: boolean; in_cooldown: boolean }]>`
    select
      exists (select 1 from dnc_entries where tenant_id = ${tenantId} and phone_e164 = ${phone}) as on_dnc,
      exists (select 1 from recent_contacts where tenant_id = ${tenantId} and phone_e164 = ${phone}
        and last_contacted_at > ${cooldownSince}) as in_cooldown`
  return row
}

/** A data-subject erase (src/dsr/): the number's DNC entry is kept (it still holds), the marker for the number. */
export async function eraseDncPhone(tx: Tx, tenantId: number, phone: string, marker: string): Promise<number> {
  const kept =
    await tx`update dnc_entries set phone_e164 = ${marker} where tenant_id = ${tenantId} and phone_e164 = ${phone}`
  return kept.count
}
