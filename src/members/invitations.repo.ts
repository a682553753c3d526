// SQL of invitations: a workspace asks an address to join with a role, by an emailed single-use
// link whose token is stored only as its sha256.
import type { Role } from "../auth/permissions.js"
import type { Sql, Tx } from "../platform/Db.js"

export interface InvitationRow {
  readonly id: number
  readonly tenant_id: number
  readonly email: string
  readonly role: Exclude<Role, "owner">
  readonly invited_by_user_id: number | null
  readonly created_at: Date
  readonly expires_at: Date
  readonly accepted_at: Date | null
  readonly accepted_user_id: number | null
  readonly revoked_at: Date | null
}

const COLUMNS =
  "id, tenant_id, email, role, invited_by_user_id, created_at, expires_at, accepted_at, accepted_user_id, revoked_at"

/** Serialises the workspace's member changes (invites, joins, role changes) on its row. */
export const lockWorkspace = async (tx: Tx, tenantId: number): Promise<void> => {
  await tx`select id from tenants where id = ${tenantId} for update`
}

/** Revokes the address's pending invitation to the workspace, if any (a new one replaces it). */
export const revokePendingFor = async (tx: Tx, tenantId: number, email: string, now: Date): Promise<InvitationRow[]> =>
  tx<InvitationRow[]>`
    update invitations set revoked_at = ${now}
    where tenant_id = ${tenantId} and email = ${email} and accepted_at is null and revoked_at is null
    returning ${tx.unsafe(COLUMNS)}`

export const countPending = async (tx: Tx, tenantId: number, now: Date): Promise<number> => {
  const [row] = await tx<[{ n: number }]>`
    select count(*)::int as n from invitations
    where tenant_id = ${tenantId} and accepted_at is null and revoked_at is null and expires_at > ${now}`
  return row.n
}

export const insertInvitation = async (
  tx: Tx,
  i: {
    tenantId: number
    email: string
    role: InvitationRow["role"]
    tokenSha256: Buffer
    by: number
    now: Date
    expiresAt: Date
  },
): Promise<InvitationRow> => {
  const [row] = await tx<[InvitationRow]>`
    insert into invitations (tenant_id, email, role, token_sha256, invited_by_user_id, created_at, expires_at)
    values (${i.tenantId}, ${i.email}, ${i.role}, ${i.tokenSha256}, ${i.by}, ${i.now}, ${i.expiresAt})
    returning ${tx.unsafe(COLUMNS)}`
  return row
}

/** Invitations not yet accepted or revoked (expired ones too, so the console can offer a resend). */
export const listOpen = (sql: Sql, tenantId: number): Promise<InvitationRow[]> =>
  sql<InvitationRow[]>`
    select ${sql.unsafe(COLUMNS)} from invitations
    where tenant_id = ${tenantId} and accepted_at is null and revoked_at is null
    order by id desc limit 200`

export const lockInvitation = async (tx: Tx, tenantId: number, id: number): Promise<InvitationRow | undefined> => {
  const [row] = await tx<[InvitationRow?]>`
    select ${tx.unsafe(COLUMNS)} from invitations where id = ${id} and tenant_id = ${tenantId} for update`
  return row
}

export const lockInvitationByToken = async (tx: Tx, tokenSha256: Buffer): Promise<InvitationRow | undefined> => {
  const [row] = await tx<[InvitationRow?]>`
    select ${tx.unsafe(COLUMNS)} from invitations where token_sha256 = ${tokenSha256} for update`
  return row
}

export const findInvitationByToken = async (sql: Sql, tokenSha256: Buffer): Promise<InvitationRow | undefined> => {
  const [row] = await sql<[InvitationRow?]>`
    select ${sql.unsafe(COLUMNS)} from invitations where token_sha256 = ${tokenSha256}`
  return row
}

export const revokeInvitation = async (tx: Tx, id: number, now: Date): Promise<void> => {
  await tx`update invitations set revoked_at = ${now} where id = ${id}`
}

export const markAccepted = async (tx: Tx, id: number, userId: number, now: Date): Promise<void> => {
  await tx`update invitations set accepted_at = ${now}, accepted_user_id = ${userId} where id = ${id}`
}
