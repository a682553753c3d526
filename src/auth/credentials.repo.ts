// SQL behind the authenticator: the lookups that turn a session token or an API key into a
// principal, and the spent ALTCHA solutions. (API keys' last uses are written by src/keys; the
// self-generated system secrets are src/platform/system-secrets.repo.ts.)
import type { Sql } from "../platform/Db.js"
import type { Scope, UserPrincipal } from "./principal.js"

export interface SessionRow {
  readonly tenant_id: number
  readonly role: UserPrincipal["role"]
  readonly status: string
  readonly tenant_status: string
  readonly revoked: boolean
}

export interface KeyRow {
  readonly id: number
  readonly tenant_id: number
  readonly scope: Scope
  readonly expires_at: Date | null
  readonly revoked: boolean
  readonly tenant_status: string
}

/** The user behind a session, their workspace's status and whether the token was signed out. */
export const findSession = async (sql: Sql, userId: number, jti: string): Promise<SessionRow | undefined> => {
  const [row] = await sql<[SessionRow?]>`
    select u.tenant_id, u.role, u.status, t.status as tenant_status,
           exists (select 1 from revoked_tokens r where r.jti = ${jti}) as revoked
    from users u join tenants t on t.id = u.tenant_id
    where u.id = ${userId}`
  return row
}

/** The API key with this secret digest, with its workspace's status. */
export const findKeyBySecret = async (sql: Sql, secretSha256: Buffer): Promise<KeyRow | undefined> => {
  const [row] = await sql<[KeyRow?]>`
    select k.id, k.tenant_id, k.scope, k.expires_at, k.revoked_at is not null as revoked, t.status as tenant_status
    from api_keys k join tenants t on t.id = k.tenant_id
    where k.secret_sha256 = ${secretSha256}`
  return row
}

/**
 * Records a verified ALTCHA solution as spent; false when it already was. Purges rows past
 * `purgeBefore` in the same statement: one round trip, and the index on expires_at keeps it cheap.
 */
export const spendAltcha = async (
  sql: Sql,
  signature: string,
  expiresAt: Date,
  purgeBefore: Date,
): Promise<boolean> => {
  const rows = await sql`
    with purged as (
      delete from altcha_spent where expires_at < ${purgeBefore}
    )
    insert into altcha_spent (signature, expires_at)
    values (${signature}, ${expiresAt})
    on conflict (signature) do nothing
    returning 1
  `
  return rows.count === 1
}
