// Turns a request's credentials into a principal. Lookups are cached per process for a short
// time; revocation, logout and deactivation publish an invalidation on the bus that every api
// process applies at once (the TTL only bounds staleness if a bus message is ever lost).
import { createHash, hash } from "node:crypto"
import type { Logger } from "pino"
import type { BusClient } from "../platform/bus/bus.js"
import type { WallClock } from "../platform/Clock.js"
import type { Config } from "../platform/config.js"
import type { Sql } from "../platform/Db.js"
import { type DomainError, Forbidden, Unauthenticated } from "../platform/errors.js"
import { AUTH_INVALIDATE_SUBJECT } from "../platform/subjects.js"
import { refusal } from "./authorize.js"
import { findKeyBySecret, findSession, type KeyRow, type SessionRow } from "./credentials.repo.js"
import type { JwtKeys } from "./jwt.js"
import type { Permission } from "./permissions.js"
import type { Invalidation, KeyPrincipal, Principal, UserPrincipal } from "./principal.js"

export const SESSION_COOKIE = "svc_session"
export const API_KEY_PREFIX = "svc_live_"

const POSITIVE_TTL_MS = 30_000
/**
 * How long after the last acknowledgement an invalidation waits for more: other api processes
 * answer within milliseconds, but a loaded machine can stretch that; revocations are rare.
 */
const INVALIDATION_STALL_MS = 200
const NEGATIVE_TTL_MS = 5_000
const CACHE_LIMIT = 50_000

/** One API key's last use since the previous flush (`at` in ISO 8601). */
export type KeyUse = { readonly id: number; readonly at: string; readonly ip: string }

/**
 * Writes a batch of API keys' last uses. A port: src/keys owns the api_keys table and provides the
 * writer (KeyUseLog in Auth.ts, wired by src/main), so auth imports nothing of keys.
 */
export type RecordKeyUses = (sql: Sql, uses: readonly KeyUse[]) => Promise<void>

export interface AuthRequest {
  readonly method: string
  readonly headers: Readonly<Record<string, string>>
  /** The client's address (behind a trusted proxy, the forwarded one). */
  readonly clientIp: string
}

export interface AuthRequirement {
  /** `jwt`: a user or an API key; `jwt-only`: a user (API keys get 403). */
  readonly level: "jwt" | "jwt-only"
  /** What the caller must hold, by role or by key scope (src/auth/permissions.ts). */
  readonly permission: Permission
}

interface Cached<T> {
  readonly at: number
  readonly value: T
}

/** A Map that forgets its oldest entries past a size, so a flood of bogus tokens can't grow it. */
class BoundedMap<K, V> extends Map<K, V> {
  override set(key: K, value: V): this {
    if (this.size >= CACHE_LIMIT && !this.has(key)) this.delete(this.keys().next().value as K)
    return super.set(key, value)
  }
}

export const sha256 = (s: string): Buffer => createHash("sha256").update(s).digest()

export function parseCookies(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {}
  if (!header) return out
  for (const part of header.split(";")) {
    const i = part.indexOf("=")
    if (i <= 0) continue
    const name = part.slice(0, i).trim()
    const raw = part.slice(i + 1).trim()
    try {
      out[name] = decodeURIComponent(raw)
    } catch {
      out[name] = raw
    }
  }
  return out
}

export class Authenticator {
  private readonly sessions = new BoundedMap<string, Cached<SessionRow | undefined>>()
  private readonly keys = new BoundedMap<string, Cached<KeyRow | undefined>>()
  private readonly keyUses = new Map<number, { at: number; ip: string }>()
  private readonly listeners = new Set<(inv: Invalidation) => void>()

  constructor(
    private readonly deps: {
      readonly sql: Sql
      readonly bus: BusClient
      readonly jwt: JwtKeys
      readonly clock: WallClock
      readonly config: Pick<Config, "allowedOrigins" | "publicBaseUrl">
      readonly log: Logger
      readonly recordKeyUses: RecordKeyUses
    },
  ) {}

  get jwt(): JwtKeys {
    return this.deps.jwt
  }

