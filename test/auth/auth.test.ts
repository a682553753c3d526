// Identity through the real server: signup (tenant, owner, trial credit, verification mail),
// email verification, login (JWT claims, cookie, failures, throttling), /auth/me, logout,
// CSRF on cookie-authenticated changes, the scope matrix and tenant isolation.
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { decodeJwt, decodeProtectedHeader } from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { json } from "../../api/reply.js"
import { type AnyRoute, route } from "../../api/route.js"
import { makeJwtKeys } from "../../src/auth/jwt.js"
import { TRIAL_CREDIT_MINOR } from "../../src/billing/pricing.js"
import { readOutbox } from "../../src/providers/mail/outbox.mail.js"
import { api, type Session, uniqueEmail } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { rawRequest } from "../support/raw-http.js"

const ALLOWED = "https://app.parley.example"

// One handler under each auth level, to test the scope matrix through the router.
const probe = (method: "GET" | "POST", path: string, auth: AnyRoute["auth"], scope?: "admin"): AnyRoute =>
  route({
    method,
    path,
    auth,
    ...(scope && { permission: scope }),
    summary: path,
    tags: ["test"],
    handler: ({ principal }) =>
      Effect.succeed(json({ kind: principal?.kind ?? null, tenant: principal?.tenantId ?? null })),
  })

let srv: TestServer
let a: ReturnType<typeof api>

beforeAll(async () => {
  srv = await startTestServer({
    env: { ALLOWED_ORIGINS: ALLOWED, KEY_USAGE_FLUSH_MS: "100" },
    extraRoutes: [
      probe("GET", "/test/read", "jwt"),
      probe("POST", "/test/write", "jwt"),
      probe("POST", "/test/admin", "jwt", "admin"),
      probe("POST", "/test/human", "jwt-only"),
    ],
  })
  a = api(srv)
})
afterAll(async () => srv?.stop())

const errorOf = async (res: Response) => ({
  status: res.status,
  ...((await res.json()) as { code: string; field?: string; error: string }),
})

