// SQL for API keys and their audit trail (api_keys, api_key_events). A key's status is derived
// on every read, never stored: an expiry passes without anyone writing it down.

import type { KeyUse } from "../auth/authenticator.js"
import type { Scope } from "../auth/principal.js"
import type { Sql, Tx } from "../platform/Db.js"

export interface KeyRow {
  readonly id: number
  readonly name: string
  readonly prefix: string
  readonly scope: Scope
  readonly status: "active" | "expired" | "revoked"
  readonly created_at: Date
  readonly created_by_user_id: number | null
  readonly expires_at: Date | null
  readonly last_used_at: Date | null
  readonly last_used_ip: string | null
  readonly revoked_at: Date | null
  readonly revoked_reason: string | null
}

export interface KeyEvent {
  readonly tenantId: number
  readonly keyId: number
  readonly action: "created" | "revoked" | "deleted"
  readonly actorUserId: number
  readonly ip: string
  readonly userAgent: string | null
  readonly at: Date
}

const columns = (sql: Sql | Tx, now: Date) => sql`
  id, name, prefix, scope, created_at, created_by_user_id, expires_at, last_used_at, last_used_ip, revoked_at,
    revoked_reason,
  case when revoked_at is not null then 'revoked' when expires_at is not null and expires_at <= ${now} then 'expired'
    else 'active' end as status`

export const listKeys = (sql: Sql, tenantId: number, now: Date): Promise<KeyRow[]> =>
  sql<KeyRow[]>`select ${columns(sql, now)} from api_keys where tenant_id = ${tenantId} order by id desc`

/** A key of the workspace, locked for a change. */
export const lockKey = async (tx: Tx, tenantId: number, keyId: number, now: Date): Promise<KeyRow | undefined> => {
  const [row] = await tx<
    [KeyRow?]
  >`select ${columns(tx, now)} from api_keys where id = ${keyId} and tenant_id = ${tenantId} for update`
  return row
}

/** Locks the workspace's row: serialises concurrent creates, so the cap on active keys holds. */
export const lockTenant = async (tx: Tx, tenantId: number): Promise<void> => {
  await tx`select id from tenants where id = ${tenantId} for update`
}

export const countActive = async (tx: Tx, tenantId: number, now: Date): Promise<number> => {
  const [{ active }] = await tx<[{ active: number }]>`
    select count(*)::int as active from api_keys
    where tenant_id = ${tenantId} and revoked_at is null and (expires_at is null or expires_at > ${now})`
  return active
}

export const insertKey = async (
  tx: Tx,
  k: {
    tenantId: number
    name: string
    prefix: string
    secretSha256: Buffer
    scope: Scope
    now: Date
    userId: number
    expiresAt: Date | null
  },
): Promise<KeyRow> => {
  const [row] = await tx<[KeyRow]>`
    insert into api_keys (tenant_id, name, prefix, secret_sha256, scope, created_at, created_by_user_id, expires_at)
    values (${k.tenantId}, ${k.name}, ${k.prefix}, ${k.secretSha256},
            ${k.scope}, ${k.now}, ${k.userId}, ${k.expiresAt})
    returning ${columns(tx, k.now)}`
  return row
}

/** Revokes an active key of the workspace; undefined when there was none to revoke. */
export const revokeKey = async (
  tx: Tx,
  r: { tenantId: number; keyId: number; reason: string | null; userId: number; now: Date },
): Promise<KeyRow | undefined> => {
  const [row] = await tx<[KeyRow?]>`
    update api_keys set revoked_at = ${r.now}, revoked_reason = ${r.reason}, revoked_by_user_id = ${r.userId}
    where id = ${r.keyId} and tenant_id = ${r.tenantId} and revoked_at is null
    returning ${columns(tx, r.now)}`
  return row
}

/** Deletes a revoked key of the workspace; false when there was none. */
export const deleteRevokedKey = async (tx: Tx, tenantId: number, keyId: number): Promise<boolean> => {
  const [row] = await tx<[{ id: number }?]>`
    delete from api_keys where id = ${keyId} and tenant_id = ${tenantId} and revoked_at is not null returning id`
  return row !== undefined
}

export const recordEvent = async (tx: Tx, e: KeyEvent): Promise<void> => {
  await tx`
    insert into api_key_events (tenant_id, key_id, action, actor_user_id, ip, user_agent, at)
    values (${e.tenantId}, ${e.keyId}, ${e.action}, ${e.actorUserId}, ${e.ip}, ${e.userAgent}, ${e.at})`
}

/** Records each key's last use in one statement; an older use never overwrites a newer one. */
export const recordKeyUses = async (sql: Sql, uses: readonly KeyUse[]): Promise<void> => {
  await sql`
    update api_keys k set last_used_at = v.at, last_used_ip = v.ip
    from jsonb_to_recordset(${sql.json(uses)}) as v(id bigint, at timestamptz, ip text)
    where k.id = v.id and (k.last_used_at is null or k.last_used_at < v.at)`
}
