// Sign-in by emailed code through the real server: start, resend and verify (single use, attempt
// limit, expiry, rate limit, concurrency, inactive accounts), the hourly guess and send budgets per
// address and per client IP (also behind a proxy), and ALTCHA on signup, OTP start and resend.
import { randomBytes } from "node:crypto"
import { type Challenge, solveChallenge } from "altcha-lib"
import { deriveKey } from "altcha-lib/algorithms/sha"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type OutboxLine, readOutbox } from "../../src/providers/mail/outbox.mail.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

const PASSWORD = "correct horse battery staple"
const SESSION_SECONDS = 7 * 24 * 3600

type Json = Record<string, any>

const uniqueEmail = (tag: string) => `${tag}-${randomBytes(4).toString("hex")}@example.com`

/** Another 6-digit code than `code`. */
const wrongFor = (code: string, step = 1) => String((Number(code) + step) % 1_000_000).padStart(6, "0")

function client(srv: () => TestServer, headers: Record<string, string> = {}) {
  const post = async (path: string, body: unknown, raw = false) => {
    const res = await fetch(srv().url + path, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: raw ? (body as string) : JSON.stringify(body),
    })
    return { res, status: res.status, body: (await res.json()) as Json }
  }
  const signup = async (email: string, extra: Json = {}) => {
    const r = await post("/auth/signup", {
      email,
      password: PASSWORD,
      full_name: "Ada Lovelace",
      country: "GB",
      ...extra,
    })
    if (r.status !== 201) throw new Error(`signup ${r.status}: ${JSON.stringify(r.body)}`)
    return r.body
  }
  const otpMails = (email: string): OutboxLine[] =>
    readOutbox(srv().config.outboxFile).filter((m) => m.kind === "otp" && m.to === email)
  /** The code in the newest OTP mail to `email`, checked to appear in subject, text and html. */
  const latestCode = (email: string): string => {
    const mail = otpMails(email).at(-1)
    if (!mail) throw new Error(`no otp mail to ${email}`)
    const code = /\b(\d{6})\b/.exec(mail.subject)?.[1]
    if (code === undefined) throw new Error(`no code in subject: ${mail.subject}`)
    expect(mail.text).toContain(code)
    expect(mail.html).toContain(code)
    return code
  }
  const start = (email: string, extra: Json = {}) => post("/auth/otp/start", { email, ...extra })
  const resend = (email: string, extra: Json = {}) => post("/auth/otp/resend", { email, ...extra })
  const verify = (email: string, code: string) => post("/auth/otp/verify", { email, code })
  return { post, signup, otpMails, latestCode, start, resend, verify }
}

/** Signs up `email` and starts a code for it; answers the code from the outbox. */
async function userWithCode(c: ReturnType<typeof client>, tag: string): Promise<{ email: string; code: string }> {
  const email = uniqueEmail(tag)
  await c.signup(email)
  const r = await c.start(email)
  expect(r.status).toBe(200)
  return { email, code: c.latestCode(email) }
}

const expectError = (r: { status: number; body: Json }, status: number, code: string, field?: string) => {
  expect(r.status, JSON.stringify(r.body)).toBe(status)
  expect(r.body.code).toBe(code)
  expect(typeof r.body.error).toBe("string")
  if (field !== undefined) expect(r.body.field).toBe(field)
}

const GENERIC = {
  ok: true,
  message: expect.any(String),
  expires_in: 600,
  resend_after: 30,
}

