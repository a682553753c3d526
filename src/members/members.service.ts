// The team of a workspace: invitations by emailed single-use link (7 days), roles, removal, leaving
// and the owner's transfer. Every change is serialised on the workspace row, written with its audit
// entry in one transaction, and ends the changed member's cached sessions in every api process.
// The route table decides who may call each operation (src/auth/permissions.ts); the rules here are
// the ones a table cannot hold: one owner, who cannot be demoted, removed or leave; an owner is
// made only by a transfer from the owner; a user belongs to one workspace.
import { randomBytes } from "node:crypto"
import { Effect } from "effect"
import { recordAudit } from "../audit/audit.repo.js"
import { Auth } from "../auth/Auth.js"
import * as users from "../auth/auth.repo.js"
import { issueSession } from "../auth/auth.service.js"
import { sha256 } from "../auth/authenticator.js"
import { hashPassword } from "../auth/passwords.js"
import { type Role, roleMay } from "../auth/permissions.js"
import { auditActorOf, type UserPrincipal } from "../auth/principal.js"
import { requireVerifiedOwner } from "../auth/verified-owner.js"
import { Clock } from "../platform/Clock.js"
import { Db, type Tx } from "../platform/Db.js"
import { BadRequest, Conflict, Forbidden, NotFound, RateLimited } from "../platform/errors.js"
import { Log } from "../platform/Log.js"
import * as counters from "../platform/rate-counters.repo.js"
import { iso } from "../platform/time.js"
import { sendBestEffort } from "../providers/Mail.js"
import { findTenant, type TenantRow } from "../workspaces/workspaces.repo.js"
import * as repo from "./invitations.repo.js"

export const INVITATION_DAYS = 7
/** Open invitations a workspace may have at once, and invitations it may send in an hour. */
export const MAX_PENDING_INVITATIONS = 50
export const INVITES_PER_HOUR = 30

export type InvitedRole = repo.InvitationRow["role"]

/** Who is acting, with where from (the audit log keeps it). */
export interface MemberActor {
  readonly principal: UserPrincipal
  readonly ip: string
}

const memberView = (u: users.UserRow) => ({
  user_id: u.id,
  email: u.email,
  full_name: u.full_name,
  role: u.role,
  email_verified: u.email_verified,
  joined_at: u.created_at.toISOString(),
})

const invitationView = (i: repo.InvitationRow, now: Date) => ({
  id: i.id,
  email: i.email,
  role: i.role,
  status:
    i.accepted_at !== null
      ? ("accepted" as const)
      : i.revoked_at !== null
        ? ("revoked" as const)
        : i.expires_at <= now
          ? ("expired" as const)
          : ("pending" as const),
  invited_by_user_id: i.invited_by_user_id,
  created_at: i.created_at.toISOString(),
  expires_at: i.expires_at.toISOString(),
  accepted_at: iso(i.accepted_at),
  revoked_at: iso(i.revoked_at),
})

const notFound = (userId: number) => new NotFound({ message: `member ${userId} not found` })
const ownerStays = (what: string) =>
  new Conflict({
    code: "OWNER_REQUIRED",
    message:
      `the workspace's owner cannot ${what}: ` + 'transfer ownership first (PATCH /members/{user_id} {role: "owner"})',
  })

/** Runs `body` in one transaction holding the workspace's row, so member changes never interleave. */
const inWorkspace = <T>(tenantId: number, body: (tx: Tx) => Promise<T>) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    return yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          await repo.lockWorkspace(tx, tenantId)
          return body(tx)
        }) as Promise<T>,
    )
  })

/** Ends a member's cached sessions in every api process (role changes and removals apply at once). */
const forgetSessions = (userId: number) =>
  Effect.gen(function* () {
    const auth = yield* Auth
    yield* Effect.promise(() => auth.invalidate({ kind: "user", userId }))
  })

export const listMembers = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const [members, invitations] = yield* Effect.promise(() =>
      Promise.all([users.listMembers(sql, tenantId), repo.listOpen(sql, tenantId)]),
    )
    const now = clock.now()
    return { members: members.map(memberView), invitations: invitations.map((i) => invitationView(i, now)) }
  })

