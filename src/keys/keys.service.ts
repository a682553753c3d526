// API keys: created with a secret shown once (stored only as its sha256), scoped read (default),
// write or admin (minted by owners and admins only), optionally expiring, at most 10 active per
// workspace, revoked at once everywhere, deleted only once revoked; every change is audited.
import { randomInt } from "node:crypto"
import { Effect } from "effect"
import { recordAudit } from "../audit/audit.repo.js"
import { Auth } from "../auth/Auth.js"
import { API_KEY_PREFIX, sha256 } from "../auth/authenticator.js"
import { KEY_CEILING, type Role, roleMay, SCOPE_RANK, type Scope } from "../auth/permissions.js"
import type { UserPrincipal } from "../auth/principal.js"
import { Clock } from "../platform/Clock.js"
import { Db, type Tx } from "../platform/Db.js"
import { BadRequest, Conflict, Forbidden, NotFound } from "../platform/errors.js"
import { iso } from "../platform/time.js"
import type { KeyRow } from "./keys.repo.js"
import * as repo from "./keys.repo.js"

export const MAX_ACTIVE_KEYS = 10
const SECRET_CHARS = 40 // base62: ~238 bits
const PREFIX_CHARS = 6
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/** `svc_live_` followed by random base62 characters (crypto.randomInt: no modulo bias). */
export function newSecret(): string {
  let s = API_KEY_PREFIX
  for (let i = 0; i < SECRET_CHARS; i++) s += BASE62[randomInt(62)]
  return s
}

export interface KeyView {
  readonly id: number
  readonly name: string
  readonly prefix: string
  readonly scope: Scope
  readonly status: "active" | "expired" | "revoked"
  readonly created_at: string
  readonly created_by_user_id: number | null
  readonly expires_at: string | null
  readonly last_used_at: string | null
  readonly last_used_ip: string | null
  readonly revoked_at: string | null
  readonly revoked_reason: string | null
}

const view = (r: KeyRow): KeyView => ({
  id: r.id,
  name: r.name,
  prefix: r.prefix,
  scope: r.scope,
  status: r.status,
  created_at: r.created_at.toISOString(),
  created_by_user_id: r.created_by_user_id,
  expires_at: iso(r.expires_at),
  last_used_at: iso(r.last_used_at),
  last_used_ip: r.last_used_ip,
  revoked_at: iso(r.revoked_at),
  revoked_reason: r.revoked_reason,
})

export interface Actor {
  readonly tenantId: number
  readonly userId: number
  readonly role: Role
  readonly email: string
  readonly ip: string
  readonly userAgent: string | undefined
}

/** A key's change, in its own trail (api_key_events) and in the workspace's audit log. */
async function record(
  tx: Tx,
  actor: Actor,
  key: KeyRow,
  action: repo.KeyEvent["action"],
  at: Date,
  after: unknown,
): Promise<void> {
  await repo.recordEvent(tx, {
    tenantId: actor.tenantId,
    keyId: key.id,
    action,
    actorUserId: actor.userId,
    ip: actor.ip,
    userAgent: actor.userAgent ?? null,
    at,
  })
  await recordAudit(
    tx,
    { tenantId: actor.tenantId, actor: `user:${actor.userId}`, email: actor.email, role: actor.role, ip: actor.ip },
    {
      action: `api_key.${action}`,
      target: `api_key:${key.id}`,
      before:
        action === "created" ? undefined : { name: key.name, prefix: key.prefix, scope: key.scope, status: key.status },
      after,
    },
  )
}

export const listKeys = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const rows = yield* Effect.promise(() => repo.listKeys(sql, tenantId, clock.now()))
    return rows.map(view)
  })

/** A key asked for without a scope reads only: more power is asked for by name. */
export const DEFAULT_KEY_SCOPE: Scope = "read"

/** The signed-in user changing keys, as the trail and the audit log name them. */
export const keyActor = (user: UserPrincipal, ip: string, userAgent: string | undefined): Actor => ({
  tenantId: user.tenantId,
  userId: user.userId,
  role: user.role,
  email: user.email,
  ip,
  userAgent,
})

/** A key must not hold more than its maker: each role mints keys up to its ceiling. */
export const mayMint = (role: Role, scope: Scope): boolean => SCOPE_RANK[scope] <= SCOPE_RANK[KEY_CEILING[role]]