describe("OTP sign-in", () => {
  let srv: TestServer
  beforeAll(async () => {
    srv = await sharedTestServer()
  })
  afterAll(async () => {
    await srv?.stop()
  })
  const c = client(() => srv)

  describe("start", () => {
    it("mails a 6-digit code to an existing user and answers generically", async () => {
      const email = uniqueEmail("start")
      await c.signup(email)
      expect(c.otpMails(email)).toHaveLength(0)
      const r = await c.start(email)
      expect(r.status).toBe(200)
      expect(r.body).toEqual(GENERIC)
      const mails = c.otpMails(email)
      expect(mails).toHaveLength(1)
      expect(mails[0]!.subject).toMatch(/\b\d{6}\b/)
      expect(mails[0]!.text).toMatch(/\b\d{6}\b/)
      const code = c.latestCode(email)
      expect(code).toMatch(/^\d{6}$/)
      // Only a hash is stored, never the code itself.
      const [row] = await srv.sql<
        { code_sha256: Buffer | null; attempts: number }[]
      >`select code_sha256, attempts from otp_codes where email = ${email}`
      expect(row!.code_sha256).not.toBeNull()
      expect(row!.code_sha256!.includes(Buffer.from(code))).toBe(false)
      expect(row!.attempts).toBe(0)
    })

    it("answers an address without an account identically and mails nothing", async () => {
      const known = uniqueEmail("known")
      await c.signup(known)
      const unknown = uniqueEmail("nobody")
      const forKnown = await c.start(known)
      const before = readOutbox(srv.config.outboxFile).length
      const forUnknown = await c.start(unknown)
      expect(forKnown.status).toBe(200)
      expect(forUnknown.status).toBe(200)
      expect(JSON.stringify(forUnknown.body)).toBe(JSON.stringify(forKnown.body))
      const after = readOutbox(srv.config.outboxFile)
      expect(after).toHaveLength(before)
      expect(after.filter((m) => m.to === unknown)).toHaveLength(0)
      // And no code anyone could guess.
      expectError(await c.verify(unknown, "000000"), 401, "INVALID_CREDENTIALS")
    })

    it("answers an inactive user generically and mails nothing", async () => {
      const email = uniqueEmail("dormant")
      await c.signup(email)
      await srv.sql`update users set status = 'inactive' where email = ${email}`
      const r = await c.start(email)
      expect(r.status).toBe(200)
      expect(r.body).toEqual(GENERIC)
      expect(c.otpMails(email)).toHaveLength(0)
    })

    it("normalises the address's case", async () => {
      const email = uniqueEmail("case")
      await c.signup(email)
      expect((await c.start(email.toUpperCase())).status).toBe(200)
      const code = c.latestCode(email)
      expect((await c.verify(`  ${email.toUpperCase()}`, code)).status).toBe(200)
    })
  })

  describe("verify", () => {
    it("signs in like login, sets the session cookie and verifies the email", async () => {
      const email = uniqueEmail("verify")
      const created = await c.signup(email)
      const [before] = await srv.sql<
        { email_verified: boolean }[]
      >`select email_verified from users where email = ${email}`
      expect(before!.email_verified).toBe(false)
      expect((await c.start(email)).status).toBe(200)
      const code = c.latestCode(email)

      const t0 = Date.now()
      const r = await c.verify(email, code)
      expect(r.status, JSON.stringify(r.body)).toBe(200)
      expect(Object.keys(r.body).sort()).toEqual(["expires_at", "expires_in", "tenant", "token", "user"])
      expect(typeof r.body.token).toBe("string")
      expect(r.body.token.length).toBeGreaterThan(20)
      expect(r.body.expires_in).toBe(SESSION_SECONDS)
      const exp = Date.parse(r.body.expires_at)
      expect(new Date(exp).toISOString()).toBe(r.body.expires_at)
      expect(exp).toBeGreaterThanOrEqual(t0 + SESSION_SECONDS * 1000 - 2000)
      expect(exp).toBeLessThanOrEqual(Date.now() + SESSION_SECONDS * 1000 + 1000)
      expect(r.body.user).toMatchObject({ id: created.user.id, email, email_verified: true, full_name: "Ada Lovelace" })
      expect(r.body.user).not.toHaveProperty("password_hash")
      expect(r.body.tenant).toMatchObject({ id: created.tenant.id, country: "GB", currency: "USD" })
      expect(r.res.headers.get("cache-control")).toBe("no-store")

      const cookie = r.res.headers.get("set-cookie")
      expect(cookie).not.toBeNull()
      expect(cookie!.startsWith(`svc_session=${r.body.token};`)).toBe(true)
      const attrs = cookie!.split(";").map((s) => s.trim())
      expect(attrs).toContain("HttpOnly")
      expect(attrs).toContain("Secure")
      expect(attrs).toContain("SameSite=Lax")

      const me = await fetch(`${srv.url}/auth/me`, { headers: { authorization: `Bearer ${r.body.token}` } })
      expect(me.status).toBe(200)
      const meBody = (await me.json()) as Json
      expect(meBody.user).toMatchObject({ id: created.user.id, email, email_verified: true })
      expect(meBody.tenant.id).toBe(created.tenant.id)

      const [after] = await srv.sql<
        { email_verified: boolean; email_verified_at: Date | null }[]
      >`select email_verified, email_verified_at from users where email = ${email}`
      expect(after!.email_verified).toBe(true)
      expect(after!.email_verified_at).toBeInstanceOf(Date)
    })

    it("accepts a code once", async () => {
      const { email, code } = await userWithCode(c, "once")
      expect((await c.verify(email, code)).status).toBe(200)
      expectError(await c.verify(email, code), 401, "INVALID_CREDENTIALS")
    })

    it("spends the code after 5 wrong guesses", async () => {
      const { email, code } = await userWithCode(c, "five")
      for (let i = 1; i <= 5; i++) {
        const r = await c.verify(email, wrongFor(code, i))
        expectError(r, 401, "INVALID_CREDENTIALS")
        expect(r.res.headers.get("set-cookie")).toBeNull()
      }
      expectError(await c.verify(email, code), 401, "INVALID_CREDENTIALS")
    })

    it("still takes the right code after fewer than 5 wrong guesses", async () => {
      const two = await userWithCode(c, "two")
      for (let i = 1; i <= 2; i++)
        expectError(await c.verify(two.email, wrongFor(two.code, i)), 401, "INVALID_CREDENTIALS")
      expect((await c.verify(two.email, two.code)).status).toBe(200)

      // The boundary: the fourth wrong guess leaves the code alive.
      const four = await userWithCode(c, "four")
      for (let i = 1; i <= 4; i++)
        expectError(await c.verify(four.email, wrongFor(four.code, i)), 401, "INVALID_CREDENTIALS")
      expect((await c.verify(four.email, four.code)).status).toBe(200)
    })

    it("refuses an expired code", async () => {
      const { email, code } = await userWithCode(c, "expired")
      const moved =
        await srv.sql`update otp_codes set expires_at = ${new Date(Date.now() - 1000)} where email = ${email}`
      expect(moved.count).toBe(1)
      expectError(await c.verify(email, code), 401, "INVALID_CREDENTIALS")
    })

    it("refuses an inactive user's correct code with 403 ACCOUNT_INACTIVE", async () => {
      const { email, code } = await userWithCode(c, "inactive")
      await srv.sql`update users set status = 'inactive' where email = ${email}`
      const r = await c.verify(email, code)
      expectError(r, 403, "ACCOUNT_INACTIVE")
      expect(r.body).not.toHaveProperty("token")
      expect(r.res.headers.get("set-cookie")).toBeNull()
    })

    it("refuses a correct code when the workspace is suspended", async () => {
      const { email, code } = await userWithCode(c, "suspended")
      await srv.sql`update tenants set status = 'suspended'
        where id = (select tenant_id from users where email = ${email})`
      expectError(await c.verify(email, code), 403, "ACCOUNT_INACTIVE")
    })

    it("lets exactly one of several simultaneous verifies of the right code through", async () => {
      const { email, code } = await userWithCode(c, "verifyrace")
      const results = await Promise.all(Array.from({ length: 5 }, () => c.verify(email, code)))
      expect(results.map((r) => r.status).sort()).toEqual([200, 401, 401, 401, 401])
    })

    it("counts simultaneous wrong guesses, so a burst cannot get past the limit", async () => {
      const { email, code } = await userWithCode(c, "guessrace")
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => c.verify(email, wrongFor(code, i + 1))))
      for (const r of results) expectError(r, 401, "INVALID_CREDENTIALS")
      const [row] = await srv.sql<
        { code_sha256: Buffer | null; attempts: number }[]
      >`select code_sha256, attempts from otp_codes where email = ${email}`
      expect(row!.code_sha256).toBeNull()
      expect(row!.attempts).toBe(5)
      expectError(await c.verify(email, code), 401, "INVALID_CREDENTIALS")
    })
  })

  describe("rate limit", () => {
    it("refuses a second start or a resend within 30 s, then sends a new code once it has passed", async () => {
      const { email, code: first } = await userWithCode(c, "resend")
      for (const again of [() => c.start(email), () => c.resend(email)]) {
        const r = await again()
        expectError(r, 429, "RATE_LIMITED")
        const retryAfter = Number(r.res.headers.get("retry-after"))
        expect(Number.isInteger(retryAfter)).toBe(true)
        expect(retryAfter).toBeGreaterThanOrEqual(1)
        expect(retryAfter).toBeLessThanOrEqual(30)
        // Asked again at once, nearly the whole window is left.
        expect(retryAfter).toBeGreaterThanOrEqual(25)
        expect(r.body.retry_after_seconds).toBe(retryAfter)
      }
      expect(c.otpMails(email)).toHaveLength(1)

      // 20 s into the window, about 10 s are left.
      await srv.sql`update otp_codes set last_sent_at = last_sent_at - interval '20 seconds' where email = ${email}`
      const later = await c.resend(email)
      expectError(later, 429, "RATE_LIMITED")
      expect(later.body.retry_after_seconds).toBeGreaterThanOrEqual(8)
      expect(later.body.retry_after_seconds).toBeLessThanOrEqual(10)
      expect(later.res.headers.get("retry-after")).toBe(String(later.body.retry_after_seconds))
      // The refusals left the first code alive and untouched.
      const [kept] = await srv.sql<
        { attempts: number; code_sha256: Buffer | null }[]
      >`select attempts, code_sha256 from otp_codes where email = ${email}`
      expect(kept!.code_sha256).not.toBeNull()
      expect(kept!.attempts).toBe(0)

      const moved =
        await srv.sql`update otp_codes set last_sent_at = ${new Date(Date.now() - 31_000)} where email = ${email}`
      expect(moved.count).toBe(1)
      const r = await c.resend(email)
      expect(r.status).toBe(200)
      expect(r.body).toEqual(GENERIC)
      expect(c.otpMails(email)).toHaveLength(2)
      const second = c.latestCode(email)
      // A fresh code replaces the old one (the two coincide once in a million draws).
      if (second !== first) expectError(await c.verify(email, first), 401, "INVALID_CREDENTIALS")
      expect((await c.verify(email, second)).status).toBe(200)
    })

    it("limits unknown addresses the same way", async () => {
      const email = uniqueEmail("ghost")
      expect((await c.start(email)).status).toBe(200)
      const r = await c.start(email)
      expectError(r, 429, "RATE_LIMITED")
      const retryAfter = Number(r.res.headers.get("retry-after"))
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      expect(retryAfter).toBeLessThanOrEqual(30)
      expect(r.body.retry_after_seconds).toBe(retryAfter)
      expectError(await c.resend(email), 429, "RATE_LIMITED")
      await srv.sql`update otp_codes set last_sent_at = last_sent_at - interval '31 seconds' where email = ${email}`
      expect((await c.resend(email)).status).toBe(200)
      expect(readOutbox(srv.config.outboxFile).filter((m) => m.to === email)).toHaveLength(0)
    })

    it("lets exactly one of 5 simultaneous starts through and sends one mail", async () => {
      const email = uniqueEmail("race")
      await c.signup(email)
      const results = await Promise.all(Array.from({ length: 5 }, () => c.start(email)))
      const statuses = results.map((r) => r.status).sort()
      expect(statuses).toEqual([200, 429, 429, 429, 429])
      for (const r of results.filter((r) => r.status === 429)) expect(r.body.code).toBe("RATE_LIMITED")
      expect(c.otpMails(email)).toHaveLength(1)
      // The mailed code is the one that is live.
      expect((await c.verify(email, c.latestCode(email))).status).toBe(200)
    })
  })

  describe("hourly budgets", () => {
    /** Lets the 30-second resend gap pass for `email`. */
    const afterGap = (email: string) =>
      srv.sql`update otp_codes set last_sent_at = last_sent_at - interval '31 seconds' where email = ${email}`

    it(
      "holds the guess budget per address across resends: " +
        "the 11th guess is 429, the right code too, until the window ends",
      async () => {
        const { email, code: first } = await userWithCode(c, "budget")
        for (let i = 1; i <= 5; i++) expectError(await c.verify(email, wrongFor(first, i)), 401, "INVALID_CREDENTIALS")
        await afterGap(email)
        expect((await c.resend(email)).status).toBe(200)
        const second = c.latestCode(email)
        for (let i = 1; i <= 5; i++) expectError(await c.verify(email, wrongFor(second, i)), 401, "INVALID_CREDENTIALS")
        // A new code does not buy new guesses.
        await afterGap(email)
        expect((await c.resend(email)).status).toBe(200)
        const third = c.latestCode(email)
        const eleventh = await c.verify(email, wrongFor(third, 1))
        expectError(eleventh, 429, "RATE_LIMITED")
        const retryAfter = Number(eleventh.res.headers.get("retry-after"))
        expect(retryAfter).toBeGreaterThan(3500)
        expect(retryAfter).toBeLessThanOrEqual(3600)
        expect(eleventh.body.retry_after_seconds).toBe(retryAfter)
        const right = await c.verify(email, third)
        expectError(right, 429, "RATE_LIMITED")
        expect(right.res.headers.get("set-cookie")).toBeNull()
        // The refusals did not touch the code: once the window has ended, it works.
        await srv.sql`update rate_counters set window_started_at = window_started_at - interval '1 hour'
          where key like ${`otp:guess:addr:${email}`}`
        const later = await c.verify(email, third)
        expect(later.status, JSON.stringify(later.body)).toBe(200)
        expect(later.body.user.email).toBe(email)
      },
    )

    it("counts guesses at an address with no account the same way", async () => {
      const ghost = uniqueEmail("ghostguess")
      expect((await c.start(ghost)).status).toBe(200)
      for (let i = 0; i < 10; i++) expectError(await c.verify(ghost, String(100_000 + i)), 401, "INVALID_CREDENTIALS")
      expectError(await c.verify(ghost, "200000"), 429, "RATE_LIMITED")
    })

    it("mails at most 5 codes per address per hour, for known and unknown addresses alike", async () => {
      for (const known of [true, false]) {
        const email = uniqueEmail(known ? "flood" : "floodghost")
        if (known) await c.signup(email)
        expect((await c.start(email)).status).toBe(200)
        for (let i = 0; i < 4; i++) {
          await afterGap(email)
          expect((await c.resend(email)).status).toBe(200)
        }
        await afterGap(email)
        const sixth = await c.resend(email)
        expectError(sixth, 429, "RATE_LIMITED")
        expect(Number(sixth.res.headers.get("retry-after"))).toBeGreaterThan(3500)
        await afterGap(email)
        expectError(await c.start(email), 429, "RATE_LIMITED")
        expect(c.otpMails(email)).toHaveLength(known ? 5 : 0)
        if (known) expect((await c.verify(email, c.latestCode(email))).status).toBe(200)
      }
    })
  })

  describe("bad input", () => {
    it("refuses a bad email with 422 on start, resend and verify", async () => {
      for (const email of ["not-an-email", "", "a@", 42]) {
        expectError(await c.post("/auth/otp/start", { email }), 422, "VALIDATION_FAILED", "email")
        expectError(await c.post("/auth/otp/resend", { email }), 422, "VALIDATION_FAILED", "email")
        expectError(await c.post("/auth/otp/verify", { email, code: "123456" }), 422, "VALIDATION_FAILED", "email")
      }
      expectError(await c.post("/auth/otp/start", {}), 422, "VALIDATION_FAILED", "email")
    })

    it("refuses a code that is not 6 digits with 422", async () => {
      const email = uniqueEmail("badcode")
      for (const code of ["12345", "abcdef", "1234567", "12 456", 123456]) {
        expectError(await c.post("/auth/otp/verify", { email, code }), 422, "VALIDATION_FAILED", "code")
      }
    })

    it("answers malformed JSON with 400 BAD_JSON", async () => {
      for (const path of ["/auth/otp/start", "/auth/otp/resend", "/auth/otp/verify"]) {
        expectError(await c.post(path, '{"email": "a@example.com",', true), 400, "BAD_JSON")
      }
    })
  })

  it("needs no challenge for signup when ALTCHA is not required", async () => {
    const email = uniqueEmail("plain")
    const r = await c.post("/auth/signup", { email, password: PASSWORD })
    expect(r.status, JSON.stringify(r.body)).toBe(201)
    expect(r.body.user.email).toBe(email)
  })
})