describe("POST /auth/signup", () => {
  it("creates the workspace, its owner, the trial credit and a verification email", async () => {
    const email = uniqueEmail("ann")
    const res = await a.call("POST", "/auth/signup", {
      body: { email: email.toUpperCase(), password: "correct horse battery", full_name: "Ann Lee", country: "IN" },
    })
    expect(res.status).toBe(201)
    const body = (await res.json()) as any
    expect(body.verify_email_sent).toBe(true)
    expect(body.tenant).toMatchObject({
      name: "Ann Lee's workspace",
      status: "active",
      plan_tier: "free",
      currency: "INR",
      country: "IN",
    })
    expect(Object.keys(body.tenant)).toEqual(
      expect.arrayContaining(["id", "name", "status", "plan_tier", "created_at"]),
    )
    expect(body.user).toMatchObject({ tenant_id: body.tenant.id, email, role: "owner", email_verified: false })
    expect(JSON.stringify(body)).not.toMatch(/password|argon2/)

    const [wallet] = await srv.sql<
      [{ currency: string; balance_minor: number }]
    >`select currency, balance_minor from wallets where tenant_id = ${body.tenant.id}`
    expect(wallet).toEqual({ currency: "INR", balance_minor: TRIAL_CREDIT_MINOR.INR })
    const entries = await srv.sql`select kind, amount_minor, balance_after_minor from ledger_entries
      where tenant_id = ${body.tenant.id}`
    expect(entries).toEqual([
      { kind: "trial_credit", amount_minor: TRIAL_CREDIT_MINOR.INR, balance_after_minor: TRIAL_CREDIT_MINOR.INR },
    ])
    const [user] = await srv.sql<
      [{ password_hash: string }]
    >`select password_hash from users where id = ${body.user.id}`
    expect(user.password_hash).toMatch(/^\$argon2id\$/)

    const mail = readOutbox(srv.config.outboxFile).filter((m) => m.to === email)
    expect(mail).toHaveLength(1)
    expect(mail[0]).toMatchObject({ kind: "verify_email" })
    expect(mail[0]!.links[0]).toMatch(new RegExp(`^${srv.url}/auth/verify-email\\?token=[\\w-]{40,}$`))
  })

  it("gives USD to every country but India, and USD when no country is given", async () => {
    for (const [country, currency] of [
      ["US", "USD"],
      ["GB", "USD"],
      ["AE", "USD"],
      [undefined, "USD"],
    ] as const) {
      const s = await a.signup(country ? { country } : {})
      const [t] = await srv.sql<[{ currency: string }]>`select currency from tenants where id = ${s.tenantId}`
      expect(t.currency).toBe(currency)
      const [w] = await srv.sql<
        [{ balance_minor: number }]
      >`select balance_minor from wallets where tenant_id = ${s.tenantId}`
      expect(w.balance_minor).toBe(TRIAL_CREDIT_MINOR.USD)
    }
  })

  it("refuses a second account for the same email, in any case, with 409", async () => {
    const email = uniqueEmail()
    await a.signup({ email })
    const res = await a.call("POST", "/auth/signup", {
      body: { email: email.toUpperCase(), password: "another password 123" },
    })
    expect(await errorOf(res)).toMatchObject({ status: 409, code: "EMAIL_TAKEN" })
    const [{ n }] = await srv.sql<[{ n: number }]>`select count(*)::int as n from users where email = ${email}`
    expect(n).toBe(1)
  })

  it("answers bad input with 422 naming the field and creates nothing", async () => {
    const before = await srv.sql<[{ n: number }]>`select count(*)::int as n from tenants`
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ email: uniqueEmail(), password: "short" }, "password"],
      [{ email: "not-an-email", password: "long enough password" }, "email"],
      [{ email: uniqueEmail(), password: "long enough password", country: "FR" }, "country"],
      [{ email: uniqueEmail(), password: "long enough password", full_name: "x".repeat(201) }, "full_name"],
      [{ email: `${"x".repeat(250)}@example.com`, password: "long enough password" }, "email"],
      [{ password: "long enough password" }, "email"],
      [{ email: uniqueEmail(), password: 1234567890123 }, "password"],
    ]
    for (const [body, field] of cases)
      expect(await errorOf(await a.call("POST", "/auth/signup", { body }))).toMatchObject({
        status: 422,
        code: "VALIDATION_FAILED",
        field,
      })
    const after = await srv.sql<[{ n: number }]>`select count(*)::int as n from tenants`
    expect(after[0].n).toBe(before[0].n)
  })

  it("still answers 201 when the mailer fails", async () => {
    // The outbox's directory would have to be a regular file: every send fails at once.
    const notADir = join(mkdtempSync(join(tmpdir(), "parley-mail-")), "file")
    writeFileSync(notADir, "")
    const broken = await startTestServer({ env: { OUTBOX_FILE: join(notADir, "outbox.jsonl") } })
    try {
      const res = await fetch(`${broken.url}/auth/signup`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: uniqueEmail(), password: "correct horse battery" }),
      })
      expect(res.status).toBe(201)
      expect(((await res.json()) as { verify_email_sent: boolean }).verify_email_sent).toBe(false)
    } finally {
      await broken.stop()
    }
  })
})

describe("GET /auth/verify-email", () => {
  it("verifies once and answers the same verification on repeat", async () => {
    const s = await a.signup({ verify: false })
    const link = readOutbox(srv.config.outboxFile).find((m) => m.to === s.email)!.links[0]!
    const first = await fetch(link)
    expect(first.status).toBe(200)
    const body = (await first.json()) as { ok: boolean; email: string; verified_at: string }
    expect(body).toMatchObject({ ok: true, email: s.email })
    const again = (await (await fetch(link)).json()) as { verified_at: string }
    expect(again.verified_at).toBe(body.verified_at)
    const me = (await (await a.call("GET", "/auth/me", { token: s.token })).json()) as {
      user: { email_verified: boolean }
    }
    expect(me.user.email_verified).toBe(true)
  })

  it("refuses unknown and expired tokens", async () => {
    expect(await errorOf(await a.call("GET", "/auth/verify-email?token=nope"))).toMatchObject({
      status: 400,
      code: "INVALID_TOKEN",
    })
    expect(await errorOf(await a.call("GET", "/auth/verify-email"))).toMatchObject({ status: 422, field: "token" })
    const s = await a.signup({ verify: false })
    const link = readOutbox(srv.config.outboxFile).find((m) => m.to === s.email)!.links[0]!
    await srv.sql`update email_verifications set expires_at = now() - interval '1 second' where user_id = ${s.userId}`
    expect(await errorOf(await fetch(link))).toMatchObject({ status: 400, code: "TOKEN_EXPIRED" })
  })

  it("answers a browser with a page, escaped, and an API client with JSON", async () => {
    const s = await a.signup({ verify: false })
    const link = readOutbox(srv.config.outboxFile).find((m) => m.to === s.email)!.links[0]!
    const browser = { accept: "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" }
    const ok = await fetch(link, { headers: browser })
    expect(ok.status).toBe(200)
    expect(ok.headers.get("content-type")).toMatch(/^text\/html/)
    const html = await ok.text()
    expect(html).toContain("Your email is verified")
    expect(html).toContain(s.email)
    expect(html).toContain('href="/console/#/campaigns"')
    const bad = await fetch(`${srv.url}/auth/verify-email?token=%3Cscript%3E`, { headers: browser })
    expect(bad.status).toBe(400)
    const badHtml = await bad.text()
    expect(badHtml).toContain("This link did not work")
    expect(badHtml).not.toContain("<script>")
    const api = await fetch(link, { headers: { accept: "application/json, text/html" } })
    expect(api.headers.get("content-type")).toMatch(/^application\/json/)
  })
})

