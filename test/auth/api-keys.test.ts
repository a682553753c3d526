// API keys through the real server: every row of the spec's state table, the secret's form and
// storage, the 10-key cap (also under a race), expiry, batched last-use recording, the audit
// trail, the 400s the spec names for create, and the scope a key gets (read unless asked; admin
// keys only from owners and admins).
import { createHash } from "node:crypto"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Auth } from "../../src/auth/Auth.js"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
let a: ReturnType<typeof api>
beforeAll(async () => {
  srv = await startTestServer({ env: { KEY_USAGE_FLUSH_MS: "100" } })
  a = api(srv)
})
afterAll(async () => srv?.stop())

const errorOf = async (res: Response) => ({
  status: res.status,
  ...((await res.json()) as { code: string; field?: string }),
})

describe("create (none → active)", () => {
  let s: Session
  beforeAll(async () => {
    s = await a.signup()
  })

  it("returns the secret once, stores only its sha256, and defaults to read scope", async () => {
    const res = await a.call("POST", "/api-keys", {
      token: s.token,
      body: { name: "  deploy bot  " },
      headers: { "user-agent": "ci-agent/1.0" },
    })
    expect(res.status).toBe(201)
    const key = (await res.json()) as any
    expect(key.secret).toMatch(/^svc_live_[0-9A-Za-z]{32,}$/)
    expect(key.secret.startsWith(key.prefix)).toBe(true)
    expect(key.prefix).toMatch(/^svc_live_[0-9A-Za-z]{4,8}$/)
    expect(key).toMatchObject({
      name: "deploy bot",
      scope: "read",
      status: "active",
      created_by_user_id: s.userId,
      expires_at: null,
      revoked_at: null,
      revoked_reason: null,
      last_used_at: null,
    })
    const [row] = await srv.sql<[Record<string, unknown>]>`select * from api_keys where id = ${key.id}`
    expect(row["secret_sha256"]).toEqual(createHash("sha256").update(key.secret).digest())
    expect(JSON.stringify(row)).not.toContain(key.secret.slice(9))
    const listed = (await (await a.call("GET", "/api-keys", { token: s.token })).json()) as { keys: any[] }
    expect(listed.keys.find((k) => k.id === key.id)).toBeDefined()
    expect(JSON.stringify(listed)).not.toContain(key.secret)
    for (const k of listed.keys) expect(k).not.toHaveProperty("secret")
    const events = await srv.sql`select action, actor_user_id, user_agent from api_key_events where key_id = ${key.id}`
    expect(events).toEqual([{ action: "created", actor_user_id: s.userId, user_agent: "ci-agent/1.0" }])
  })

  it("sets expiry by days or by date, not both", async () => {
    const byDays = await a.createKey(s, { name: "d", expires_in_days: 30 })
    expect(Math.abs(new Date(byDays.expires_at as string).getTime() - (Date.now() + 30 * 86_400_000))).toBeLessThan(
      60_000,
    )
    const at = new Date(Date.now() + 3 * 86_400_000).toISOString()
    const byDate = await a.createKey(s, { name: "t", expires_at: at })
    expect(byDate.expires_at).toBe(at)
    expect(
      await errorOf(
        await a.call("POST", "/api-keys", { token: s.token, body: { name: "x", expires_in_days: 1, expires_at: at } }),
      ),
    ).toMatchObject({ status: 400, field: "expires_at" })
  })

  it("answers bad names, scopes and expiries with 400, as the spec says", async () => {
    const bad: Array<[Record<string, unknown>, string]> = [
      [{}, "name"],
      [{ name: "" }, "name"],
      [{ name: "   " }, "name"],
      [{ name: "x".repeat(121) }, "name"],
      [{ name: 42 }, "name"],
      [{ name: "ok", scope: "root" }, "scope"],
      [{ name: "ok", expires_in_days: 0 }, "expires_in_days"],
      [{ name: "ok", expires_in_days: 1.5 }, "expires_in_days"],
      [{ name: "ok", expires_at: "tomorrow" }, "expires_at"],
      [{ name: "ok", expires_at: "2001-01-01T00:00:00Z" }, "expires_at"],
    ]
    for (const [body, field] of bad)
      expect(
        await errorOf(await a.call("POST", "/api-keys", { token: s.token, body })),
        JSON.stringify(body),
      ).toMatchObject({ status: 400, field })
    expect((await a.call("POST", "/api-keys", { token: s.token, body: { name: "x".repeat(120) } })).status).toBe(201)
  })

  it("needs a signed-in user: 401 without one, 403 for an API key", async () => {
    expect((await a.call("POST", "/api-keys", { body: { name: "x" } })).status).toBe(401)
    // Without credentials the body is not even looked at.
    expect((await a.call("POST", "/api-keys", { body: { scope: "root" } })).status).toBe(401)
    expect((await a.call("POST", "/api-keys", { headers: { "content-type": "application/json" } })).status).toBe(401)
    const key = await a.createKey(s, { name: "admin", scope: "admin" })
    expect(await errorOf(await a.call("POST", "/api-keys", { token: key.secret, body: { name: "x" } }))).toMatchObject({
      status: 403,
      code: "API_KEY_NOT_ALLOWED",
    })
    expect(await errorOf(await a.call("GET", "/api-keys", { token: key.secret }))).toMatchObject({
      status: 403,
      code: "API_KEY_NOT_ALLOWED",
    })
  })
})