const inviteMail = (to: string, link: string, workspace: string, role: InvitedRole, by: string) =>
  sendBestEffort({
    to,
    kind: "invitation",
    subject: `Join ${workspace} on Parley`,
    text:
      `${by} invited you to ${workspace} on Parley as ${role === "admin" ? "an admin" : `a ${role}`}.\n\n` +
      `Open this link within ${INVITATION_DAYS} days to choose a password and join:\n\n${link}\n\n` +
      "If you did not expect this, ignore this email.\n",
    html:
      `<p>${escapeHtml(by)} invited you to <b>${escapeHtml(workspace)}</b> on Parley as ${role}.</p>` +
      `<p><a href="${link}">Join the workspace</a> within ${INVITATION_DAYS} days.</p>` +
      "<p>If you did not expect this, ignore this email.</p>",
    links: [link],
    senderName: workspace,
  })

const escapeHtml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

/**
 * Invites an address with a role (admin, supervisor or analyst: an owner is made by a transfer).
 * A pending invitation to the same address is replaced (a resend). Refused for an address that is
 * already a member here (409 ALREADY_MEMBER) or a user of another workspace (409
 * MEMBER_OF_ANOTHER_WORKSPACE); needs the owner's verified email (invitations are mail Parley
 * sends on the workspace's behalf), and is budgeted per workspace.
 */
export const invite = (actor: MemberActor, input: { email: string; role: InvitedRole; baseUrl: string | undefined }) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const log = yield* Log
    const p = actor.principal
    const now = clock.now()
    yield* requireVerifiedOwner(p.tenantId, "inviting members")
    const budget = yield* Effect.promise(() =>
      counters.hit(sql, `invite:tenant:${p.tenantId}`, { limit: INVITES_PER_HOUR, windowMs: counters.HOUR_MS }, now),
    )
    if (!budget.allowed)
      return yield* Effect.fail(
        new RateLimited({
          retryAfterSeconds: budget.retryAfterSeconds,
          message: `a workspace may send at most ${INVITES_PER_HOUR} invitations an hour`,
        }),
      )
    const token = randomBytes(32).toString("base64url")
    const outcome = yield* inWorkspace(p.tenantId, async (tx) => {
      const existing = await users.findUserByEmail(tx, input.email)
      if (existing && existing.tenant_id !== p.tenantId) return "elsewhere" as const
      if (existing && existing.status === "active") return "member" as const
      const replaced = await repo.revokePendingFor(tx, p.tenantId, input.email, now)
      if (replaced.length === 0 && (await repo.countPending(tx, p.tenantId, now)) >= MAX_PENDING_INVITATIONS)
        return "full" as const
      const invitation = await repo.insertInvitation(tx, {
        tenantId: p.tenantId,
        email: input.email,
        role: input.role,
        tokenSha256: sha256(token),
        by: p.userId,
        now,
        expiresAt: new Date(now.getTime() + INVITATION_DAYS * 86_400_000),
      })
      await recordAudit(tx, auditActorOf(p, actor.ip), {
        action: replaced.length > 0 ? "member.reinvited" : "member.invited",
        target: `invitation:${invitation.id}`,
        before: replaced[0] && { invitation_id: replaced[0].id, email: replaced[0].email, role: replaced[0].role },
        after: { email: invitation.email, role: invitation.role, expires_at: invitation.expires_at.toISOString() },
      })
      const tenant = await findTenant(tx, p.tenantId)
      return { invitation, workspace: tenant?.name ?? "a workspace" }
    })
    if (outcome === "elsewhere")
      return yield* Effect.fail(
        new Conflict({
          code: "MEMBER_OF_ANOTHER_WORKSPACE",
          message: `${input.email} already has a Parley account in another workspace; a user belongs to one workspace`,
        }),
      )
    if (outcome === "member")
      return yield* Effect.fail(
        new Conflict({ code: "ALREADY_MEMBER", message: `${input.email} is already a member of this workspace` }),
      )
    if (outcome === "full")
      return yield* Effect.fail(
        new Conflict({
          code: "INVITATION_LIMIT",
          message: `a workspace may have at most ${MAX_PENDING_INVITATIONS} open invitations; revoke some first`,
        }),
      )
    let sent = false
    if (input.baseUrl === undefined)
      log.warn({ invitation: outcome.invitation.id }, "invitation not sent: no trusted base URL (set PUBLIC_BASE_URL)")
    else
      sent = yield* inviteMail(
        input.email,
        `${input.baseUrl}/console/#/join?token=${token}`,
        outcome.workspace,
        input.role,
        p.email,
      )
    return { invitation: invitationView(outcome.invitation, now), email_sent: sent }
  })

