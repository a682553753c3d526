// Who is calling: a logged-in user (JWT by bearer or session cookie) or an API key, always
// inside one tenant. Handlers scope every query by principal.tenantId.

import type { AuditActor } from "../audit/audit.repo.js"
import type { Role, Scope } from "./permissions.js"

export { SCOPE_RANK, type Scope } from "./permissions.js"

export interface UserPrincipal {
  readonly kind: "user"
  readonly userId: number
  readonly tenantId: number
  readonly role: Role
  readonly email: string
  readonly jti: string
  /** Unix seconds. */
  readonly expiresAt: number
  readonly via: "bearer" | "cookie"
}

export interface KeyPrincipal {
  readonly kind: "api_key"
  readonly keyId: number
  readonly tenantId: number
  readonly scope: Scope
  readonly expiresAt: Date | null
}

export type Principal = UserPrincipal | KeyPrincipal

/** Who did something, as records name them: "user:<id>" or "key:<id>". */
export const actorOf = (p: Principal): string => (p.kind === "user" ? `user:${p.userId}` : `key:${p.keyId}`)

/** The audit log's name for a caller: a user with their address and role, or an API key with its scope. */
export const auditActorOf = (p: Principal, ip: string | null): AuditActor =>
  p.kind === "user"
    ? { tenantId: p.tenantId, actor: actorOf(p), email: p.email, role: p.role, ip }
    : { tenantId: p.tenantId, actor: actorOf(p), email: null, role: `key:${p.scope}`, ip }

/** Messages that make every api process forget what it cached about a credential. */
export type Invalidation =
  | { readonly kind: "session"; readonly jti: string }
  | { readonly kind: "user"; readonly userId: number }
  | { readonly kind: "api_key"; readonly keyId: number }