describe("scope: read unless asked, admin only from admins", () => {
  it("makes a key without a scope read-only: it reads but cannot change anything", async () => {
    const s = await a.signup()
    const res = await a.call("POST", "/api-keys", { token: s.token, body: { name: "no scope given" } })
    expect(res.status).toBe(201)
    const key = (await res.json()) as { id: number; secret: string; scope: string }
    expect(key.scope).toBe("read")
    const [row] = await srv.sql<[{ scope: string }]>`select scope from api_keys where id = ${key.id}`
    expect(row.scope).toBe("read")
    expect((await a.call("GET", "/api/workflows", { token: key.secret })).status).toBe(200)
    const before = await srv.sql`select id from workflows where tenant_id = ${s.tenantId}`
    expect(
      await errorOf(
        await a.call("POST", "/api/workflows", {
          token: key.secret,
          body: { nl_prompt: "Call lapsed members and offer them a discount to rejoin." },
        }),
      ),
    ).toMatchObject({
      status: 403,
      code: "INSUFFICIENT_SCOPE",
    })
    expect(await srv.sql`select id from workflows where tenant_id = ${s.tenantId}`).toEqual(before)
  })

  it(
    "lets a supervisor mint read keys only (a write key would set things up: 403, nothing written); owners and " +
      "admins may mint any",
    async () => {
      const s = await a.signup()
      await srv.sql`update users set role = 'supervisor' where id = ${s.userId}`
      // The role comes from the users row; drop the cached principal as a role change does.
      const member = s
      await srv.running.runtime.runPromise(
        Effect.flatMap(Auth, (auth) => Effect.promise(() => auth.invalidate({ kind: "user", userId: s.userId }))),
      )
      const before = await srv.sql`select id from api_keys where tenant_id = ${s.tenantId}`
      for (const scope of ["admin", "write"])
        expect(
          await errorOf(await a.call("POST", "/api-keys", { token: member.token, body: { name: "escalate", scope } })),
        ).toMatchObject({ status: 403, code: "INSUFFICIENT_ROLE" })
      expect(await srv.sql`select id from api_keys where tenant_id = ${s.tenantId}`).toEqual(before)
      expect(await srv.sql`select action from api_key_events where tenant_id = ${s.tenantId}`).toEqual([])
      expect((await a.createKey(member, { name: "r" })).scope).toBe("read")

      await srv.sql`update users set role = 'admin' where id = ${s.userId}`
      await srv.running.runtime.runPromise(
        Effect.flatMap(Auth, (auth) => Effect.promise(() => auth.invalidate({ kind: "user", userId: s.userId }))),
      )
      expect((await a.createKey(member, { name: "a", scope: "admin" })).scope).toBe("admin")
      const owner = await a.signup()
      expect((await a.createKey(owner, { name: "a", scope: "admin" })).scope).toBe("admin")
    },
  )
})