describe("POST /auth/verify-email/resend", () => {
  it("mails a new working link to an unverified user, nothing once verified, at most 5 an hour", async () => {
    const s = await a.signup({ verify: false })
    const sent = await a.call("POST", "/auth/verify-email/resend", { token: s.token })
    expect(await sent.json()).toEqual({ sent: true, already_verified: false })
    const links = readOutbox(srv.config.outboxFile)
      .filter((m) => m.to === s.email && m.kind === "verify_email")
      .map((m) => m.links[0]!)
    expect(links).toHaveLength(2)
    expect(links[1]).not.toBe(links[0])
    expect((await fetch(links[1]!)).status).toBe(200)
    expect(await (await a.call("POST", "/auth/verify-email/resend", { token: s.token })).json()).toEqual({
      sent: false,
      already_verified: true,
    })
    const t = await a.signup({ verify: false })
    for (let i = 0; i < 5; i++)
      expect((await a.call("POST", "/auth/verify-email/resend", { token: t.token })).status).toBe(200)
    const refused = await a.call("POST", "/auth/verify-email/resend", { token: t.token })
    expect(refused.status).toBe(429)
    expect(refused.headers.get("retry-after")).toMatch(/^\d+$/)
    const key = await a.createKey(t, { name: "k" })
    expect((await errorOf(await a.call("POST", "/auth/verify-email/resend", { token: key.secret }))).code).toBe(
      "API_KEY_NOT_ALLOWED",
    )
  })
})

