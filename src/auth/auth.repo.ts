// SQL for users, email verification and revoked sessions (the workspace's own row is
// src/workspaces/workspaces.repo.ts). Every query that reads a workspace's users names the tenant.

import type { Sql, Tx } from "../platform/Db.js"
import type { Role } from "./permissions.js"

export interface UserRow {
  readonly id: number
  readonly tenant_id: number
  readonly email: string
  readonly full_name: string | null
  readonly role: Role
  readonly password_hash: string | null
  readonly auth_provider: "password" | "oauth"
  readonly status: "active" | "inactive"
  readonly email_verified: boolean
  readonly email_verified_at: Date | null
  readonly created_at: Date
}

export const insertUser = async (
  tx: Tx,
  u: { tenantId: number; email: string; fullName: string | null; passwordHash: string },
): Promise<UserRow> => {
  const [row] = await tx<[UserRow]>`
    insert into users (tenant_id, email, full_name, role, password_hash)
    values (${u.tenantId}, ${u.email}, ${u.fullName}, 'owner', ${u.passwordHash})
    returning *`
  return row
}

export const findUserByEmail = async (sql: Sql | Tx, email: string): Promise<UserRow | undefined> => {
  const [row] = await sql<[UserRow?]>`select * from users where email = ${email}`
  return row
}

export const findUser = async (sql: Sql | Tx, userId: number): Promise<UserRow | undefined> => {
  const [row] = await sql<[UserRow?]>`select * from users where id = ${userId}`
  return row
}

/** The addresses of the workspace's active owners and admins, oldest account first. */
export const adminEmails = async (sql: Sql, tenantId: number): Promise<string[]> => {
  const rows = await sql<Array<{ email: string }>>`
    select email from users where tenant_id = ${tenantId} and role in ('owner', 'admin') and status = 'active'
      order by id`
  return rows.map((r) => r.email)
}

/** Whether the workspace's owner has confirmed their address: runs need it (see runs.service). */
export const ownerEmailVerified = async (sql: Sql | Tx, tenantId: number): Promise<boolean> => {
  const [row] = await sql<[{ ok: boolean }]>`
    select exists (select 1 from users where tenant_id = ${tenantId} and role = 'owner' and email_verified) as ok`
  return row.ok
}

export const insertEmailVerification = async (
  tx: Tx,
  v: { tokenSha256: Buffer; userId: number; expiresAt: Date },
): Promise<void> => {
  await tx`insert into email_verifications (token_sha256, user_id, expires_at) values (${v.tokenSha256}, ${v.userId},
    ${v.expiresAt})`
}

/** Marks the user's address verified (receiving a sign-in code proves it is theirs). */
export const markEmailVerified = async (sql: Sql, userId: number, now: Date): Promise<void> => {
  await sql`update users set email_verified = true, email_verified_at = coalesce(email_verified_at, ${now})
    where id = ${userId}`
}

export type VerifyOutcome =
  | { readonly kind: "verified"; readonly email: string; readonly verifiedAt: Date }
  | { readonly kind: "expired" }
  | { readonly kind: "unknown" }

/**
 * Marks the token used and the user verified, in one statement each way; a token already used
 * answers with the verification it made (repeating verification is idempotent).
 */
export const consumeEmailVerification = async (sql: Sql, tokenSha256: Buffer, now: Date): Promise<VerifyOutcome> =>
  sql.begin(async (tx) => {
    const [v] = await tx<[{ user_id: number; expires_at: Date; used_at: Date | null }?]>`
      select user_id, expires_at, used_at from email_verifications where token_sha256 = ${tokenSha256} for update`
    if (!v) return { kind: "unknown" } as const
    if (v.used_at === null && v.expires_at <= now) return { kind: "expired" } as const
    if (v.used_at === null)
      await tx`update email_verifications set used_at = ${now} where token_sha256 = ${tokenSha256}`
    const [u] = await tx<[{ email: string; email_verified_at: Date }]>`
      update users set email_verified = true, email_verified_at = coalesce(email_verified_at, ${now})
      where id = ${v.user_id}
      returning email, email_verified_at`
    return { kind: "verified", email: u.email, verifiedAt: u.email_verified_at } as const
  }) as Promise<VerifyOutcome>

export const revokeSession = async (sql: Sql, s: { jti: string; userId: number; expiresAt: Date }): Promise<void> => {
  await sql`insert into revoked_tokens (jti, user_id, expires_at) values (${s.jti}, ${s.userId}, ${s.expiresAt})
    on conflict (jti) do nothing`
  // Tokens past their expiry are refused anyway: keep the table to the live ones.
  await sql`delete from revoked_tokens where expires_at < now() - interval '1 day'`
}

/** The public shape of a user: never the password hash. */
export const userView = (u: UserRow) => ({
  id: u.id,
  tenant_id: u.tenant_id,
  email: u.email,
  full_name: u.full_name,
  role: u.role,
  email_verified: u.email_verified,
  created_at: u.created_at.toISOString(),
})

// The team (src/members decides who may change what; users are written only here).

/** The workspace's active members, owner first, then by role and age. */
export const listMembers = (sql: Sql, tenantId: number): Promise<UserRow[]> =>
  sql<UserRow[]>`
    select * from users where tenant_id = ${tenantId} and status = 'active'
    order by array_position(array['owner', 'admin', 'supervisor', 'analyst'], role), id`

/** A user of the workspace, locked for a change (active or not). */
export const lockMember = async (tx: Tx, tenantId: number, userId: number): Promise<UserRow | undefined> => {
  const [row] = await tx<[UserRow?]>`select * from users where id = ${userId} and tenant_id = ${tenantId} for update`
  return row
}

export const setRole = async (tx: Tx, userId: number, role: Role): Promise<UserRow> => {
  const [row] = await tx<[UserRow]>`update users set role = ${role} where id = ${userId} returning *`
  return row
}

/** A removed member: the account stays (their changes name it) but cannot sign in. */
export const deactivateUser = async (tx: Tx, userId: number): Promise<void> => {
  await tx`update users set status = 'inactive' where id = ${userId}`
}

/**
 * An invited person joins: a new account with the invitation's role (their address is proven by
 * the link), or a former member of the same workspace back with a new password.
 */
export const joinAsMember = async (
  tx: Tx,
  m: { tenantId: number; email: string; fullName: string | null; passwordHash: string; role: Role; now: Date },
): Promise<UserRow> => {
  const [row] = await tx<[UserRow]>`
    insert into users (tenant_id, email, full_name, role, password_hash, email_verified, email_verified_at)
    values (${m.tenantId}, ${m.email}, ${m.fullName}, ${m.role}, ${m.passwordHash}, true, ${m.now})
    on conflict (email) do update set role = excluded.role, password_hash = excluded.password_hash,
      full_name = coalesce(excluded.full_name, users.full_name), status = 'active', email_verified = true,
      email_verified_at = coalesce(users.email_verified_at, excluded.email_verified_at)
      where users.tenant_id = excluded.tenant_id and users.status = 'inactive'
    returning *`
  return row
}