/**
 * A user manages (revokes, deletes) only keys at or below their own role: owners and admins any
 * key of the workspace; supervisors and analysts the keys they made themselves, if still within
 * their ceiling (a demoted admin no longer manages the admin key they made).
 */
export const mayManage = (user: { readonly userId: number; readonly role: Role }, key: KeyRow): boolean =>
  roleMay(user.role, "admin") || (key.created_by_user_id === user.userId && mayMint(user.role, key.scope))

const notYours = (verb: string) =>
  new Forbidden({
    code: "INSUFFICIENT_ROLE",
    message: `you may ${verb} only the API keys you made within your role; ask an owner or admin`,
  })

export const createKey = (actor: Actor, input: { name: string; scope: Scope; expiresAt: Date | null }) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const now = clock.now()
    if (!mayMint(actor.role, input.scope))
      return yield* Effect.fail(
        new Forbidden({
          code: "INSUFFICIENT_ROLE",
          message: `your role (${actor.role}) may create API keys of scope ${KEY_CEILING[actor.role]} or lower`,
        }),
      )
    if (input.expiresAt !== null && input.expiresAt <= now)
      return yield* Effect.fail(
        new BadRequest({ code: "VALIDATION_FAILED", field: "expires_at", message: "expires_at must be in the future" }),
      )
    const secret = newSecret()
    const created = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          // The workspace row serialises concurrent creates, so the cap holds under a race.
          await repo.lockTenant(tx, actor.tenantId)
          if ((await repo.countActive(tx, actor.tenantId, now)) >= MAX_ACTIVE_KEYS) return undefined
          const row = await repo.insertKey(tx, {
            tenantId: actor.tenantId,
            name: input.name,
            prefix: secret.slice(0, API_KEY_PREFIX.length + PREFIX_CHARS),
            secretSha256: sha256(secret),
            scope: input.scope,
            now,
            userId: actor.userId,
            expiresAt: input.expiresAt,
          })
          await record(tx, actor, row, "created", now, view(row))
          return row
        }) as Promise<KeyRow | undefined>,
    )
    if (!created)
      return yield* Effect.fail(
        new BadRequest({
          code: "API_KEY_LIMIT_REACHED",
          message: `a workspace may have at most ${MAX_ACTIVE_KEYS} active API keys; revoke one first`,
        }),
      )
    return { ...view(created), secret }
  })

export const revokeKey = (actor: Actor, keyId: number, reason: string | null) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const auth = yield* Auth
    const clock = yield* Clock
    const now = clock.now()
    const outcome = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          const key = await repo.lockKey(tx, actor.tenantId, keyId, now)
          if (!key) return "missing" as const
          if (!mayManage(actor, key)) return "not yours" as const
          const row = await repo.revokeKey(tx, { tenantId: actor.tenantId, keyId, reason, userId: actor.userId, now })
          if (row) await record(tx, actor, key, "revoked", now, { status: row.status, revoked_reason: reason })
          return { row: row ?? key, changed: row !== undefined }
        }) as Promise<"missing" | "not yours" | { row: KeyRow; changed: boolean }>,
    )
    if (outcome === "missing") return yield* Effect.fail(new NotFound({ message: `API key ${keyId} not found` }))
    if (outcome === "not yours") return yield* Effect.fail(notYours("revoke"))
    // Revoking a revoked key changes nothing.
    if (outcome.changed) yield* Effect.promise(() => auth.invalidate({ kind: "api_key", keyId }))
    return view(outcome.row)
  })

/** Deletes a revoked key's row; its trail (api_key_events, the audit log) stays. */
export const deleteKey = (actor: Actor, keyId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const now = clock.now()
    const outcome = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          const key = await repo.lockKey(tx, actor.tenantId, keyId, now)
          if (!key) return "missing" as const
          if (!mayManage(actor, key)) return "not yours" as const
          if (!(await repo.deleteRevokedKey(tx, actor.tenantId, keyId))) return "not revoked" as const
          await record(tx, actor, key, "deleted", now, null)
          return "deleted" as const
        }) as Promise<"missing" | "not yours" | "not revoked" | "deleted">,
    )
    if (outcome === "missing") return yield* Effect.fail(new NotFound({ message: `API key ${keyId} not found` }))
    if (outcome === "not yours") return yield* Effect.fail(notYours("delete"))
    if (outcome === "not revoked")
      return yield* Effect.fail(new Conflict({ code: "KEY_NOT_REVOKED", message: "revoke the key before deleting it" }))
    return { deleted: true, id: keyId }
  })
