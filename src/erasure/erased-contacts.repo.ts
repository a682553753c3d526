// SQL of the suppression list of erased contacts (erased_contacts, migrations/0024), by keyed hash
// (contact-hash.ts): the only writer of it (a data-subject erase, src/dsr/, adds to it), and the
// lookups suppression.ts makes for every upload, DNC check, outreach email and dial.
import type { Sql, Tx } from "../platform/Db.js"

export type ContactKind = "phone" | "email"

/** Suppresses the hash (idempotent); returns when it was first erased. */
export async function markErased(
  sql: Sql | Tx,
  tenantId: number,
  hash: string,
  kind: ContactKind,
  now?: Date,
): Promise<Date> {
  const at = now ?? new Date()
  await sql`
    insert into erased_contacts (tenant_id, contact_hash, kind, erased_at) values (${tenantId}, ${hash}, ${kind}, ${at})
    on conflict (tenant_id, contact_hash) do nothing`
  const [row] = await sql<[{ erased_at: Date }]>`
    select erased_at from erased_contacts where tenant_id = ${tenantId} and contact_hash = ${hash}`
  return row.erased_at
}

export async function isErased(sql: Sql | Tx, tenantId: number, hash: string): Promise<boolean> {
  const rows = await sql`select 1 from erased_contacts where tenant_id = ${tenantId} and contact_hash = ${hash}`
  return rows.length > 0
}

/** The subset of `hashes` that are erased in the workspace (one statement, for batches). */
export async function erasedAmong(sql: Sql | Tx, tenantId: number, hashes: readonly string[]): Promise<Set<string>> {
  if (hashes.length === 0) return new Set()
  const rows = await sql<{ contact_hash: string }[]>`
    select contact_hash from erased_contacts
    where tenant_id = ${tenantId} and contact_hash = any(${sql.array([...hashes])}::text[])`
  return new Set(rows.map((r) => r.contact_hash))
}

/** Whether the workspace has erased any contact of this kind (the fast path of batch checks). */
export async function anyErased(sql: Sql | Tx, tenantId: number, kind: ContactKind): Promise<boolean> {
  const rows = await sql`select 1 from erased_contacts where tenant_id = ${tenantId} and kind = ${kind} limit 1`
  return rows.length > 0
}
