// The permission table applied to a caller: the router's check before a handler runs, and the
// same check inside a handler whose body asks for more than its route (archiving rules by PUT or
// by an import that replaces them is an admin's, like DELETE).
import { Effect } from "effect"
import { Forbidden } from "../platform/errors.js"
import { keyMay, PERMISSION_TABLE, type Permission, roleMay } from "./permissions.js"
import type { Principal } from "./principal.js"

/** Why the caller may not do what needs `permission`, or undefined when they may. */
export function refusal(p: Principal, permission: Permission, what?: string): Forbidden | undefined {
  const grant = PERMISSION_TABLE[permission]
  const doing = what === undefined ? "this" : what
  if (p.kind === "api_key") {
    if (keyMay(p.scope, permission)) return undefined
    return new Forbidden(
      grant.keyScope === null
        ? { code: "API_KEY_NOT_ALLOWED", message: `only the workspace's owner, signed in, may do ${doing}` }
        : {
            code: "INSUFFICIENT_SCOPE",
            message:
              `this API key has scope ${p.scope}; ` +
              `${doing === "this" ? "the endpoint" : doing} needs ${grant.keyScope}`,
          },
    )
  }
  if (roleMay(p.role, permission)) return undefined
  return new Forbidden({
    code: "INSUFFICIENT_ROLE",
    message: `your role (${p.role}) may not do ${doing}; it needs ${grant.roles.join(" or ")}`,
  })
}

/** Fails with the refusal when the caller lacks `permission` for `what`. */
export const requirePermission = (
  p: Principal,
  permission: Permission,
  what: string,
): Effect.Effect<void, Forbidden> => {
  const refused = refusal(p, permission, what)
  return refused === undefined ? Effect.void : Effect.fail(refused)
}