describe("a user manages only keys at or below their role (issue 33, hole 1)", () => {
  it("supervisors and analysts cannot revoke or delete the owner's keys; the integration keeps working", async () => {
    const owner = await a.signup()
    const adminKey = await a.createKey(owner, { name: "integration", scope: "admin" })
    const readKey = await a.createKey(owner, { name: "dashboard", scope: "read" })
    const retired = await a.createKey(owner, { name: "retired", scope: "admin" })
    expect((await a.call("POST", `/api-keys/${retired.id}/revoke`, { token: owner.token, body: {} })).status).toBe(200)
    for (const role of ["supervisor", "analyst"] as const) {
      const member = await a.addMember(owner, role)
      for (const key of [adminKey, readKey])
        expect(
          await errorOf(await a.call("POST", `/api-keys/${key.id}/revoke`, { token: member.token, body: {} })),
          `${role} revokes ${key.id}`,
        ).toMatchObject({ status: 403, code: "INSUFFICIENT_ROLE" })
      expect(await errorOf(await a.call("DELETE", `/api-keys/${retired.id}`, { token: member.token }))).toMatchObject({
        status: 403,
        code: "INSUFFICIENT_ROLE",
      })
      // Their own key is theirs to revoke and delete.
      const own = await a.createKey(member, { name: `${role}'s` })
      expect((await a.call("POST", `/api-keys/${own.id}/revoke`, { token: member.token, body: {} })).status).toBe(200)
      expect((await a.call("DELETE", `/api-keys/${own.id}`, { token: member.token })).status).toBe(200)
    }
    expect((await a.call("GET", "/auth/me", { token: adminKey.secret })).status).toBe(200)
    expect((await a.call("GET", "/auth/me", { token: readKey.secret })).status).toBe(200)
    const rows =
      await srv.sql`select id, revoked_at from api_keys where id in ${srv.sql([adminKey.id, readKey.id, retired.id])}`
    expect(rows).toHaveLength(3)
    expect(rows.filter((r) => r.revoked_at === null)).toHaveLength(2)
    expect(
      await srv.sql`select action from api_key_events
        where key_id in ${srv.sql([adminKey.id, readKey.id])} order by id`,
    ).toEqual([{ action: "created" }, { action: "created" }])

    // An admin manages every key; deleting one keeps its trail.
    const admin = await a.addMember(owner, "admin")
    expect((await a.call("POST", `/api-keys/${adminKey.id}/revoke`, { token: admin.token, body: {} })).status).toBe(200)
    expect((await a.call("DELETE", `/api-keys/${adminKey.id}`, { token: admin.token })).status).toBe(200)
    expect(
      await srv.sql`select action, actor_user_id from api_key_events where key_id = ${adminKey.id} order by id`,
    ).toEqual([
      { action: "created", actor_user_id: owner.userId },
      { action: "revoked", actor_user_id: admin.userId },
      { action: "deleted", actor_user_id: admin.userId },
    ])
  })

  it("a demoted admin no longer manages the admin key they made", async () => {
    const owner = await a.signup()
    const admin = await a.addMember(owner, "admin")
    const theirs = await a.createKey(admin, { name: "made as admin", scope: "admin" })
    expect(
      (await a.call("PATCH", `/members/${admin.userId}`, { token: owner.token, body: { role: "supervisor" } })).status,
    ).toBe(200)
    expect(
      (await errorOf(await a.call("POST", `/api-keys/${theirs.id}/revoke`, { token: admin.token, body: {} }))).code,
    ).toBe("INSUFFICIENT_ROLE")
  })
})

