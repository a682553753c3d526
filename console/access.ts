// Who is signed in and what their role may do (GET /auth/me's `permissions`), for pages to hide the
// actions it may not take. Hiding is only courtesy: the API refuses them anyway (403 INSUFFICIENT_ROLE).
import { createContext } from "preact"
import { useContext } from "preact/hooks"

/** The API's permissions (src/auth/permissions.ts): each role holds some of them. */
export type Permission = "read" | "supervise" | "write" | "admin" | "owner"

export type Role = "owner" | "admin" | "supervisor" | "analyst"

export interface Me {
  readonly user: {
    readonly id: number
    readonly email: string
    readonly full_name?: string | null
    readonly role: Role
    /** false until the address is confirmed (the emailed link or a code sign-in): a banner says so. */
    readonly email_verified?: boolean
  } | null
  readonly tenant?: { readonly id: number; readonly name: string; readonly currency?: string } | null
  readonly expires_at?: string | null
  readonly permissions?: ReadonlyArray<Permission>
}

export interface Access {
  readonly me: Me
  /** Reads /auth/me again (after a change to the signed-in person's own role or membership). */
  readonly refresh: () => Promise<void>
}

export const AccessContext = createContext<Access | undefined>(undefined)

/** Whether `me` holds `permission`. */
export const holds = (me: Me, permission: Permission): boolean => me.permissions?.includes(permission) ?? false

/** The signed-in person, `can(permission)` and `refresh()`, inside the signed-in shell. */
export function useAccess() {
  const access = useContext(AccessContext)
  if (access === undefined) throw new Error("useAccess outside the signed-in console")
  return { ...access, can: (p: Permission) => holds(access.me, p) }
}

/** A role with its article, for sentences: "an admin", "a supervisor". */
export const aRole = (role: string): string => `${/^[aeiou]/.test(role) ? "an" : "a"} ${role}`