describe("POST /auth/login", () => {
  it("answers a 7-day HS256 JWT with the spec's claims and sets the session cookie", async () => {
    const email = uniqueEmail()
    await a.signup({ email })
    const res = await a.call("POST", "/auth/login", {
      body: { email: email.toUpperCase(), password: "correct horse battery staple" },
    })
    expect(res.status).toBe(200)
    const body = (await res.json()) as any
    expect(body.expires_in).toBe(604_800)
    expect(body.user.email).toBe(email)
    expect(body.tenant.id).toBe(body.user.tenant_id)
    expect(decodeProtectedHeader(body.token).alg).toBe("HS256")
    const claims = decodeJwt(body.token)
    expect(claims).toMatchObject({ sub: String(body.user.id), tid: body.tenant.id, role: "owner", email })
    expect(claims.exp! - claims.iat!).toBe(604_800)
    expect(typeof claims.jti).toBe("string")
    const cookie = res.headers.get("set-cookie")!
    expect(cookie).toMatch(new RegExp(`^svc_session=${body.token.replace(/\./g, "\\.")};`))
    for (const attr of ["HttpOnly", "Secure", "SameSite=Lax", "Path=/", "Max-Age=604800"])
      expect(cookie).toContain(attr)
  })

  it("answers wrong credentials 401, an inactive account 403 and an OAuth-only account 400", async () => {
    const s = await a.signup()
    expect(
      await errorOf(await a.call("POST", "/auth/login", { body: { email: s.email, password: "wrong password!" } })),
    ).toMatchObject({ status: 401, code: "INVALID_CREDENTIALS" })
    expect(
      await errorOf(
        await a.call("POST", "/auth/login", { body: { email: uniqueEmail(), password: "whatever it is" } }),
      ),
    ).toMatchObject({ status: 401, code: "INVALID_CREDENTIALS" })
    await srv.sql`update users set status = 'inactive' where id = ${s.userId}`
    expect(
      await errorOf(await a.call("POST", "/auth/login", { body: { email: s.email, password: s.password } })),
    ).toMatchObject({ status: 403, code: "ACCOUNT_INACTIVE" })
    const oauth = await a.signup()
    await srv.sql`update users set password_hash = null, auth_provider = 'oauth' where id = ${oauth.userId}`
    expect(
      await errorOf(await a.call("POST", "/auth/login", { body: { email: oauth.email, password: "anything at all" } })),
    ).toMatchObject({ status: 400, code: "OAUTH_ONLY_ACCOUNT" })
  })

  it("slows repeated failures for an account, then refuses even the right password with 429", async () => {
    const s = await a.signup()
    // Sent together, so the holds overlap: each failure is counted as it lands, and held by its count.
    const times = await Promise.all(
      Array.from({ length: 10 }, async (_, i) => {
        const t0 = performance.now()
        const res = await a.call("POST", "/auth/login", { body: { email: s.email, password: `wrong ${i} password` } })
        expect(res.status).toBe(401)
        return performance.now() - t0
      }),
    )
    // The first few answer at once; later ones are held back, up to 3 s.
    times.sort((x, y) => x - y)
    expect(times[9]!).toBeGreaterThan(times[0]! + 2500)
    expect(times.filter((t) => t > times[0]! + 2500).length).toBeGreaterThanOrEqual(3)
    const locked = await a.call("POST", "/auth/login", { body: { email: s.email, password: s.password } })
    expect(locked.status).toBe(429)
    expect(Number(locked.headers.get("retry-after"))).toBeGreaterThan(800)
    expect(((await locked.json()) as { code: string }).code).toBe("RATE_LIMITED")
    // Another account is unaffected.
    const other = await a.signup()
    expect(
      (await a.call("POST", "/auth/login", { body: { email: other.email, password: other.password } })).status,
    ).toBe(200)
  }, 30_000)

  it("forgets failures after a successful login", async () => {
    const s = await a.signup()
    for (let i = 0; i < 3; i++)
      await a.call("POST", "/auth/login", { body: { email: s.email, password: "wrong password" } })
    await a.login(s.email, s.password)
    const [row] = await srv.sql`select failures from login_failures where key = ${`acct:${s.email}`}`
    expect(row).toBeUndefined()
  })
})

