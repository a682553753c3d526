// A team in one workspace: invitations by emailed single-use link, roles that apply at once, one
// owner who transfers but never leaves, removal that ends sessions, and every change in the audit
// log. Two and more users of one workspace work side by side, each with their own role.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Session, uniqueEmail } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
let a: ReturnType<typeof api>

beforeAll(async () => {
  srv = await startTestServer({ env: { PUBLIC_BASE_URL: "http://console.test" } })
  a = api(srv)
})
afterAll(async () => srv?.stop())

const errorOf = async (res: Response) => ({ status: res.status, ...((await res.json()) as { code: string }) })
const body = async <T>(res: Response, status = 200): Promise<T> => {
  const text = await res.text()
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${text}`)
  return JSON.parse(text) as T
}
const invite = (by: Session, email: string, role: string) =>
  a.call("POST", "/members/invite", { token: by.token, body: { email, role } })
const accept = (token: string, password = "a password of my own") =>
  a.call("POST", "/auth/invitations/accept", { body: { token, password } })

interface Members {
  members: Array<{ user_id: number; email: string; role: string }>
  invitations: Array<{ id: number; email: string; role: string; status: string }>
}
const members = async (s: Session) => body<Members>(await a.call("GET", "/members", { token: s.token }))
const roleOf = async (s: Session) =>
  (await body<{ user: { role: string } }>(await a.call("GET", "/auth/me", { token: s.token }))).user.role

interface AuditEvent {
  actor: string
  actor_email: string | null
  actor_role: string | null
  ip: string | null
  action: string
  target: string | null
  before: Record<string, unknown> | null
  after: Record<string, unknown> | null
}
const audit = async (s: Session, query = "") =>
  body<{ events: AuditEvent[]; next_cursor: string | null }>(await a.call("GET", `/audit${query}`, { token: s.token }))

describe("invitations", () => {
  it("mails a single-use link that shows what it is for; the invitee joins with their own password", async () => {
    const owner = await a.signup({ full_name: "Asha" })
    const email = uniqueEmail("Sup")
    const made = await body<{ invitation: { id: number; status: string; role: string }; email_sent: boolean }>(
      await invite(owner, email, "supervisor"),
      201,
    )
    expect(made).toMatchObject({ email_sent: true, invitation: { status: "pending", role: "supervisor" } })
    const token = a.invitationToken(email)
    const mail = (await import("../../src/providers/mail/outbox.mail.js"))
      .readOutbox(srv.config.outboxFile)
      .filter((m) => m.kind === "invitation" && m.to === email.toLowerCase())
    expect(mail).toHaveLength(1)
    expect(mail[0]!.links[0]).toBe(`http://console.test/console/#/join?token=${token}`)

    const shown = await body<{ email: string; role: string; workspace: { id: number; name: string } }>(
      await a.call("POST", "/auth/invitations/inspect", { body: { token } }),
    )
    expect(shown).toMatchObject({ email: email.toLowerCase(), role: "supervisor", workspace: { id: owner.tenantId } })
    expect(shown.workspace.name).toBe("Asha's workspace")

    const joined = await accept(token)
    expect(joined.status).toBe(201)
    expect(joined.headers.get("set-cookie")).toMatch(/^svc_session=/)
    const session = (await joined.json()) as { token: string; user: { role: string; email_verified: boolean } }
    expect(session.user).toMatchObject({ role: "supervisor", email_verified: true })
    // The link works once; the invitee signs in like anyone afterwards.
    expect(await errorOf(await accept(token))).toMatchObject({ status: 400, code: "INVALID_TOKEN" })
    const again = await a.login(email, "a password of my own")
    expect(again.tenantId).toBe(owner.tenantId)
    expect(await roleOf(again)).toBe("supervisor")
    const list = await members(owner)
    expect(list.members.map((m) => [m.email, m.role])).toEqual([
      [owner.email, "owner"],
      [email.toLowerCase(), "supervisor"],
    ])
    expect(list.invitations).toEqual([])
  })

  it("refuses expired and revoked links, and a resend replaces the earlier link", async () => {
    const owner = await a.signup()
    const late = uniqueEmail("late")
    await body(await invite(owner, late, "analyst"), 201)
    const lateToken = a.invitationToken(late)
    await srv.sql`update invitations set expires_at = now() - interval '1 second' where email = ${late}`
    expect(await errorOf(await accept(lateToken))).toMatchObject({ status: 400, code: "TOKEN_EXPIRED" })
    expect((await members(owner)).invitations).toMatchObject([{ email: late, status: "expired" }])

    const twice = uniqueEmail("twice")
    await body(await invite(owner, twice, "analyst"), 201)
    const first = a.invitationToken(twice)
    await body(await invite(owner, twice, "admin"), 201)
    const second = a.invitationToken(twice)
    expect(second).not.toBe(first)
    expect(await errorOf(await accept(first))).toMatchObject({ status: 400, code: "INVALID_TOKEN" })
    const open = (await members(owner)).invitations.find((i) => i.email === twice)!
    expect(open).toMatchObject({ role: "admin", status: "pending" })
    const revoked = await body<{ status: string }>(
      await a.call("POST", `/members/invitations/${open.id}/revoke`, { token: owner.token }),
    )
    expect(revoked.status).toBe("revoked")
    expect(await errorOf(await accept(second))).toMatchObject({ status: 400, code: "INVALID_TOKEN" })
    expect(await srv.sql`select id from users where email = ${twice}`).toHaveLength(0)
  })

  it("refuses a member, another workspace's user, an unverified owner, a lower role, an owner", async () => {
    const owner = await a.signup()
    const other = await a.signup()
    const analyst = await a.addMember(owner, "analyst")
    expect(await errorOf(await invite(owner, analyst.email, "admin"))).toMatchObject({
      status: 409,
      code: "ALREADY_MEMBER",
    })
    expect(await errorOf(await invite(owner, other.email, "admin"))).toMatchObject({
      status: 409,
      code: "MEMBER_OF_ANOTHER_WORKSPACE",
    })
    expect(await errorOf(await invite(analyst, uniqueEmail(), "analyst"))).toMatchObject({
      status: 403,
      code: "INSUFFICIENT_ROLE",
    })
    const supervisor = await a.addMember(owner, "supervisor")
    expect((await errorOf(await invite(supervisor, uniqueEmail(), "analyst"))).code).toBe("INSUFFICIENT_ROLE")
    const asOwner = await errorOf(await invite(owner, uniqueEmail(), "owner"))
    expect(asOwner).toMatchObject({ status: 422, code: "VALIDATION_FAILED" })

    const unverified = await a.signup({ verify: false })
    const refused = await invite(unverified, uniqueEmail("spam"), "analyst")
    expect(await errorOf(refused)).toMatchObject({ status: 409, code: "WORKFLOW_NOT_READY" })
    expect(await srv.sql`select id from invitations where tenant_id = ${unverified.tenantId}`).toEqual([])
  })

  it("an address that joined one workspace cannot join another by an older invitation", async () => {
    const first = await a.signup()
    const second = await a.signup()
    const email = uniqueEmail("both")
    await body(await invite(first, email, "analyst"), 201)
    const one = a.invitationToken(email)
    await body(await invite(second, email, "analyst"), 201)
    const two = a.invitationToken(email)
    expect((await accept(two)).status).toBe(201)
    expect(await errorOf(await accept(one))).toMatchObject({ status: 409, code: "MEMBER_OF_ANOTHER_WORKSPACE" })
    const [user] = await srv.sql<[{ tenant_id: number }]>`select tenant_id from users where email = ${email}`
    expect(Number(user.tenant_id)).toBe(second.tenantId)
  })
})

