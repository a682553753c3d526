// API keys: created with a secret shown once (stored only as its sha256), scoped read (default),
// write or admin (minted by owners and admins only), optionally expiring, at most 10 active per
// workspace, revoked at once everywhere, deleted only once revoked; every change is audited.
import { randomInt } from "node:crypto"
import { Effect } from "effect"
import { Auth } from "../auth/Auth.js"
import { API_KEY_PREFIX, sha256 } from "../auth/authenticator.js"
import type { Scope, UserPrincipal } from "../auth/principal.js"
import { Clock } from "../platform/Clock.js"
import { Db } from "../platform/Db.js"
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
  readonly ip: string
  readonly userAgent: string | undefined
}

const event = (actor: Actor, keyId: number, action: repo.KeyEvent["action"], at: Date): repo.KeyEvent => ({
  tenantId: actor.tenantId,
  keyId,
  action,
  actorUserId: actor.userId,
  ip: actor.ip,
  userAgent: actor.userAgent ?? null,
  at,
})

export const listKeys = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const rows = yield* Effect.promise(() => repo.listKeys(sql, tenantId, clock.now()))
    return rows.map(view)
  })

/** A key asked for without a scope reads only: more power is asked for by name. */
export const DEFAULT_KEY_SCOPE: Scope = "read"

/** An admin key does what only owners and admins may, so only they may mint one. */
export const mayMint = (role: UserPrincipal["role"], scope: Scope): boolean => scope !== "admin" || role !== "member"

export const createKey = (
  actor: Actor & { readonly role: UserPrincipal["role"] },
  input: { name: string; scope: Scope; expiresAt: Date | null },
) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const now = clock.now()
    if (!mayMint(actor.role, input.scope))
      return yield* Effect.fail(
        new Forbidden({ message: "only workspace owners and admins may create admin-scope API keys" }),
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
          await repo.recordEvent(tx, event(actor, row.id, "created", now))
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
    const revoked = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          const row = await repo.revokeKey(tx, { tenantId: actor.tenantId, keyId, reason, userId: actor.userId, now })
          if (row) await repo.recordEvent(tx, event(actor, keyId, "revoked", now))
          return row
        }) as Promise<KeyRow | undefined>,
    )
    if (revoked) {
      yield* Effect.promise(() => auth.invalidate({ kind: "api_key", keyId }))
      return view(revoked)
    }
    // Revoking a revoked key changes nothing; a key outside the workspace does not exist.
    const existing = yield* Effect.promise(() => repo.findKey(sql, actor.tenantId, keyId, now))
    if (!existing) return yield* Effect.fail(new NotFound({ message: `API key ${keyId} not found` }))
    return view(existing)
  })

export const deleteKey = (actor: Actor, keyId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const now = clock.now()
    const deleted = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          const deleted = await repo.deleteRevokedKey(tx, actor.tenantId, keyId)
          if (deleted) await repo.recordEvent(tx, event(actor, keyId, "deleted", now))
          return deleted
        }) as Promise<boolean>,
    )
    if (deleted) return { deleted: true, id: keyId }
    const existing = yield* Effect.promise(() => repo.keyExists(sql, actor.tenantId, keyId))
    if (!existing) return yield* Effect.fail(new NotFound({ message: `API key ${keyId} not found` }))
    return yield* Effect.fail(new Conflict({ code: "KEY_NOT_REVOKED", message: "revoke the key before deleting it" }))
  })
