// SQL of data-subject rights: the suppression list of erased contacts (by keyed hash, see
// contact-hash.ts) and the audit log of export/erase requests (hash, actor, time; never the
// identifier). The only writer of erased_contacts and dsr_requests.

import { randomBytes } from "node:crypto"
import type { Sql, Tx } from "../platform/Db.js"

export type ContactKind = "phone" | "email"
export type DsrAction = "export" | "erase"

export interface DsrRequestRow {
  readonly receipt_id: string
  readonly action: DsrAction
  readonly contact_hash: string
  readonly actor: string
  readonly detail: Record<string, number>
  readonly at: Date
}

const newReceiptId = (): string => `dsr_${randomBytes(12).toString("base64url")}`

/** Records an export or erase request; returns its receipt. */
export async function recordRequest(
  sql: Sql | Tx,
  r: { tenantId: number; action: DsrAction; hash: string; actor: string; detail?: Record<string, number> },
): Promise<DsrRequestRow> {
  const [row] = await sql<[DsrRequestRow]>`
    insert into dsr_requests (receipt_id, tenant_id, action, contact_hash, actor, detail)
    values (${newReceiptId()}, ${r.tenantId}, ${r.action}, ${r.hash}, ${r.actor}, ${sql.json(r.detail ?? {})})
    returning receipt_id, action, contact_hash, actor, detail, at`
  return row
}

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