  /**
   * Answers synchronously when the credential's lookup is cached (the common case for API keys),
   * so a hot request never waits on a promise; otherwise a promise.
   */
  authenticate(req: AuthRequest, need: AuthRequirement): Principal | DomainError | Promise<Principal | DomainError> {
    const auth = req.headers["authorization"]
    if (auth !== undefined) {
      const m = /^Bearer +(\S+)\s*$/i.exec(auth)
      if (!m) return new Unauthenticated({ message: "Authorization must be 'Bearer <token>'" })
      const token = m[1]!
      if (token.startsWith(API_KEY_PREFIX)) {
        const found = this.apiKey(token, req.clientIp)
        return found instanceof Promise ? found.then((p) => this.authorize(p, need)) : this.authorize(found, need)
      }
      return this.session(token, "bearer").then((p) => this.authorize(p, need))
    }
    const cookie = parseCookies(req.headers["cookie"])[SESSION_COOKIE]
    if (cookie === undefined || cookie === "")
      return new Unauthenticated({ message: "sign in, or send an API key as 'Authorization: Bearer svc_live_…'" })
    return this.session(cookie, "cookie").then((p) => {
      if (!(p instanceof Error) && !SAFE_METHODS.has(req.method)) {
        const csrf = this.checkOrigin(req)
        if (csrf) return csrf
      }
      return this.authorize(p, need)
    })
  }

  private authorize(p: Principal | DomainError, need: AuthRequirement): Principal | DomainError {
    if (p instanceof Error) return p
    if (p.kind === "api_key") {
      if (need.level === "jwt-only")
        return new Forbidden({
          code: "API_KEY_NOT_ALLOWED",
          message: "this endpoint needs a signed-in user; API keys are not accepted",
        })
    }
    return refusal(p, need.permission) ?? p
  }

  /** Cookie-authenticated state changes must come from an allowed origin (CSRF). */
  private checkOrigin(req: AuthRequest): DomainError | undefined {
    const origin = req.headers["origin"] ?? originOf(req.headers["referer"])
    const host = req.headers["host"]
    const allowed = new Set(this.deps.config.allowedOrigins)
    if (this.deps.config.publicBaseUrl) allowed.add(new URL(this.deps.config.publicBaseUrl).origin)
    if (host) {
      allowed.add(`http://${host}`)
      allowed.add(`https://${host}`)
    }
    if (origin !== undefined && allowed.has(origin)) return undefined
    return new Forbidden({
      code: "CSRF_REJECTED",
      message:
        origin === undefined
          ? "a cookie-authenticated change must send Origin or Referer"
          : `origin ${origin} may not make cookie-authenticated changes`,
    })
  }

  private async session(token: string, via: UserPrincipal["via"]): Promise<UserPrincipal | DomainError> {
    const now = this.deps.clock.nowMs()
    const verified = await this.deps.jwt.verify(token, Math.floor(now / 1000))
    if (!verified.ok)
      return new Unauthenticated(
        verified.reason === "expired"
          ? { code: "TOKEN_EXPIRED", message: "session expired; sign in again" }
          : { message: "invalid session token" },
      )
    const c = verified.claims
    const userId = Number(c.sub)
    let cached = this.sessions.get(c.jti)
    if (!cached || now - cached.at > (cached.value ? POSITIVE_TTL_MS : NEGATIVE_TTL_MS)) {
      const row = await findSession(this.deps.sql, userId, c.jti)
      this.sessions.set(c.jti, (cached = { at: now, value: row }))
    }
    const row = cached.value
    if (!row) return new Unauthenticated({ message: "invalid session token" })
    if (row.revoked) return new Unauthenticated({ message: "this session was signed out" })
    if (row.status !== "active" || row.tenant_status !== "active")
      return new Forbidden({ code: "ACCOUNT_INACTIVE", message: "this account is not active" })
    if (row.tenant_id !== c.tid) return new Forbidden({ message: "the user is not a member of this workspace" })
    return {
      kind: "user",
      userId,
      tenantId: row.tenant_id,
      role: row.role,
      email: c.email,
      jti: c.jti,
      expiresAt: c.exp,
      via,
    }
  }