describe("sessions", () => {
  let s: Session
  beforeAll(async () => {
    s = await a.signup()
  })

  it("GET /auth/me works with the bearer and with the cookie, and not without either", async () => {
    const byBearer = await a.call("GET", "/auth/me", { token: s.token })
    expect(byBearer.status).toBe(200)
    const me = (await byBearer.json()) as any
    expect(me.user.id).toBe(s.userId)
    expect(me.tenant.id).toBe(s.tenantId)
    expect(new Date(me.expires_at).getTime()).toBe(decodeJwt(s.token).exp! * 1000)
    expect((await a.call("GET", "/auth/me", { headers: { cookie: s.cookie } })).status).toBe(200)
    expect(await errorOf(await a.call("GET", "/auth/me"))).toMatchObject({ status: 401, code: "UNAUTHENTICATED" })
    expect(await errorOf(await a.call("GET", "/auth/me", { headers: { authorization: "Basic abc" } }))).toMatchObject({
      status: 401,
    })
  })

  it("refuses tampered, foreign and expired tokens", async () => {
    const [h, p, sig] = s.token.split(".")
    const forged = Buffer.from(JSON.stringify({ ...decodeJwt(s.token), tid: 999 })).toString("base64url")
    expect((await a.call("GET", "/auth/me", { token: `${h}.${forged}.${sig}` })).status).toBe(401)
    expect((await a.call("GET", "/auth/me", { token: `${h}.${p}.${sig!.slice(0, -4)}AAAA` })).status).toBe(401)
    const other = makeJwtKeys("some other deployment's secret that is long enough")
    const { token: foreign } = await other.sign(
      { id: s.userId, tenantId: s.tenantId, role: "owner", email: s.email },
      Math.floor(Date.now() / 1000),
    )
    expect((await a.call("GET", "/auth/me", { token: foreign })).status).toBe(401)
    const [{ value }] = await srv.sql<[{ value: string }]>`select value from system_secrets where name = 'jwt_hs256'`
    const { token: old } = await makeJwtKeys(value).sign(
      { id: s.userId, tenantId: s.tenantId, role: "owner", email: s.email },
      Math.floor(Date.now() / 1000) - 8 * 86_400,
    )
    expect(await errorOf(await a.call("GET", "/auth/me", { token: old }))).toMatchObject({
      status: 401,
      code: "TOKEN_EXPIRED",
    })
  })

  it("logout revokes the token at once, clears the cookie, and is idempotent", async () => {
    const t = await a.login(s.email, s.password)
    expect((await a.call("GET", "/auth/me", { token: t.token })).status).toBe(200)
    const out = await a.call("POST", "/auth/logout", { token: t.token })
    expect(out.status).toBe(200)
    expect(out.headers.get("set-cookie")).toMatch(/^svc_session=; .*Max-Age=0/)
    expect((await a.call("GET", "/auth/me", { token: t.token })).status).toBe(401)
    expect((await a.call("GET", "/auth/me", { headers: { cookie: t.cookie } })).status).toBe(401)
    expect((await a.call("POST", "/auth/logout", { token: t.token })).status).toBe(200)
    expect((await a.call("POST", "/auth/logout")).status).toBe(200)
    const [row] = await srv.sql`select jti from revoked_tokens where jti = ${decodeJwt(t.token).jti!}`
    expect(row).toBeDefined()
    // The user's other sessions live on.
    expect((await a.call("GET", "/auth/me", { token: s.token })).status).toBe(200)
  })

  it("refuses a deactivated user's live session at once", async () => {
    const u = await a.signup()
    expect((await a.call("GET", "/auth/me", { token: u.token })).status).toBe(200)
    await srv.sql`update tenants set status = 'suspended' where id = ${u.tenantId}`
    // The cached session may be up to 30 s old: deactivation goes through the same invalidation.
    await srv.running.runtime.runPromise(
      Effect.flatMap((await import("../../src/auth/Auth.js")).Auth, (auth) =>
        Effect.promise(() => auth.invalidate({ kind: "user", userId: u.userId })),
      ),
    )
    expect(await errorOf(await a.call("GET", "/auth/me", { token: u.token }))).toMatchObject({
      status: 403,
      code: "ACCOUNT_INACTIVE",
    })
  })
})

describe("CSRF on cookie-authenticated changes", () => {
  let s: Session
  beforeAll(async () => {
    s = await a.signup()
  })
  const create = (headers: Record<string, string>) =>
    a.call("POST", "/api-keys", { body: { name: "csrf" }, headers: { cookie: s.cookie, ...headers } })

  it("refuses a cookie POST with no origin or a foreign one", async () => {
    expect(await errorOf(await create({}))).toMatchObject({ status: 403, code: "CSRF_REJECTED" })
    expect(await errorOf(await create({ origin: "https://evil.example" }))).toMatchObject({
      status: 403,
      code: "CSRF_REJECTED",
    })
    expect(await errorOf(await create({ referer: "https://evil.example/page" }))).toMatchObject({
      status: 403,
      code: "CSRF_REJECTED",
    })
    const [{ n }] = await srv.sql<
      [{ n: number }]
    >`select count(*)::int as n from api_keys where tenant_id = ${s.tenantId}`
    expect(n).toBe(0)
  })

  it("accepts the server's own origin and configured origins, and reads without one", async () => {
    expect((await create({ origin: srv.url })).status).toBe(201)
    expect((await create({ origin: ALLOWED })).status).toBe(201)
    expect((await create({ referer: `${ALLOWED}/settings/keys` })).status).toBe(201)
    expect((await a.call("GET", "/api-keys", { headers: { cookie: s.cookie } })).status).toBe(200)
    // A bearer token is not sent by browsers on their own: no origin needed.
    expect((await a.call("POST", "/api-keys", { token: s.token, body: { name: "bearer" } })).status).toBe(201)
  })
})

