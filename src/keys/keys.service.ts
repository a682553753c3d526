// API keys: created with a secret shown once (stored only as its sha256), scoped read (default),
// write or admin (minted by owners and admins only), optionally expiring, at most 10 active per
// workspace, revoked at once everywhere, deleted only once revoked; every change is audited.
import { randomInt } from "node:crypto"
import { Effect } from "effect"
import { Auth } from "../auth/Auth.js"
import { API_KEY_PREFIX, sha256 } from "../auth/authenticator.js"
import type { Scope, UserPrincipal } from "../auth/principal.js"
import { BadRequest, Conflict, Forbidden, NotFound } from "../platform/errors.js"
import { Clock } from "../platform/Clock.js"
import { Db, type Sql, type Tx } from "../platform/Db.js"

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

interface KeyRow {
  readonly id: number
  readonly name: string
  readonly prefix: string
  readonly scope: Scope
  readonly status: KeyView["status"]
  readonly created_at: Date
  readonly created_by_user_id: number | null
  readonly expires_at: Date | null
  readonly last_used_at: Date | null
  readonly last_used_ip: string | null
  readonly revoked_at: Date | null
  readonly revoked_reason: string | null
}

const iso = (d: Date | null) => (d === null ? null : d.toISOString())

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

// Status is derived, never stored: an expiry passes without anyone writing it down.
const columns = (sql: Sql | Tx, now: Date) => sql`
  id, name, prefix, scope, created_at, created_by_user_id, expires_at, last_used_at, last_used_ip, revoked_at, revoked_reason,
  case when revoked_at is not null then 'revoked' when expires_at is not null and expires_at <= ${now} then 'expired' else 'active' end as status`

export interface Actor {
  readonly tenantId: number
  readonly userId: number
  readonly ip: string
  readonly userAgent: string | undefined
}

export const listKeys = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const rows = yield* Effect.promise(() => sql<KeyRow[]>`select ${columns(sql, clock.now())} from api_keys where tenant_id = ${tenantId} order by id desc`)
    return rows.map(view)
  })

/** A key asked for without a scope reads only: more power is asked for by name. */
export const DEFAULT_KEY_SCOPE: Scope = "read"

/** An admin key does what only owners and admins may, so only they may mint one. */
export const mayMint = (role: UserPrincipal["role"], scope: Scope): boolean => scope !== "admin" || role !== "member"

export const createKey = (actor: Actor & { readonly role: UserPrincipal["role"] }, input: { name: string; scope: Scope; expiresAt: Date | null }) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const now = clock.now()
    if (!mayMint(actor.role, input.scope))
      return yield* Effect.fail(new Forbidden({ message: "only workspace owners and admins may create admin-scope API keys" }))
    if (input.expiresAt !== null && input.expiresAt <= now)
      return yield* Effect.fail(new BadRequest({ code: "VALIDATION_FAILED", field: "expires_at", message: "expires_at must be in the future" }))
    const secret = newSecret()
    const created = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          // The workspace row serialises concurrent creates, so the cap holds under a race.
          await tx`select id from tenants where id = ${actor.tenantId} for update`
          const [{ active }] = await tx<[{ active: number }]>`
            select count(*)::int as active from api_keys
            where tenant_id = ${actor.tenantId} and revoked_at is null and (expires_at is null or expires_at > ${now})`
          if (active >= MAX_ACTIVE_KEYS) return undefined
          const [row] = await tx<[KeyRow]>`
            insert into api_keys (tenant_id, name, prefix, secret_sha256, scope, created_at, created_by_user_id, expires_at)
            values (${actor.tenantId}, ${input.name}, ${secret.slice(0, API_KEY_PREFIX.length + PREFIX_CHARS)}, ${sha256(secret)},
                    ${input.scope}, ${now}, ${actor.userId}, ${input.expiresAt})
            returning ${columns(tx, now)}`
          await tx`
            insert into api_key_events (tenant_id, key_id, action, actor_user_id, ip, user_agent, at)
            values (${actor.tenantId}, ${row.id}, 'created', ${actor.userId}, ${actor.ip}, ${actor.userAgent ?? null}, ${now})`
          return row
        }) as Promise<KeyRow | undefined>,
    )
    if (!created)
      return yield* Effect.fail(
        new BadRequest({ code: "API_KEY_LIMIT_REACHED", message: `a workspace may have at most ${MAX_ACTIVE_KEYS} active API keys; revoke one first` }),
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
          const [row] = await tx<[KeyRow?]>`
            update api_keys set revoked_at = ${now}, revoked_reason = ${reason}, revoked_by_user_id = ${actor.userId}
            where id = ${keyId} and tenant_id = ${actor.tenantId} and revoked_at is null
            returning ${columns(tx, now)}`
          if (row)
            await tx`
              insert into api_key_events (tenant_id, key_id, action, actor_user_id, ip, user_agent, at)
              values (${actor.tenantId}, ${keyId}, 'revoked', ${actor.userId}, ${actor.ip}, ${actor.userAgent ?? null}, ${now})`
          return row
        }) as Promise<KeyRow | undefined>,
    )
    if (revoked) {
      yield* Effect.promise(() => auth.invalidate({ kind: "api_key", keyId }))
      return view(revoked)
    }
    // Revoking a revoked key changes nothing; a key outside the workspace does not exist.
    const [existing] = yield* Effect.promise(() => sql<[KeyRow?]>`select ${columns(sql, now)} from api_keys where id = ${keyId} and tenant_id = ${actor.tenantId}`)
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
          const [row] = await tx<[{ id: number }?]>`
            delete from api_keys where id = ${keyId} and tenant_id = ${actor.tenantId} and revoked_at is not null returning id`
          if (row)
            await tx`
              insert into api_key_events (tenant_id, key_id, action, actor_user_id, ip, user_agent, at)
              values (${actor.tenantId}, ${keyId}, 'deleted', ${actor.userId}, ${actor.ip}, ${actor.userAgent ?? null}, ${now})`
          return row !== undefined
        }) as Promise<boolean>,
    )
    if (deleted) return { deleted: true, id: keyId }
    const [existing] = yield* Effect.promise(() => sql<[{ id: number }?]>`select id from api_keys where id = ${keyId} and tenant_id = ${actor.tenantId}`)
    if (!existing) return yield* Effect.fail(new NotFound({ message: `API key ${keyId} not found` }))
    return yield* Effect.fail(new Conflict({ code: "KEY_NOT_REVOKED", message: "revoke the key before deleting it" }))
  })