export const revokeInvitation = (actor: MemberActor, invitationId: number) =>
  Effect.gen(function* () {
    const clock = yield* Clock
    const p = actor.principal
    const now = clock.now()
    const outcome = yield* inWorkspace(p.tenantId, async (tx) => {
      const row = await repo.lockInvitation(tx, p.tenantId, invitationId)
      if (!row) return undefined
      if (row.accepted_at !== null || row.revoked_at !== null) return row
      await repo.revokeInvitation(tx, row.id, now)
      await recordAudit(tx, auditActorOf(p, actor.ip), {
        action: "member.invitation_revoked",
        target: `invitation:${row.id}`,
        before: { email: row.email, role: row.role, status: "pending" },
        after: { status: "revoked" },
      })
      return { ...row, revoked_at: now }
    })
    if (!outcome) return yield* Effect.fail(new NotFound({ message: `invitation ${invitationId} not found` }))
    if (outcome.accepted_at !== null)
      return yield* Effect.fail(
        new Conflict({
          message: "this invitation was accepted; remove the member instead (DELETE /members/{user_id})",
        }),
      )
    return invitationView(outcome, now)
  })

/** What an invitation link is for, before its holder chooses a password (the join page shows it). */
export const inspectInvitation = (token: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const row = yield* Effect.promise(() => repo.findInvitationByToken(sql, sha256(token)))
    const usable = yield* usableInvitation(row, clock.now())
    const tenant = yield* Effect.promise(() => findTenant(sql, usable.tenant_id))
    return {
      email: usable.email,
      role: usable.role,
      workspace: { id: usable.tenant_id, name: tenant?.name ?? "" },
      expires_at: usable.expires_at.toISOString(),
    }
  })

const usableInvitation = (row: repo.InvitationRow | undefined, now: Date) =>
  row === undefined || row.accepted_at !== null || row.revoked_at !== null
    ? Effect.fail(
        new BadRequest({
          code: "INVALID_TOKEN",
          field: "token",
          message: "this invitation link is not valid (it was used, revoked, or never issued)",
        }),
      )
    : row.expires_at <= now
      ? Effect.fail(
          new BadRequest({
            code: "TOKEN_EXPIRED",
            field: "token",
            message: "this invitation has expired; ask the workspace's admin to invite you again",
          }),
        )
      : Effect.succeed(row)

/**
 * The invited person joins with a password of their choosing and is signed in. The link proves
 * their address (the account is verified). Used once: a second use, or a revoked or expired
 * link, is 400.
 */
export const acceptInvitation = (input: {
  token: string
  password: string
  fullName: string | undefined
  ip: string
}) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const now = clock.now()
    const peek = yield* Effect.promise(() => repo.findInvitationByToken(sql, sha256(input.token)))
    yield* usableInvitation(peek, now)
    const passwordHash = yield* Effect.promise(() => hashPassword(input.password))
    const joined = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          const row = await repo.lockInvitationByToken(tx, sha256(input.token))
          if (!row || row.accepted_at !== null || row.revoked_at !== null || row.expires_at <= now)
            return { kind: "gone" as const, row }
          await repo.lockWorkspace(tx, row.tenant_id)
          const user = await users.joinAsMember(tx, {
            tenantId: row.tenant_id,
            email: row.email,
            fullName: input.fullName ?? null,
            passwordHash,
            role: row.role,
            now,
          })
          if (!user) return { kind: "taken" as const }
          await repo.markAccepted(tx, row.id, user.id, now)
          await recordAudit(
            tx,
            { tenantId: row.tenant_id, actor: `user:${user.id}`, email: user.email, role: user.role, ip: input.ip },
            {
              action: "member.joined",
              target: `user:${user.id}`,
              after: { invitation_id: row.id, email: user.email, role: user.role },
            },
          )
          const tenant = await findTenant(tx, row.tenant_id)
          return { kind: "joined" as const, user, tenant: tenant! }
        }) as Promise<
          | { kind: "gone"; row: repo.InvitationRow | undefined }
          | { kind: "taken" }
          | { kind: "joined"; user: users.UserRow; tenant: TenantRow }
        >,
    )
    if (joined.kind === "gone")
      return yield* usableInvitation(joined.row ?? undefined, now).pipe(Effect.as(undefined as never))
    if (joined.kind === "taken")
      return yield* Effect.fail(
        new Conflict({
          code: "MEMBER_OF_ANOTHER_WORKSPACE",
          message: "this address already has a Parley account; a user belongs to one workspace",
        }),
      )
    yield* forgetSessions(joined.user.id)
    return yield* issueSession(joined.user, joined.tenant)
  })

