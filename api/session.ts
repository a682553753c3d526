// The session cookie as the spec names it (svc_session: HttpOnly, Secure), plus the helpers
// handlers use to read who is calling.
import { Effect } from "effect"
import { API_KEY_PREFIX, parseCookies, SESSION_COOKIE } from "../src/auth/authenticator.js"
import { SESSION_SECONDS } from "../src/auth/jwt.js"
import type { Principal, UserPrincipal } from "../src/auth/principal.js"
import { ValidationFailed } from "../src/platform/errors.js"

export const sessionCookie = (token: string): string =>
  `${SESSION_COOKIE}=${token}; Path=/; Max-Age=${SESSION_SECONDS}; HttpOnly; Secure; SameSite=Lax`

export const clearedSessionCookie = (): string =>
  `${SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Lax`

/** The session token a request presents (bearer JWT or cookie), if any; API keys are not sessions. */
export function presentedSession(headers: Readonly<Record<string, string>>): string | undefined {
  const bearer = /^Bearer +(\S+)\s*$/i.exec(headers["authorization"] ?? "")?.[1]
  if (bearer !== undefined) return bearer.startsWith(API_KEY_PREFIX) ? undefined : bearer
  return parseCookies(headers["cookie"])[SESSION_COOKIE] || undefined
}

/** The user behind a `jwt-only` route (the router guarantees one). */
export const userOf = (principal: Principal | undefined): Effect.Effect<UserPrincipal> =>
  principal?.kind === "user"
    ? Effect.succeed(principal)
    : Effect.dieMessage("route declared jwt-only ran without a user")

/** The caller of a `jwt` or `jwt-only` route (the router guarantees one). */
export const callerOf = (principal: Principal | undefined): Effect.Effect<Principal> =>
  principal ? Effect.succeed(principal) : Effect.dieMessage("authenticated route ran without a principal")

/** The workspace a `system` request names in X-Tenant-Id; 422 on that header when it names none. */
export const systemTenantOf = (tenantId: number | undefined): Effect.Effect<number, ValidationFailed> =>
  tenantId === undefined
    ? Effect.fail(
        new ValidationFailed({
          message: "X-Tenant-Id is required",
          errors: [{ field: "X-Tenant-Id", message: "is required" }],
        }),
      )
    : Effect.succeed(tenantId)