describe("roles", () => {
  it("a role change applies to the member's next request; the owner changes only by a transfer", async () => {
    const owner = await a.signup()
    const admin = await a.addMember(owner, "admin")
    const sup = await a.addMember(owner, "supervisor")
    expect(await roleOf(sup)).toBe("supervisor")
    const changed = await body<{ role: string }>(
      await a.call("PATCH", `/members/${sup.userId}`, { token: admin.token, body: { role: "analyst" } }),
    )
    expect(changed.role).toBe("analyst")
    expect(await roleOf(sup)).toBe("analyst")
    // Analysts read; a supervisor's work is refused now.
    expect(
      await errorOf(await a.call("POST", "/kb/feedback", { token: sup.token, body: { turn_id: 1, verdict: "ban" } })),
    ).toMatchObject({ status: 403, code: "INSUFFICIENT_ROLE" })

    for (const role of ["admin", "analyst"])
      expect(
        await errorOf(await a.call("PATCH", `/members/${owner.userId}`, { token: admin.token, body: { role } })),
      ).toMatchObject({ status: 409, code: "OWNER_REQUIRED" })
    expect(
      await errorOf(await a.call("PATCH", `/members/${owner.userId}`, { token: owner.token, body: { role: "admin" } })),
    ).toMatchObject({ status: 409, code: "OWNER_REQUIRED" })
    expect(
      await errorOf(await a.call("PATCH", `/members/${admin.userId}`, { token: admin.token, body: { role: "owner" } })),
    ).toMatchObject({ status: 403, code: "INSUFFICIENT_ROLE" })
    expect(await roleOf(owner)).toBe("owner")

    // The transfer: one statement each way, in one transaction; exactly one owner after it.
    const made = await body<{ role: string }>(
      await a.call("PATCH", `/members/${admin.userId}`, { token: owner.token, body: { role: "owner" } }),
    )
    expect(made.role).toBe("owner")
    expect(await roleOf(owner)).toBe("admin")
    expect(await roleOf(admin)).toBe("owner")
    expect(
      await srv.sql`select id from users where tenant_id = ${owner.tenantId} and role = 'owner'`.then((r) =>
        r.map((x) => Number(x.id)),
      ),
    ).toEqual([admin.userId])
    expect(
      await errorOf(await a.call("PATCH", `/members/${admin.userId}`, { token: owner.token, body: { role: "owner" } })),
    ).toMatchObject({ status: 403, code: "INSUFFICIENT_ROLE" })
  })

  it("the database holds one owner per workspace whatever a caller races", async () => {
    const owner = await a.signup()
    const admin = await a.addMember(owner, "admin")
    await expect(srv.sql`update users set role = 'owner' where id = ${admin.userId}`).rejects.toThrow(/users_one_owner/)
  })

  it("another workspace's members and invitations are 404", async () => {
    const mine = await a.signup()
    const theirs = await a.signup()
    const theirMember = await a.addMember(theirs, "analyst")
    await body(await invite(theirs, uniqueEmail(), "analyst"), 201)
    const [inv] = await srv.sql<[{ id: number }]>`select id from invitations where tenant_id = ${theirs.tenantId}
      and accepted_at is null`
    for (const [method, path, b] of [
      ["PATCH", `/members/${theirMember.userId}`, { role: "admin" }],
      ["DELETE", `/members/${theirMember.userId}`, undefined],
      ["POST", `/members/invitations/${inv.id}/revoke`, undefined],
    ] as const)
      expect((await a.call(method, path, { token: mine.token, body: b })).status, `${method} ${path}`).toBe(404)
    expect(await roleOf(theirMember)).toBe("analyst")
  })
})

