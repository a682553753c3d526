// authenticate: who is calling a `jwt` or `jwt-only` route, learnt while the body is held
// (the server pauses it before attaching the reader), so an anonymous client cannot make it read.
import type { AuthRequirement } from "../../src/auth/authenticator.js"
import { routePermission } from "../../src/auth/permissions.js"
import type { Principal } from "../../src/auth/principal.js"
import type { DomainError } from "../../src/platform/errors.js"
import type { AnyRoute } from "../route.js"

/** The credential check threw or rejected: a defect (or a database timeout), not a refusal. */
export class LookupFailed {
  constructor(readonly cause: unknown) {}
}

/** The caller: a principal, the refusal to answer with, or a lookup that failed. */
export type Caller = Principal | DomainError | LookupFailed

/**
 * What a route asks of its caller: undefined for `public` and `system` routes; otherwise the
 * route's permission, or its method's default (src/auth/permissions.ts).
 */
export function authRequirement(route: AnyRoute, method: string): AuthRequirement | undefined {
  if (route.auth !== "jwt" && route.auth !== "jwt-only") return undefined
  return { level: route.auth, permission: routePermission(route.permission, method) }
}

/**
 * Runs the check and calls `release` (which resumes a held body) before the caller is known to
 * the next step. A cached credential answers synchronously: the hot path waits on no promise.
 */
export function authenticate(
  check: () => Principal | DomainError | Promise<Principal | DomainError>,
  release: () => void,
): Caller | Promise<Caller> {
  let checked: Principal | DomainError | Promise<Principal | DomainError>
  try {
    checked = check()
  } catch (e) {
    release()
    return new LookupFailed(e)
  }
  if (!(checked instanceof Promise)) {
    release()
    return checked
  }
  return checked.then(
    (p) => {
      release()
      return p
    },
    (e: unknown) => {
      release()
      return new LookupFailed(e)
    },
  )
}
