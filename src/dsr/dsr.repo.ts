// SQL of data-subject rights: the audit log of export/erase requests (hash, actor, time; never the
// identifier). The only writer of dsr_requests; the suppression list of erased contacts is
// src/erasure/erased-contacts.repo.ts.

import { randomBytes } from "node:crypto"
import type { Sql, Tx } from "../platform/Db.js"

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