describe("removal and leaving", () => {
  it("a removed member's session stops at once; the owner can neither leave nor be removed", async () => {
    const owner = await a.signup()
    const admin = await a.addMember(owner, "admin")
    const sup = await a.addMember(owner, "supervisor")
    expect((await a.call("GET", "/api/workflows", { token: sup.token })).status).toBe(200)
    expect(await body(await a.call("DELETE", `/members/${sup.userId}`, { token: admin.token }))).toEqual({
      removed: true,
      user_id: sup.userId,
    })
    expect(await errorOf(await a.call("GET", "/api/workflows", { token: sup.token }))).toMatchObject({
      status: 403,
      code: "ACCOUNT_INACTIVE",
    })
    const login = await a.call("POST", "/auth/login", { body: { email: sup.email, password: sup.password } })
    expect(login.status).toBe(403)
    expect((await members(owner)).members.map((m) => m.user_id)).toEqual([owner.userId, admin.userId])

    expect(await errorOf(await a.call("DELETE", `/members/${owner.userId}`, { token: admin.token }))).toMatchObject({
      status: 409,
      code: "OWNER_REQUIRED",
    })
    expect(await errorOf(await a.call("POST", "/members/leave", { token: owner.token }))).toMatchObject({
      status: 409,
      code: "OWNER_REQUIRED",
    })
    expect(
      (await body<{ removed: boolean }>(await a.call("POST", "/members/leave", { token: admin.token }))).removed,
    ).toBe(true)
    expect((await a.call("GET", "/members", { token: admin.token })).status).toBe(403)
  })

  it("a removed member can be invited back to the same workspace", async () => {
    const owner = await a.signup()
    const analyst = await a.addMember(owner, "analyst")
    await body(await a.call("DELETE", `/members/${analyst.userId}`, { token: owner.token }))
    await body(await invite(owner, analyst.email, "supervisor"), 201)
    const back = await accept(a.invitationToken(analyst.email), "a brand new password")
    expect(back.status).toBe(201)
    const again = await a.login(analyst.email, "a brand new password")
    expect(again.userId).toBe(analyst.userId)
    expect(await roleOf(again)).toBe("supervisor")
  })
})