describe("scopes", () => {
  it("enforces read/write/admin for keys, admin for members, and jwt-only", async () => {
    const owner = await a.signup()
    const keys = {
      read: (await a.createKey(owner, { name: "r", scope: "read" })).secret,
      write: (await a.createKey(owner, { name: "w", scope: "write" })).secret,
      admin: (await a.createKey(owner, { name: "a", scope: "admin" })).secret,
    }
    const routes = [
      ["GET", "/test/read"],
      ["POST", "/test/write"],
      ["POST", "/test/admin"],
      ["POST", "/test/human"],
    ] as const
    const expected: Record<string, number[]> = {
      read: [200, 403, 403, 403],
      write: [200, 200, 403, 403],
      admin: [200, 200, 200, 403],
      owner: [200, 200, 200, 200],
    }
    for (const [who, statuses] of Object.entries(expected)) {
      const token = who === "owner" ? owner.token : keys[who as keyof typeof keys]
      const got = await Promise.all(routes.map(async ([m, p]) => (await a.call(m, p, { token })).status))
      expect(got, who).toEqual(statuses)
    }
    const human = await errorOf(await a.call("POST", "/test/human", { token: keys.admin }))
    expect(human.code).toBe("API_KEY_NOT_ALLOWED")
    expect((await errorOf(await a.call("POST", "/test/write", { token: keys.read }))).code).toBe("INSUFFICIENT_SCOPE")
    const body = (await (await a.call("GET", "/test/read", { token: keys.read })).json()) as {
      kind: string
      tenant: number
    }
    expect(body).toEqual({ kind: "api_key", tenant: owner.tenantId })

    await srv.sql`update users set role = 'supervisor' where id = ${owner.userId}`
    await srv.running.runtime.runPromise(
      Effect.flatMap((await import("../../src/auth/Auth.js")).Auth, (auth) =>
        Effect.promise(() => auth.invalidate({ kind: "user", userId: owner.userId })),
      ),
    )
    // A supervisor reads and supervises; setting things up and destroying them are an admin's.
    expect(await errorOf(await a.call("POST", "/test/admin", { token: owner.token }))).toMatchObject({
      status: 403,
      code: "INSUFFICIENT_ROLE",
    })
    expect((await errorOf(await a.call("POST", "/test/write", { token: owner.token }))).code).toBe("INSUFFICIENT_ROLE")
    expect((await a.call("GET", "/test/read", { token: owner.token })).status).toBe(200)
  })

  it("keeps workspaces apart: another tenant's key is 404", async () => {
    const alice = await a.signup()
    const bob = await a.signup()
    const key = await a.createKey(alice)
    expect(
      await errorOf(await a.call("POST", `/api-keys/${key.id}/revoke`, { token: bob.token, body: {} })),
    ).toMatchObject({ status: 404, code: "NOT_FOUND" })
    expect(await errorOf(await a.call("DELETE", `/api-keys/${key.id}`, { token: bob.token }))).toMatchObject({
      status: 404,
    })
    const bobs = (await (await a.call("GET", "/api-keys", { token: bob.token })).json()) as { keys: unknown[] }
    expect(bobs.keys).toEqual([])
    expect((await a.call("GET", "/auth/me", { token: key.secret })).status).toBe(200)
  })
})