  private apiKey(secret: string, ip: string): KeyPrincipal | DomainError | Promise<KeyPrincipal | DomainError> {
    const now = this.deps.clock.nowMs()
    // One-shot hash straight to a string: this runs on every API-key request.
    const id = hash("sha256", secret, "base64")
    const cached = this.keys.get(id)
    if (cached && now - cached.at <= (cached.value ? POSITIVE_TTL_MS : NEGATIVE_TTL_MS))
      return this.keyPrincipal(cached.value, now, ip)
    return findKeyBySecret(this.deps.sql, Buffer.from(id, "base64")).then((row) => {
      this.keys.set(id, { at: now, value: row })
      return this.keyPrincipal(row, now, ip)
    })
  }

  private keyPrincipal(row: KeyRow | undefined, now: number, ip: string): KeyPrincipal | DomainError {
    if (!row) return new Unauthenticated({ message: "invalid API key" })
    if (row.revoked) return new Unauthenticated({ code: "KEY_REVOKED", message: "this API key was revoked" })
    if (row.expires_at !== null && row.expires_at.getTime() <= now)
      return new Unauthenticated({ code: "KEY_EXPIRED", message: "this API key has expired" })
    if (row.tenant_status !== "active")
      return new Forbidden({ code: "ACCOUNT_INACTIVE", message: "this workspace is not active" })
    this.keyUses.set(row.id, { at: now, ip })
    return { kind: "api_key", keyId: row.id, tenantId: row.tenant_id, scope: row.scope, expiresAt: row.expires_at }
  }

  /**
   * Forgets the credential here, then in every other process, and resolves once each process that
   * answers has applied it (they acknowledge after applying). So when a revoke's response reaches
   * the caller, no api process that is reachable on the bus still accepts the credential; one
   * that is cut off forgets it when its cache entry expires (30 s).
   */
  async invalidate(inv: Invalidation): Promise<void> {
    this.apply(inv)
    const acks = await this.deps.bus.gather(AUTH_INVALIDATE_SUBJECT, inv, {
      stallMs: INVALIDATION_STALL_MS,
      maxWaitMs: 2_000,
    })
    if (acks.length === 0)
      this.deps.log.warn({ kind: inv.kind }, "auth invalidation: no process acknowledged (not even this one)")
  }

  /**
   * Calls `cb` with every invalidation this process applies (its own and other processes'), after
   * the cache has forgotten the credential: the HTTP server ends the streams opened with it.
   * Returns the unsubscribe.
   */
  onInvalidate(cb: (inv: Invalidation) => void): () => void {
    this.listeners.add(cb)
    return () => this.listeners.delete(cb)
  }

  /** Applies an invalidation received from the bus (or made here). */
  apply(inv: Invalidation): void {
    switch (inv.kind) {
      case "session":
        this.sessions.delete(inv.jti)
        break
      case "user":
        // Sessions are keyed by jti, so drop them all: this is rare and they reload cheaply.
        this.sessions.clear()
        break
      case "api_key":
        for (const [hash, c] of this.keys) if (c.value?.id === inv.keyId) this.keys.delete(hash)
        break
    }
    for (const cb of this.listeners) {
      try {
        cb(inv)
      } catch (e) {
        // One listener's failure must not stop the others or the acknowledgement.
        this.deps.log.error({ err: e, kind: inv.kind }, "auth invalidation listener failed")
      }
    }
  }

  /** Writes the last use of each API key since the previous flush, in one statement. */
  async flushKeyUses(): Promise<number> {
    if (this.keyUses.size === 0) return 0
    const uses = [...this.keyUses].map(([id, u]) => ({ id, at: new Date(u.at).toISOString(), ip: u.ip }))
    this.keyUses.clear()
    await this.deps.recordKeyUses(this.deps.sql, uses)
    return uses.length
  }
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"])

function originOf(referer: string | undefined): string | undefined {
  if (referer === undefined) return undefined
  try {
    return new URL(referer).origin
  } catch {
    return undefined
  }
}