describe("the 10-active-key cap", () => {
  it("refuses the 11th with 400 and counts only active keys", async () => {
    const s = await a.signup()
    const keys = []
    for (let i = 0; i < 10; i++) keys.push(await a.createKey(s, { name: `k${i}` }))
    expect(
      await errorOf(await a.call("POST", "/api-keys", { token: s.token, body: { name: "eleventh" } })),
    ).toMatchObject({ status: 400, code: "API_KEY_LIMIT_REACHED" })
    await a.call("POST", `/api-keys/${keys[0]!.id}/revoke`, { token: s.token })
    expect((await a.call("POST", "/api-keys", { token: s.token, body: { name: "replacement" } })).status).toBe(201)
    // Expired keys don't count either.
    await srv.sql`update api_keys set expires_at = now() - interval '1 minute' where id = ${keys[1]!.id}`
    expect((await a.call("POST", "/api-keys", { token: s.token, body: { name: "after expiry" } })).status).toBe(201)
    expect((await a.call("POST", "/api-keys", { token: s.token, body: { name: "over" } })).status).toBe(400)
  })

  it("holds under a race: 15 concurrent creates make exactly 10 keys", async () => {
    const s = await a.signup()
    const statuses = await Promise.all(
      Array.from({ length: 15 }, (_, i) =>
        a.call("POST", "/api-keys", { token: s.token, body: { name: `race ${i}` } }).then((r) => r.status),
      ),
    )
    expect(statuses.filter((x) => x === 201)).toHaveLength(10)
    expect(statuses.filter((x) => x === 400)).toHaveLength(5)
    const [{ n }] = await srv.sql<
      [{ n: number }]
    >`select count(*)::int as n from api_keys where tenant_id = ${s.tenantId}`
    expect(n).toBe(10)
  })
})

describe("revoke and delete", () => {
  let s: Session
  beforeAll(async () => {
    s = await a.signup()
  })

  it("active → revoked: refused at once, reason and time recorded", async () => {
    const key = await a.createKey(s, { name: "r", scope: "read" })
    expect((await a.call("GET", "/auth/me", { token: key.secret })).status).toBe(200)
    const res = await a.call("POST", `/api-keys/${key.id}/revoke`, {
      token: s.token,
      body: { reason: "leaked in a log" },
    })
    expect(res.status).toBe(200)
    const revoked = (await res.json()) as any
    expect(revoked).toMatchObject({ id: key.id, status: "revoked", revoked_reason: "leaked in a log" })
    expect(typeof revoked.revoked_at).toBe("string")
    expect(await errorOf(await a.call("GET", "/auth/me", { token: key.secret }))).toMatchObject({
      status: 401,
      code: "KEY_REVOKED",
    })

    // revoked → revoke: a no-op that keeps the first revocation.
    const again = (await (
      await a.call("POST", `/api-keys/${key.id}/revoke`, { token: s.token, body: { reason: "other" } })
    ).json()) as any
    expect(again).toMatchObject({
      status: "revoked",
      revoked_at: revoked.revoked_at,
      revoked_reason: "leaked in a log",
    })
    const events = await srv.sql<
      Array<{ action: string }>
    >`select action from api_key_events where key_id = ${key.id} order by id`
    expect(events.map((e) => e.action)).toEqual(["created", "revoked"])
  })

  it("expired → revoked, and an expired key is refused", async () => {
    const key = await a.createKey(s, { name: "short", expires_at: new Date(Date.now() + 3000).toISOString() })
    expect((await a.call("GET", "/auth/me", { token: key.secret })).status).toBe(200)
    await new Promise((r) => setTimeout(r, 3100))
    expect(await errorOf(await a.call("GET", "/auth/me", { token: key.secret }))).toMatchObject({
      status: 401,
      code: "KEY_EXPIRED",
    })
    const listed = (await (await a.call("GET", "/api-keys", { token: s.token })).json()) as { keys: any[] }
    expect(listed.keys.find((k) => k.id === key.id).status).toBe("expired")
    // expired → DELETE: not revoked, so 409.
    expect(await errorOf(await a.call("DELETE", `/api-keys/${key.id}`, { token: s.token }))).toMatchObject({
      status: 409,
      code: "KEY_NOT_REVOKED",
    })
    const res = await a.call("POST", `/api-keys/${key.id}/revoke`, { token: s.token })
    expect(((await res.json()) as { status: string }).status).toBe("revoked")
  })

  it("active → DELETE is 409; revoked → DELETE removes the row but keeps the trail", async () => {
    const key = await a.createKey(s, { name: "del" })
    expect(await errorOf(await a.call("DELETE", `/api-keys/${key.id}`, { token: s.token }))).toMatchObject({
      status: 409,
      code: "KEY_NOT_REVOKED",
    })
    await a.call("POST", `/api-keys/${key.id}/revoke`, { token: s.token })
    const res = await a.call("DELETE", `/api-keys/${key.id}`, { token: s.token })
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ deleted: true, id: key.id })
    expect(await srv.sql`select id from api_keys where id = ${key.id}`).toHaveLength(0)
    const events = await srv.sql<
      Array<{ action: string; actor_user_id: number }>
    >`select action, actor_user_id from api_key_events where key_id = ${key.id} order by id`
    expect(events).toEqual([
      { action: "created", actor_user_id: s.userId },
      { action: "revoked", actor_user_id: s.userId },
      { action: "deleted", actor_user_id: s.userId },
    ])
    expect(await errorOf(await a.call("DELETE", `/api-keys/${key.id}`, { token: s.token }))).toMatchObject({
      status: 404,
    })
    expect((await a.call("GET", "/auth/me", { token: key.secret })).status).toBe(401)
  })

  it("validates ids and the revoke reason", async () => {
    expect(await errorOf(await a.call("POST", "/api-keys/abc/revoke", { token: s.token }))).toMatchObject({
      status: 422,
      field: "key_id",
    })
    expect(await errorOf(await a.call("DELETE", "/api-keys/0", { token: s.token }))).toMatchObject({
      status: 422,
      field: "key_id",
    })
    expect(await errorOf(await a.call("POST", "/api-keys/999999/revoke", { token: s.token }))).toMatchObject({
      status: 404,
    })
    const key = await a.createKey(s, { name: "reason" })
    expect(
      await errorOf(
        await a.call("POST", `/api-keys/${key.id}/revoke`, { token: s.token, body: { reason: "x".repeat(81) } }),
      ),
    ).toMatchObject({ status: 422, field: "reason" })
    expect(
      (await a.call("POST", `/api-keys/${key.id}/revoke`, { token: s.token, body: { reason: "x".repeat(80) } })).status,
    ).toBe(200)
  })
})

