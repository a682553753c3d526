// SQL of the storefront connection: the one connected shop per workspace (its token encrypted)
// and the install states. The only writer of storefront_connections and storefront_states.
import type { Sql, Tx } from "../platform/Db.js"

export interface ConnectionRow {
  readonly tenant_id: number
  readonly shop: string
  readonly access_token_enc: string
  readonly scopes: string
  readonly connected_at: Date
}

/** Stores a fresh install state (its SHA-256 only), valid for `ttlSeconds`. */
export async function insertState(
  sql: Sql | Tx,
  s: { stateSha256: Buffer; tenantId: number; shop: string; ttlSeconds: number },
): Promise<void> {
  await sql`
    insert into storefront_states (state_sha256, tenant_id, shop, expires_at)
    values (${s.stateSha256}, ${s.tenantId}, ${s.shop}, now() + make_interval(secs => ${s.ttlSeconds}))`
}

/**
 * Uses a state once: marks it used when it exists, is unused, unexpired and was made for `shop`,
 * and answers the workspace it binds. Undefined otherwise (unknown, replayed, expired, other shop).
 */
export async function consumeState(
  sql: Sql | Tx,
  stateSha256: Buffer,
  shop: string,
): Promise<{ tenant_id: number } | undefined> {
  const [row] = await sql<[{ tenant_id: number }?]>`
    update storefront_states set used_at = now()
    where state_sha256 = ${stateSha256} and shop = ${shop} and used_at is null and expires_at > now()
    returning tenant_id`
  return row
}

/** Forgets states that expired more than a day ago (they can only be refused). */
export async function pruneStates(sql: Sql | Tx): Promise<void> {
  await sql`delete from storefront_states where expires_at < now() - interval '1 day'`
}

/** Connects (or reconnects) the workspace's shop, replacing any earlier token. */
export async function upsertConnection(
  sql: Sql | Tx,
  c: { tenantId: number; shop: string; accessTokenEnc: string; scopes: string },
): Promise<ConnectionRow> {
  const [row] = await sql<[ConnectionRow]>`
    insert into storefront_connections (tenant_id, shop, access_token_enc, scopes)
    values (${c.tenantId}, ${c.shop}, ${c.accessTokenEnc}, ${c.scopes})
    on conflict (tenant_id) do update
      set shop = excluded.shop, access_token_enc = excluded.access_token_enc, scopes = excluded.scopes,
          connected_at = now()
    returning tenant_id, shop, access_token_enc, scopes, connected_at`
  return row
}

export async function getConnection(sql: Sql | Tx, tenantId: number): Promise<ConnectionRow | undefined> {
  const [row] = await sql<[ConnectionRow?]>`
    select tenant_id, shop, access_token_enc, scopes, connected_at
    from storefront_connections where tenant_id = ${tenantId}`
  return row
}

/** Forgets the workspace's token; true when there was one. */
export async function deleteConnection(sql: Sql | Tx, tenantId: number): Promise<boolean> {
  const res = await sql`delete from storefront_connections where tenant_id = ${tenantId}`
  return res.count > 0
}