describe("ALTCHA_REQUIRED", () => {
  let srv: TestServer
  beforeAll(async () => {
    srv = await sharedTestServer({ env: { ALTCHA_REQUIRED: "true" } })
  })
  afterAll(async () => {
    await srv?.stop()
  })
  const c = client(() => srv)

  /** A fresh challenge from the server, solved as the widget does, as the base64 payload. */
  const solved = async (): Promise<string> => {
    const res = await fetch(`${srv.url}/auth/altcha/challenge`)
    expect(res.status).toBe(200)
    const challenge = (await res.json()) as Record<string, unknown>
    const solution = await solveChallenge({ challenge: challenge as unknown as Challenge, deriveKey })
    if (solution === null) throw new Error("challenge not solved")
    return Buffer.from(JSON.stringify({ challenge, solution })).toString("base64")
  }
  const usersWith = async (email: string) =>
    (await srv.sql<{ n: number }[]>`select count(*)::int as n from users where email = ${email}`)[0]!.n

  it("serves a JSON challenge", async () => {
    const res = await fetch(`${srv.url}/auth/altcha/challenge`)
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toMatch(/^application\/json/)
    expect(res.headers.get("cache-control")).toBe("no-store")
    const body = (await res.json()) as Json
    expect(Object.keys(body).sort()).toEqual(["parameters", "signature"])
    expect(body.signature).toMatch(/^[0-9a-f]{64}$/)
    for (const k of ["algorithm", "nonce", "salt", "keyPrefix"]) expect(typeof body.parameters[k]).toBe("string")
    expect(body.parameters.expiresAt).toBeGreaterThan(Date.now() / 1000)
  })

  it("refuses signup without a solution and creates nothing", async () => {
    const email = uniqueEmail("nochallenge")
    expectError(await c.post("/auth/signup", { email, password: PASSWORD }), 400, "CHALLENGE_REQUIRED", "altcha")
    expect(await usersWith(email)).toBe(0)
    expectError(
      await c.post("/auth/signup", { email, password: PASSWORD, altcha: "bm90IGEgc29sdXRpb24=" }),
      400,
      "CHALLENGE_FAILED",
      "altcha",
    )
    expect(await usersWith(email)).toBe(0)
  })

  it("accepts a solved challenge once", { timeout: 60_000 }, async () => {
    const payload = await solved()
    const email = uniqueEmail("solved")
    const r = await c.post("/auth/signup", { email, password: PASSWORD, altcha: payload })
    expect(r.status, JSON.stringify(r.body)).toBe(201)
    expect(await usersWith(email)).toBe(1)

    const other = uniqueEmail("replay")
    expectError(
      await c.post("/auth/signup", { email: other, password: PASSWORD, altcha: payload }),
      400,
      "CHALLENGE_FAILED",
      "altcha",
    )
    expect(await usersWith(other)).toBe(0)
  })

  it("needs a solution for OTP start too", { timeout: 60_000 }, async () => {
    const email = uniqueEmail("otpchallenge")
    await c.signup(email, { altcha: await solved() })
    expectError(await c.start(email), 400, "CHALLENGE_REQUIRED", "altcha")
    expect(c.otpMails(email)).toHaveLength(0)
    // The refusal did not count against the rate limit.
    const r = await c.start(email, { altcha: await solved() })
    expect(r.status, JSON.stringify(r.body)).toBe(200)
    expect(r.body).toEqual(GENERIC)
    expect(c.otpMails(email)).toHaveLength(1)
    expect((await c.verify(email, c.latestCode(email))).status).toBe(200)
  })

  it("needs a solution for resend too, and resend still acts only after a start", { timeout: 60_000 }, async () => {
    const email = uniqueEmail("resendbypass")
    await c.signup(email, { altcha: await solved() })
    expectError(await c.resend(email), 400, "CHALLENGE_REQUIRED", "altcha")
    expectError(await c.resend(email, { altcha: "bm90IGEgc29sdXRpb24=" }), 400, "CHALLENGE_FAILED", "altcha")
    const early = await c.resend(email, { altcha: await solved() })
    expect(early.status).toBe(200)
    expect(early.body).toEqual(GENERIC)
    expect(c.otpMails(email)).toHaveLength(0)
    expect(await srv.sql`select email from otp_codes where email = ${email}`).toHaveLength(0)

    expect((await c.start(email, { altcha: await solved() })).status).toBe(200)
    await srv.sql`update otp_codes set last_sent_at = last_sent_at - interval '31 seconds' where email = ${email}`
    expectError(await c.resend(email), 400, "CHALLENGE_REQUIRED", "altcha")
    expect(c.otpMails(email)).toHaveLength(1)
    expect((await c.resend(email, { altcha: await solved() })).status).toBe(200)
    expect(c.otpMails(email)).toHaveLength(2)
    expect((await c.verify(email, c.latestCode(email))).status).toBe(200)
  })
})