/**
 * Changes a member's role. `owner` is a transfer, by the owner only: the owner becomes an admin in
 * the same transaction. The owner's own role changes only by a transfer.
 */
export const changeRole = (actor: MemberActor, userId: number, role: Role) =>
  Effect.gen(function* () {
    const p = actor.principal
    if (role === "owner" && !roleMay(p.role, "owner"))
      return yield* Effect.fail(
        new Forbidden({ code: "INSUFFICIENT_ROLE", message: "only the workspace's owner may transfer ownership" }),
      )
    const outcome = yield* inWorkspace(p.tenantId, async (tx) => {
      const target = await users.lockMember(tx, p.tenantId, userId)
      if (target?.status !== "active") return "missing" as const
      if (target.role === role) return { before: target, after: target, previousOwner: undefined }
      if (target.role === "owner") return "owner" as const
      let previousOwner: users.UserRow | undefined
      if (role === "owner") {
        previousOwner = await users.setRole(tx, p.userId, "admin")
        await recordAudit(tx, auditActorOf(p, actor.ip), {
          action: "member.role_changed",
          target: `user:${p.userId}`,
          before: { role: "owner" },
          after: { role: "admin", reason: "ownership transferred" },
        })
      }
      const after = await users.setRole(tx, userId, role)
      await recordAudit(tx, auditActorOf(p, actor.ip), {
        action: role === "owner" ? "member.ownership_transferred" : "member.role_changed",
        target: `user:${userId}`,
        before: { email: target.email, role: target.role },
        after: { email: after.email, role: after.role },
      })
      return { before: target, after, previousOwner }
    })
    if (outcome === "missing") return yield* Effect.fail(notFound(userId))
    if (outcome === "owner") return yield* Effect.fail(ownerStays("be given another role"))
    if (outcome.before.role !== outcome.after.role) {
      yield* forgetSessions(userId)
      if (outcome.previousOwner) yield* forgetSessions(outcome.previousOwner.id)
    }
    return memberView(outcome.after)
  })

const removeMember = (actor: MemberActor, userId: number, action: "member.removed" | "member.left") =>
  Effect.gen(function* () {
    const p = actor.principal
    const outcome = yield* inWorkspace(p.tenantId, async (tx) => {
      const target = await users.lockMember(tx, p.tenantId, userId)
      if (target?.status !== "active") return "missing" as const
      if (target.role === "owner") return "owner" as const
      await users.deactivateUser(tx, userId)
      await recordAudit(tx, auditActorOf(p, actor.ip), {
        action,
        target: `user:${userId}`,
        before: { email: target.email, role: target.role, status: "active" },
        after: { status: "removed" },
      })
      return target
    })
    if (outcome === "missing") return yield* Effect.fail(notFound(userId))
    if (outcome === "owner") return yield* Effect.fail(ownerStays(action === "member.left" ? "leave" : "be removed"))
    yield* forgetSessions(userId)
    return { removed: true, user_id: userId }
  })

/** Removes a member (an owner or admin does; never the owner): they can no longer sign in. */
export const removeFromWorkspace = (actor: MemberActor, userId: number) => removeMember(actor, userId, "member.removed")

/** The caller leaves the workspace (anyone but the owner). */
export const leaveWorkspace = (actor: MemberActor) => removeMember(actor, actor.principal.userId, "member.left")
