// Is an identifier erased in the workspace? The checks audience attach, DNC check, outreach email and
// the dialer ask: the identifier is hashed with the workspace's key and looked up in erased_contacts.
import type { Sql } from "../platform/Db.js"
import { contactHash, dsrSecret } from "./contact-hash.js"
import type { ContactKind } from "./erased-contacts.repo.js"
import * as repo from "./erased-contacts.repo.js"

/** Whether one normalised identifier (E.164 phone or lower-cased email) was erased. */
export async function isErasedIdentifier(
  sql: Sql,
  tenantId: number,
  kind: ContactKind,
  identifier: string,
): Promise<boolean> {
  if (!(await repo.anyErased(sql, tenantId, kind))) return false
  const normalised = kind === "email" ? identifier.trim().toLowerCase() : identifier
  return repo.isErased(sql, tenantId, contactHash(await dsrSecret(sql), tenantId, normalised))
}

/** The erased ones among normalised identifiers of one kind (nothing is hashed when none was ever erased). */
export async function erasedAmong(
  sql: Sql,
  tenantId: number,
  kind: ContactKind,
  identifiers: readonly string[],
): Promise<string[]> {
  if (identifiers.length === 0 || !(await repo.anyErased(sql, tenantId, kind))) return []
  const secret = await dsrSecret(sql)
  const byHash = new Map<string, string>()
  for (const id of new Set(identifiers)) byHash.set(contactHash(secret, tenantId, id), id)
  const erased: string[] = []
  const keys = [...byHash.keys()]
  for (let i = 0; i < keys.length; i += 10_000) {
    for (const h of await repo.erasedAmong(sql, tenantId, keys.slice(i, i + 10_000))) erased.push(byHash.get(h)!)
  }
  return erased
}