describe("OTP budgets per client IP behind a trusted proxy", () => {
  let srv: TestServer
  beforeAll(async () => {
    srv = await sharedTestServer({ env: { TRUSTED_PROXIES: "127.0.0.1", OTP_GUESSES_PER_IP_HOUR: "50" } })
  })
  afterAll(async () => {
    await srv?.stop()
  })
  const from = (ip: string) => client(() => srv, { "x-forwarded-for": ip })

  it("locks the guessing IP across addresses, not the proxy: others still sign in", async () => {
    const attacker = from("203.0.113.9")
    const bystander = from("198.51.100.7")
    const victim = uniqueEmail("victim")
    await bystander.signup(victim)
    expect((await bystander.start(victim)).status).toBe(200)
    const code = bystander.latestCode(victim)
    // 50 wrong guesses spread over 5 addresses (under each address's budget of 10), none of them real.
    for (let a = 0; a < 5; a++) {
      const target = uniqueEmail("sprayed")
      for (let i = 0; i < 10; i++)
        expectError(await attacker.verify(target, String(300_000 + i)), 401, "INVALID_CREDENTIALS")
    }
    // The 51st, at an address it has not tried, with the right code: refused for the hour.
    const locked = await attacker.verify(victim, code)
    expectError(locked, 429, "RATE_LIMITED")
    expect(Number(locked.res.headers.get("retry-after"))).toBeGreaterThan(3500)
    const [row] = await srv.sql<
      { hits: number }[]
    >`select hits from rate_counters where key = ${"otp:guess:ip:203.0.113.9"}`
    expect(row!.hits).toBe(51)
    expect(await srv.sql`select key from rate_counters where key = ${"otp:guess:ip:127.0.0.1"}`).toHaveLength(0)
    // Another client behind the same proxy is unaffected.
    const ok = await bystander.verify(victim, code)
    expect(ok.status, JSON.stringify(ok.body)).toBe(200)
  })

  it("caps the codes one IP may have mailed per hour, across addresses", async () => {
    const sender = from("203.0.113.77")
    for (let i = 0; i < 50; i++) expect((await sender.start(uniqueEmail("spam"))).status).toBe(200)
    const refused = await sender.start(uniqueEmail("spam"))
    expectError(refused, 429, "RATE_LIMITED")
    expect(Number(refused.res.headers.get("retry-after"))).toBeGreaterThan(3500)
    expect((await from("198.51.100.8").start(uniqueEmail("fine"))).status).toBe(200)
  })
})
