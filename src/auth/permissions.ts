// Who may do what: the one permission table. Every route of the table declares a permission (by
// default read for GET and HEAD, write otherwise); this table says which roles hold it and which
// API-key scope does. The router checks it before a handler runs, the console hides what a role
// may not do from the same table (GET /auth/me lists the caller's permissions), and
// test/auth/permissions.test.ts walks every route with every role.

/** An API key's scope (spec section 5): read, write (read plus changes), admin (write plus destruction). */
export type Scope = "read" | "write" | "admin"

export const SCOPE_RANK: Readonly<Record<Scope, number>> = { read: 0, write: 1, admin: 2 }

/** A workspace member's role. One owner per workspace (it pays; ownership is transferred). */
export const ROLES = ["owner", "admin", "supervisor", "analyst"] as const
export type Role = (typeof ROLES)[number]

export const PERMISSIONS = ["read", "supervise", "write", "admin", "owner"] as const
export type Permission = (typeof PERMISSIONS)[number]

interface Grant {
  /** The roles that hold the permission. */
  readonly roles: ReadonlyArray<Role>
  /** The least API-key scope that holds it; null: only a signed-in user (the owner) may. */
  readonly keyScope: Scope | null
  readonly means: string
}

export const PERMISSION_TABLE: Readonly<Record<Permission, Grant>> = {
  read: {
    roles: ["owner", "admin", "supervisor", "analyst"],
    keyScope: "read",
    means: "read anything of the workspace: campaigns, runs, results, calls, reports, the wallet",
  },
  supervise: {
    roles: ["owner", "admin", "supervisor"],
    keyScope: "write",
    means: "work live calls: decide approvals, give the agent feedback on its lines",
  },
  write: {
    roles: ["owner", "admin"],
    keyScope: "write",
    means: "set things up: campaigns, audiences, runs, numbers, personas, rules, data sources",
  },
  admin: {
    roles: ["owner", "admin"],
    keyScope: "admin",
    means: "destructive actions and settings: delete, retire, release, erase, members, webhooks, money settings",
  },
  owner: {
    roles: ["owner"],
    keyScope: null,
    means: "transfer ownership of the workspace",
  },
}

/** The permission a route declares, or its method's default. */
export const routePermission = (declared: Permission | undefined, method: string): Permission =>
  declared ?? (method === "GET" || method === "HEAD" ? "read" : "write")

export const roleMay = (role: Role, permission: Permission): boolean =>
  PERMISSION_TABLE[permission].roles.includes(role)

export const keyMay = (scope: Scope, permission: Permission): boolean => {
  const need = PERMISSION_TABLE[permission].keyScope
  return need !== null && SCOPE_RANK[scope] >= SCOPE_RANK[need]
}

/** The permissions a role holds, for the console (GET /auth/me). */
export const permissionsOf = (role: Role): ReadonlyArray<Permission> => PERMISSIONS.filter((p) => roleMay(role, p))

/**
 * The most an API key made by this role may do: a key must not hold more than its maker. A
 * supervisor's decisions need a write key, which would also set things up, so supervisors and
 * analysts mint read keys.
 */
export const KEY_CEILING: Readonly<Record<Role, Scope>> = {
  owner: "admin",
  admin: "admin",
  supervisor: "read",
  analyst: "read",
}

/** The role rank for "at or below": owner 3, admin 2, supervisor 1, analyst 0. */
export const ROLE_RANK: Readonly<Record<Role, number>> = { owner: 3, admin: 2, supervisor: 1, analyst: 0 }
