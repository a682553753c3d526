// The keyed hash that stands in for an erased contact's phone or email: HMAC-SHA256 of the normalised
// identifier (E.164 phone, or lower-cased email) under a per-workspace key. The workspace key is
// itself HMAC-SHA256(deployment secret "dsr_contact_hash", "tenant:<id>"), so the same person erased
// from two workspaces hashes to two unrelated values (no linking across workspaces), and nothing
// but the deployment's secret can recompute a hash from a guessed number.

import { createHmac } from "node:crypto"
import type { Sql } from "../platform/Db.js"
import { systemSecret } from "../platform/secret-store.js"

/** Name of the deployment secret (stored via src/auth/secrets.ts) the workspace keys derive from. */
export const DSR_SECRET_NAME = "dsr_contact_hash"

/** The workspace's key, derived from the deployment secret. */
export function workspaceKey(secretMaterial: string, tenantId: number): Buffer {
  return createHmac("sha256", secretMaterial).update(`tenant:${tenantId}`).digest()
}

/** Hex HMAC-SHA256 of the normalised identifier under the workspace's key. */
export function contactHash(secretMaterial: string, tenantId: number, normalisedIdentifier: string): string {
  return createHmac("sha256", workspaceKey(secretMaterial, tenantId)).update(normalisedIdentifier).digest("hex")
}

/** The deployment secret (created on first use, shared by every process through the database). */
export function dsrSecret(sql: Sql): Promise<string> {
  return systemSecret(sql, DSR_SECRET_NAME)
}

/** Convenience: fetch the deployment secret and hash in one go. */
export async function contactHashFor(sql: Sql, tenantId: number, normalisedIdentifier: string): Promise<string> {
  return contactHash(await dsrSecret(sql), tenantId, normalisedIdentifier)
}

/** The value audit rows keep in place of a phone/email column: `erased:<hash>`. */
export const erasedMarker = (hash: string): string => `erased:${hash}`
