// The permission table, walked: every signed-in route of the route table, called by every role of
// one workspace and by an API key of every scope, answers exactly as src/auth/permissions.ts says
// (403 with the right code where the caller may not, anything but such a 403, and never a 5xx,
// where it may); without credentials, 401. /openapi.json documents the same table, and so does
// the README's table (so neither can drift from the code).
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { AnyRoute } from "../../api/route.js"
import { routeTable } from "../../api/routes/index.js"
import { PERMISSION_TABLE, PERMISSIONS, type Role, routePermission, type Scope } from "../../src/auth/permissions.js"
import { PROJECT_ROOT } from "../../src/platform/paths.js"
import { api, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

/** An id no row has: every path parameter of the walk. */
const MISSING_ID = "999999999"
const PERMISSION_CODES = ["INSUFFICIENT_ROLE", "INSUFFICIENT_SCOPE", "API_KEY_NOT_ALLOWED"] as const
type PermissionCode = (typeof PERMISSION_CODES)[number]
/** Spelled here rather than taken from the code under test. */
const SCOPE_ORDER: ReadonlyArray<Scope> = ["read", "write", "admin"]
const REQUEST_TIMEOUT_MS = 15_000

type Caller =
  | { readonly name: string; readonly kind: "user"; readonly role: Role; readonly token: string }
  | { readonly name: string; readonly kind: "key"; readonly scope: Scope; readonly token: string }

const signedIn = routeTable().filter((r) => r.auth === "jwt" || r.auth === "jwt-only")

// POST /members/leave is walked last, in its own test: a member who may leave would be gone
// for the rest of the walk.
const LEAVE = "POST /members/leave"
const opOf = (r: AnyRoute) => `${r.method} ${r.path}`

/** The refusal the table calls for, or undefined when the caller may. */
function expectedRefusal(r: AnyRoute, caller: Caller): PermissionCode | undefined {
  const grant = PERMISSION_TABLE[routePermission(r.permission, r.method)]
  if (caller.kind === "user") return grant.roles.includes(caller.role) ? undefined : "INSUFFICIENT_ROLE"
  if (r.auth === "jwt-only" || grant.keyScope === null) return "API_KEY_NOT_ALLOWED"
  return SCOPE_ORDER.indexOf(caller.scope) >= SCOPE_ORDER.indexOf(grant.keyScope) ? undefined : "INSUFFICIENT_SCOPE"
}

interface Answer {
  readonly status: number
  readonly code: string | undefined
  /** The start of the body, for failure messages. */
  readonly excerpt: string
}

let srv: TestServer
let a: ReturnType<typeof api>
let owner: Session
const callers: Caller[] = []

/**
 * Calls a route as the walk does: path parameters are an id no row has, `{}` is the body of a
 * POST, PUT or PATCH. An event stream is aborted once its head arrived; redirects are not followed.
 */
async function send(r: AnyRoute, token: string | undefined): Promise<Answer> {
  const path = r.path.replace(/\{[^}]+\}/g, MISSING_ID)
  const hasBody = r.method === "POST" || r.method === "PUT" || r.method === "PATCH"
  const abort = new AbortController()
  const timer = setTimeout(() => abort.abort(new Error(`no answer in ${REQUEST_TIMEOUT_MS} ms`)), REQUEST_TIMEOUT_MS)
  try {
    const res = await fetch(srv.url + path, {
      method: r.method,
      redirect: "manual",
      signal: abort.signal,
      headers: {
        ...(hasBody && { "content-type": "application/json" }),
        ...(token !== undefined && { authorization: `Bearer ${token}` }),
      },
      ...(hasBody && { body: "{}" }),
    })
    if ((res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
      abort.abort()
      return { status: res.status, code: undefined, excerpt: "(an event stream, aborted)" }
    }
    const text = await res.text()
    let code: string | undefined
    try {
      code = (JSON.parse(text) as { code?: string }).code
    } catch {
      code = undefined
    }
    return { status: res.status, code, excerpt: text.slice(0, 160) }
  } catch (e) {
    return { status: 0, code: undefined, excerpt: `request failed: ${(e as Error).message}` }
  } finally {
    clearTimeout(timer)
  }
}

/** Runs `fn` over `items`, at most `width` at a time. */
async function pool<T>(items: ReadonlyArray<T>, width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const worker = async () => {
    while (next < items.length) await fn(items[next++]!)
  }
  await Promise.all(Array.from({ length: width }, worker))
}

/** What is wrong with `got` for this caller on this route, or undefined when it is as the table says. */
function mismatch(r: AnyRoute, caller: Caller, got: Answer): string | undefined {
  const want = expectedRefusal(r, caller)
  const perm = routePermission(r.permission, r.method)
  const gotText = `got ${got.status}${got.code === undefined ? "" : ` ${got.code}`}: ${got.excerpt}`
  const where = `${opOf(r)} (${r.auth}, ${perm}) as ${caller.name}`
  if (want !== undefined)
    return got.status === 403 && got.code === want ? undefined : `${where}: expected 403 ${want}, ${gotText}`
  const refused = got.status === 403 && (PERMISSION_CODES as ReadonlyArray<string>).includes(got.code ?? "")
  if (refused || got.status === 401 || got.status === 0 || got.status >= 500)
    return `${where}: expected to be let through (not 401, not a permission 403, not 5xx), ${gotText}`
  return undefined
}

async function walk(caller: Caller, routes: ReadonlyArray<AnyRoute>): Promise<string[]> {
  const failures: string[] = []
  await pool(routes, 4, async (r) => {
    const wrong = mismatch(r, caller, await send(r, caller.token))
    if (wrong !== undefined) failures.push(wrong)
  })
  return failures.sort()
}

/** How GET /auth/me answers the caller: "owner: 200", "analyst: 403 ACCOUNT_INACTIVE". */
const stillWorks = async (caller: Caller) => {
  const res = await a.call("GET", "/auth/me", { token: caller.token })
  if (res.status === 200) return `${caller.name}: 200`
  return `${caller.name}: ${res.status} ${((await res.json()) as { code?: string }).code}`
}

beforeAll(async () => {
  srv = await sharedTestServer()
  a = api(srv)
  owner = await a.signup()
  const members = await Promise.all(
    (["admin", "supervisor", "analyst"] as const).map(async (role) => ({ role, s: await a.addMember(owner, role) })),
  )
  callers.push({ name: "owner", kind: "user", role: "owner", token: owner.token })
  for (const { role, s } of members) callers.push({ name: role, kind: "user", role, token: s.token })
  for (const scope of SCOPE_ORDER) {
    const key = await a.createKey(owner, { name: `walk ${scope}`, scope })
    callers.push({ name: `${scope} API key`, kind: "key", scope, token: key.secret })
  }
})
afterAll(async () => srv?.stop())

describe("every signed-in route, walked by every role and every key scope", () => {
  it("the walk covers the table: signed-in routes of every permission but owner", () => {
    expect(signedIn.length).toBeGreaterThan(50)
    expect(signedIn.map(opOf)).toContain(LEAVE)
    const declared = new Set(signedIn.map((r) => routePermission(r.permission, r.method)))
    // owner (a transfer) is asked for inside PATCH /members/{user_id}, not declared by a route.
    expect([...declared].sort()).toEqual(PERMISSIONS.filter((p) => p !== "owner").sort())
  })

  for (const name of ["owner", "admin", "supervisor", "analyst", "read API key", "write API key", "admin API key"])
    it(`${name}: refused exactly where the table says, let through elsewhere, never a 5xx`, async () => {
      const caller = callers.find((c) => c.name === name)!
      const routes = caller.kind === "user" ? signedIn.filter((r) => opOf(r) !== LEAVE) : signedIn
      expect(await walk(caller, routes)).toEqual([])
    })

  it("without credentials: 401 on every signed-in route", async () => {
    const failures: string[] = []
    await pool(signedIn, 4, async (r) => {
      const got = await send(r, undefined)
      if (got.status !== 401)
        failures.push(`${opOf(r)} without credentials: expected 401, got ${got.status}: ${got.excerpt}`)
    })
    expect(failures.sort()).toEqual([])
  })

  it("leaves every session and key working", async () => {
    expect(await Promise.all(callers.map(stillWorks))).toEqual(callers.map((c) => `${c.name}: 200`))
  })
})

describe("the table's facts, as a supervisor and an analyst meet them", () => {
  const as = (name: string) => callers.find((c) => c.name === name)!.token
  const codeOf = async (res: Response) => ({ status: res.status, code: ((await res.json()) as { code?: string }).code })

  it("a supervisor decides approvals and gives feedback, but sets nothing up", async () => {
    const decide = await a.call("POST", `/api/approvals/${MISSING_ID}/decide`, {
      token: as("supervisor"),
      body: { decision: "approve" },
    })
    expect(await codeOf(decide)).toMatchObject({ status: 404 })
    const feedback = await a.call("POST", "/kb/feedback", {
      token: as("supervisor"),
      body: { turn_id: Number(MISSING_ID), verdict: "ban" },
    })
    expect(await codeOf(feedback)).toMatchObject({ status: 404 })
    const create = await a.call("POST", "/api/workflows", {
      token: as("supervisor"),
      body: { nl_prompt: "Check in with our customers." },
    })
    expect(await codeOf(create)).toEqual({ status: 403, code: "INSUFFICIENT_ROLE" })
  })

  it("an analyst reads workflows but decides no approval", async () => {
    const list = await a.call("GET", "/api/workflows", { token: as("analyst") })
    expect(list.status).toBe(200)
    const decide = await a.call("POST", `/api/approvals/${MISSING_ID}/decide`, {
      token: as("analyst"),
      body: { decision: "approve" },
    })
    expect(await codeOf(decide)).toEqual({ status: 403, code: "INSUFFICIENT_ROLE" })
  })
})

describe("the table, as documented", () => {
  it("/openapi.json gives each signed-in operation its x-permission, x-roles and key scope", async () => {
    const doc = (await (await a.call("GET", "/openapi.json")).json()) as {
      paths: Record<string, Record<string, Record<string, unknown>>>
    }
    const got = signedIn.map((r) => {
      const op = doc.paths[r.path]?.[r.method.toLowerCase()] ?? {}
      return {
        op: opOf(r),
        permission: op["x-permission"],
        roles: op["x-roles"],
        scope: op["x-required-scope"],
      }
    })
    const want = signedIn.map((r) => {
      const permission = routePermission(r.permission, r.method)
      const { roles, keyScope } = PERMISSION_TABLE[permission]
      return {
        op: opOf(r),
        permission,
        roles,
        scope: r.auth === "jwt" && keyScope !== null ? keyScope : undefined,
      }
    })
    expect(got).toEqual(want)
  })

  it("the README's table of permissions is PERMISSION_TABLE", () => {
    const readme = readFileSync(join(PROJECT_ROOT, "README.md"), "utf8")
    const section = readme.split("\n## Team roles and permissions\n")[1]?.split("\n## ")[0]
    expect(section, "README.md has a section '## Team roles and permissions'").toBeDefined()
    const rows = section!
      .split("\n")
      .filter((l) => l.startsWith("|"))
      .map((l) =>
        l
          .slice(1, -1)
          .split("|")
          .map((cell) => cell.trim().replaceAll("`", "")),
      )
    expect(rows[0]).toEqual(["Permission", "What it means", "Roles", "Least API-key scope"])
    const table = Object.fromEntries(
      rows
        .slice(2)
        .map(([permission, means, roles, scope]) => [
          permission,
          { roles: roles!.split(", "), keyScope: scope!.startsWith("none") ? null : scope, means },
        ]),
    )
    expect(table).toEqual(PERMISSION_TABLE)
    expect(Object.keys(table)).toEqual([...PERMISSIONS])
  })
})

describe("leaving, walked last (a member who may leave is gone afterwards)", () => {
  it("POST /members/leave: the owner stays (409), every other member may leave; the rest keep working", async () => {
    const leave = signedIn.find((r) => opOf(r) === LEAVE)!
    const users = callers.filter((c) => c.kind === "user")
    const failures: string[] = []
    for (const caller of users) {
      const got = await send(leave, caller.token)
      const wrong = mismatch(leave, caller, got)
      if (wrong !== undefined) failures.push(wrong)
      if (caller.role === "owner" && got.status !== 409)
        failures.push(`${LEAVE} as owner: expected 409, got ${got.status}: ${got.excerpt}`)
      if (caller.role !== "owner" && got.status !== 200)
        failures.push(`${LEAVE} as ${caller.name}: expected 200, got ${got.status}: ${got.excerpt}`)
    }
    expect(failures).toEqual([])
    const stay = callers.filter((c) => c.kind === "key" || c.role === "owner")
    expect(await Promise.all(stay.map(stillWorks))).toEqual(stay.map((c) => `${c.name}: 200`))
    // A member who left is deactivated: their token is refused as an inactive account's.
    const gone = users.filter((c) => c.role !== "owner")
    expect(await Promise.all(gone.map(stillWorks))).toEqual(gone.map((c) => `${c.name}: 403 ACCOUNT_INACTIVE`))
  })
})