describe("the audit log", () => {
  it("records member, key and money changes with actor, address, before/after; owners and admins read it", async () => {
    const owner = await a.signup()
    const sup = await a.addMember(owner, "supervisor")
    await body(await a.call("PATCH", `/members/${sup.userId}`, { token: owner.token, body: { role: "analyst" } }))
    const key = await a.createKey(owner, { name: "ci", scope: "write" })
    await body(await a.call("POST", `/api-keys/${key.id}/revoke`, { token: owner.token, body: { reason: "rotated" } }))
    await body(await a.call("DELETE", `/api-keys/${key.id}`, { token: owner.token }))
    // A role-gated change without an entry of its own is logged by the pipeline once it succeeded.
    const wf = await body<{ id: number }>(
      await a.call("POST", "/api/workflows", { token: owner.token, body: { nl_prompt: "Remind customers." } }),
      201,
    )
    await body(await a.call("DELETE", `/api/workflows/${wf.id}`, { token: owner.token }))
    const { events } = await audit(owner)
    const actions = events.map((e) => e.action)
    expect(actions).toEqual(
      expect.arrayContaining([
        "member.invited",
        "member.joined",
        "member.role_changed",
        "api_key.created",
        "api_key.revoked",
        "api_key.deleted",
      ]),
    )
    const roleChange = events.find((e) => e.action === "member.role_changed")!
    expect(roleChange).toMatchObject({
      actor: `user:${owner.userId}`,
      actor_email: owner.email,
      actor_role: "owner",
      ip: "127.0.0.1",
      target: `user:${sup.userId}`,
      before: { role: "supervisor" },
      after: { role: "analyst" },
    })
    // Deleting a key keeps its trail.
    const deleted = events.find((e) => e.action === "api_key.deleted")!
    expect(deleted).toMatchObject({ target: `api_key:${key.id}`, before: { name: "ci", scope: "write" } })
    expect(await srv.sql`select id from api_keys where id = ${key.id}`).toHaveLength(0)
    expect(events.find((e) => e.action === "route.delete")).toMatchObject({
      target: `DELETE /api/workflows/${wf.id}`,
      after: { status: 200 },
    })

    // Newest first, in cursor pages; one action or a prefix.
    const page = await audit(owner, "?limit=2")
    expect(page.events).toHaveLength(2)
    expect(page.events).toEqual(events.slice(0, 2))
    const next = await audit(owner, `?limit=2&cursor=${page.next_cursor}`)
    expect(next.events).toEqual(events.slice(2, 4))
    expect((await audit(owner, "?action=member.")).events.every((e) => e.action.startsWith("member."))).toBe(true)
    expect((await audit(owner, "?action=api_key.deleted")).events).toHaveLength(1)
    expect((await a.call("GET", "/audit?action=DROP%20TABLE", { token: owner.token })).status).toBe(422)

    // Only owners and admins (and admin keys) read it; another workspace sees none of it.
    expect(await errorOf(await a.call("GET", "/audit", { token: sup.token }))).toMatchObject({
      status: 403,
      code: "INSUFFICIENT_ROLE",
    })
    const other = await a.signup()
    expect((await audit(other)).events.map((e) => e.action)).toEqual([])
    const adminKey = await a.createKey(owner, { name: "auditor", scope: "admin" })
    expect((await a.call("GET", "/audit", { token: adminKey.secret })).status).toBe(200)
    const writeKey = await a.createKey(owner, { name: "writer", scope: "write" })
    expect((await errorOf(await a.call("GET", "/audit", { token: writeKey.secret }))).code).toBe("INSUFFICIENT_SCOPE")
  })

  it("is append-only in the database", async () => {
    const owner = await a.signup()
    await a.createKey(owner, { name: "k" })
    await expect(srv.sql`update audit_events set action = 'x.y' where tenant_id = ${owner.tenantId}`).rejects.toThrow(
      /append-only/,
    )
    await expect(srv.sql`delete from audit_events where tenant_id = ${owner.tenantId}`).rejects.toThrow(/append-only/)
  })

  it("keeps autocharge settings before and after, and a write key may not change them", async () => {
    const owner = await a.signup()
    const writeKey = await a.createKey(owner, { name: "writer", scope: "write" })
    const off = { enabled: false }
    expect(
      await errorOf(await a.call("PUT", "/billing/autocharge", { token: writeKey.secret, body: off })),
    ).toMatchObject({ status: 403, code: "INSUFFICIENT_SCOPE" })
    const analyst = await a.addMember(owner, "analyst")
    expect((await errorOf(await a.call("PUT", "/billing/autocharge", { token: analyst.token, body: off }))).code).toBe(
      "INSUFFICIENT_ROLE",
    )
    expect(await audit(owner, "?action=autocharge.updated")).toMatchObject({ events: [] })
    await body(await a.call("PUT", "/billing/autocharge", { token: owner.token, body: off }))
    const [entry] = (await audit(owner, "?action=autocharge.updated")).events
    expect(entry).toMatchObject({
      actor: `user:${owner.userId}`,
      target: "wallet",
      before: { enabled: false },
      after: { enabled: false, threshold_minor: null, amount_minor: null },
    })
  })
})