describe("abuse limits on signup and login", () => {
  /** POST /auth/signup on a raw socket, with the Host header we choose. */
  const signupWithHost = (server: TestServer, host: string, email: string) => {
    const body = JSON.stringify({ email, password: "correct horse battery" })
    return rawRequest(
      server.port,
      `POST /auth/signup HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    )
  }

  it("throttles signups per client IP, counting failed attempts, with 429 and Retry-After", async () => {
    const limited = await startTestServer({ env: { SIGNUPS_PER_IP_HOUR: "3", TRUSTED_PROXIES: "127.0.0.1" } })
    try {
      const b = api(limited)
      const from = (ip: string) => ({ "x-forwarded-for": ip })
      const taken = uniqueEmail("taken")
      expect(
        (
          await b.call("POST", "/auth/signup", {
            headers: from("203.0.113.5"),
            body: { email: taken, password: "correct horse battery" },
          })
        ).status,
      ).toBe(201)
      // A taken address still counts: the endpoint cannot be used to test addresses at speed.
      expect(
        (
          await errorOf(
            await b.call("POST", "/auth/signup", {
              headers: from("203.0.113.5"),
              body: { email: taken, password: "correct horse battery" },
            }),
          )
        ).code,
      ).toBe("EMAIL_TAKEN")
      expect(
        (
          await b.call("POST", "/auth/signup", {
            headers: from("203.0.113.5"),
            body: { email: uniqueEmail(), password: "correct horse battery" },
          })
        ).status,
      ).toBe(201)
      const fourth = uniqueEmail("fourth")
      const res = await b.call("POST", "/auth/signup", {
        headers: from("203.0.113.5"),
        body: { email: fourth, password: "correct horse battery" },
      })
      expect(res.status).toBe(429)
      const retryAfter = Number(res.headers.get("retry-after"))
      expect(retryAfter).toBeGreaterThan(3500)
      expect(retryAfter).toBeLessThanOrEqual(3600)
      expect(await res.json()).toMatchObject({ code: "RATE_LIMITED", retry_after_seconds: retryAfter })
      const [{ n }] = await limited.sql<[{ n: number }]>`select count(*)::int as n from users where email = ${fourth}`
      expect(n).toBe(0)
      // Another client behind the same proxy has its own budget.
      expect(
        (
          await b.call("POST", "/auth/signup", {
            headers: from("198.51.100.7"),
            body: { email: fourth, password: "correct horse battery" },
          })
        ).status,
      ).toBe(201)
    } finally {
      await limited.stop()
    }
  })

  it("creates the account but mails no link when the Host is untrusted and PUBLIC_BASE_URL is unset", async () => {
    const other = await startTestServer({ env: { ALLOWED_HOSTS: "app.parley.example" } })
    try {
      const email = uniqueEmail("evilhost")
      const res = await signupWithHost(other, "attacker.example", email)
      expect(res.status).toBe(201)
      const body = JSON.parse(res.body) as {
        verify_email_sent: boolean
        user: { email: string; email_verified: boolean }
      }
      expect(body.verify_email_sent).toBe(false)
      expect(body.user).toMatchObject({ email, email_verified: false })
      expect(readOutbox(other.config.outboxFile).filter((m) => m.to === email)).toEqual([])

      // A Host in ALLOWED_HOSTS is trusted, and the link is built on it.
      const allowed = uniqueEmail("goodhost")
      const ok = await signupWithHost(other, "app.parley.example", allowed)
      expect(ok.status).toBe(201)
      expect((JSON.parse(ok.body) as { verify_email_sent: boolean }).verify_email_sent).toBe(true)
      const [mail] = readOutbox(other.config.outboxFile).filter((m) => m.to === allowed)
      expect(mail!.links[0]).toMatch(/^http:\/\/app\.parley\.example\/auth\/verify-email\?token=/)
    } finally {
      await other.stop()
    }
  })

  it("locks a proxy-forwarded login brute force to the attacker's IP, not the proxy's", {
    timeout: 120_000,
  }, async () => {
    const proxied = await startTestServer({ env: { TRUSTED_PROXIES: "127.0.0.1" } })
    try {
      const b = api(proxied)
      const victim = await b.signup()
      const attacker = { "x-forwarded-for": "203.0.113.9" }
      // 100 failures from one address (each against a different account, so no account locks).
      for (let i = 0; i < 100; i += 5)
        await Promise.all(
          Array.from({ length: 5 }, async () =>
            expect(
              (
                await b.call("POST", "/auth/login", {
                  headers: attacker,
                  body: { email: uniqueEmail("guess"), password: "not the password" },
                })
              ).status,
            ).toBe(401),
          ),
        )
      const locked = await b.call("POST", "/auth/login", {
        headers: attacker,
        body: { email: victim.email, password: victim.password },
      })
      expect(locked.status).toBe(429)
      expect(Number(locked.headers.get("retry-after"))).toBeGreaterThan(0)
      // Everyone else behind the same proxy still signs in.
      const bystander = await b.call("POST", "/auth/login", {
        headers: { "x-forwarded-for": "198.51.100.7" },
        body: { email: victim.email, password: victim.password },
      })
      expect(bystander.status).toBe(200)
      const keys = (
        await proxied.sql<{ key: string }[]>`select key from login_failures where locked_until > now()`
      ).map((r) => r.key)
      expect(keys).toEqual(["ip:203.0.113.9"])
    } finally {
      await proxied.stop()
    }
  })
})