describe("last use", () => {
  it("records last_used_at and last_used_ip in batches, not on every request", async () => {
    const s = await a.signup()
    const key = await a.createKey(s, { name: "used", scope: "read" })
    for (let i = 0; i < 5; i++) expect((await a.call("GET", "/auth/me", { token: key.secret })).status).toBe(200)
    await expect
      .poll(
        async () =>
          (
            await srv.sql<
              [{ last_used_at: Date | null; last_used_ip: string | null }]
            >`select last_used_at, last_used_ip from api_keys where id = ${key.id}`
          )[0],
        { timeout: 3000 },
      )
      .toMatchObject({ last_used_ip: "127.0.0.1", last_used_at: expect.any(Date) })
    const listed = (await (await a.call("GET", "/api-keys", { token: s.token })).json()) as { keys: any[] }
    expect(listed.keys.find((k) => k.id === key.id)).toMatchObject({
      last_used_ip: "127.0.0.1",
      last_used_at: expect.any(String),
    })
  })

  it("does not write the key row per request", async () => {
    const slow = await startTestServer({ env: { KEY_USAGE_FLUSH_MS: "3600000" } })
    try {
      const b = api(slow)
      const s = await b.signup()
      const key = await b.createKey(s, { name: "quiet", scope: "read" })
      await b.call("GET", "/auth/me", { token: key.secret }) // the first use flushes with the loop's first run at most
      await new Promise((r) => setTimeout(r, 200))
      await slow.sql`update api_keys set last_used_at = null, last_used_ip = null where id = ${key.id}`
      for (let i = 0; i < 20; i++) expect((await b.call("GET", "/auth/me", { token: key.secret })).status).toBe(200)
      const [row] = await slow.sql<
        [{ last_used_at: Date | null }]
      >`select last_used_at from api_keys where id = ${key.id}`
      expect(row.last_used_at).toBeNull()
    } finally {
      await slow.stop()
    }
  })
})
