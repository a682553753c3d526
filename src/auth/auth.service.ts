// Email verification, login, logout and the current session: the rules of identity. Signup, which
// also makes the workspace, its wallet and trial, is src/signup (it uses the owner's account and
// the verification link from here). Passwords are argon2id; sessions are JWTs whose ids logout
// revokes; failures are throttled.
import { randomBytes } from "node:crypto"
import { Effect } from "effect"
import { Clock } from "../platform/Clock.js"
import { Db, type Tx } from "../platform/Db.js"
import { BadRequest, Conflict, Forbidden, RateLimited, Unauthenticated } from "../platform/errors.js"
import * as counters from "../platform/rate-counters.repo.js"
import { sendBestEffort } from "../providers/Mail.js"
import { findTenant, type TenantRow, tenantView } from "../workspaces/workspaces.repo.js"
import { Auth } from "./Auth.js"
import * as repo from "./auth.repo.js"
import { sha256 } from "./authenticator.js"
import { SESSION_SECONDS } from "./jwt.js"
import { burnPasswordCheck, verifyPassword } from "./passwords.js"
import type { UserPrincipal } from "./principal.js"
import * as throttle from "./throttle.js"

const VERIFY_EMAIL_HOURS = 24

/** Mails the verification link; false (logged) when the mailer fails. */
export const sendVerification = (to: string, token: string, baseUrl: string) => {
  const link = `${baseUrl}/auth/verify-email?token=${token}`
  return sendBestEffort({
    to,
    kind: "verify_email",
    subject: "Verify your email for Parley",
    text:
      "Welcome to Parley. Confirm your email address by opening this link within " +
      `${VERIFY_EMAIL_HOURS} hours:\n\n${link}\n`,
    html:
      `<p>Welcome to Parley.</p><p><a href="${link}">Confirm your email address</a>` +
      ` within ${VERIFY_EMAIL_HOURS} hours.</p>`,
    links: [link],
  })
}

/**
 * A new verification link's token for the user, stored in `tx` as its digest (valid for
 * VERIFY_EMAIL_HOURS; earlier ones stay valid until they expire).
 */
export const newEmailVerification = async (tx: Tx, userId: number, now: Date): Promise<string> => {
  const token = randomBytes(32).toString("base64url")
  await repo.insertEmailVerification(tx, {
    tokenSha256: sha256(token),
    userId,
    expiresAt: new Date(now.getTime() + VERIFY_EMAIL_HOURS * 3_600_000),
  })
  return token
}

/** Verification emails a user may ask for again in an hour (the signup's own is not counted). */
export const VERIFY_RESENDS_PER_HOUR = 5

/**
 * Mails the signed-in user a new verification link (the old one stays valid until it expires).
 * Nothing is sent to an address already verified; budgeted per user.
 */
export const resendVerification = (user: UserPrincipal, baseUrl: string | undefined) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const now = clock.now()
    const found = yield* Effect.promise(() => repo.findUser(sql, user.userId))
    if (!found) return yield* Effect.fail(new Unauthenticated({ message: "invalid session token" }))
    if (found.email_verified) return { sent: false, already_verified: true }
    const budget = yield* Effect.promise(() =>
      counters.hit(
        sql,
        `verify-resend:user:${user.userId}`,
        { limit: VERIFY_RESENDS_PER_HOUR, windowMs: counters.HOUR_MS },
        now,
      ),
    )
    if (!budget.allowed)
      return yield* Effect.fail(
        new RateLimited({
          retryAfterSeconds: budget.retryAfterSeconds,
          message: `at most ${VERIFY_RESENDS_PER_HOUR} verification emails an hour; check your inbox and spam folder`,
        }),
      )
    if (baseUrl === undefined)
      return yield* Effect.fail(
        new Conflict({ message: "no trusted base URL for the link: set PUBLIC_BASE_URL (or ALLOWED_HOSTS)" }),
      )
    const token = yield* Effect.promise(() => sql.begin((tx) => newEmailVerification(tx, user.userId, now)))
    const sent = yield* sendVerification(found.email, token, baseUrl)
    return { sent, already_verified: false }
  })

export const verifyEmail = (token: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const outcome = yield* Effect.promise(() => repo.consumeEmailVerification(sql, sha256(token), clock.now()))
    switch (outcome.kind) {
      case "unknown":
        return yield* Effect.fail(
          new BadRequest({ code: "INVALID_TOKEN", field: "token", message: "this verification link is not valid" }),
        )
      case "expired":
        return yield* Effect.fail(
          new BadRequest({
            code: "TOKEN_EXPIRED",
            field: "token",
            message: "this verification link has expired; sign in to get a new one",
          }),
        )
      case "verified":
        return { ok: true, email: outcome.email, verified_at: outcome.verifiedAt.toISOString() }
    }
  })

/** Issues a session for a user who has proven who they are (password or OTP). */
export const issueSession = (user: repo.UserRow, tenant: TenantRow) =>
  Effect.gen(function* () {
    const auth = yield* Auth
    const clock = yield* Clock
    const { token, claims } = yield* Effect.promise(() =>
      auth.jwt.sign(
        { id: user.id, tenantId: tenant.id, role: user.role, email: user.email },
        Math.floor(clock.nowMs() / 1000),
      ),
    )
    return {
      token,
      expires_in: SESSION_SECONDS,
      expires_at: new Date(claims.exp * 1000).toISOString(),
      user: repo.userView(user),
      tenant: tenantView(tenant),
    }
  })

/** Refuses sign-in for accounts that may not have a session. */
export const assertCanSignIn = (user: repo.UserRow, tenant: TenantRow) =>
  user.status !== "active" || tenant.status !== "active"
    ? Effect.fail(new Forbidden({ code: "ACCOUNT_INACTIVE", message: "this account is not active" }))
    : Effect.void

export const login = (input: { email: string; password: string; ip: string }) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const now = clock.now()
    const keys = [throttle.accountKey(input.email), throttle.addressKey(input.ip)]
    const locked = yield* Effect.promise(() => throttle.lockedFor(sql, keys, now))
    if (locked !== undefined)
      return yield* Effect.fail(
        new RateLimited({ retryAfterSeconds: locked, message: "too many failed sign-ins; try again later" }),
      )

    const user = yield* Effect.promise(() => repo.findUserByEmail(sql, input.email))
    if (user && user.password_hash === null)
      return yield* Effect.fail(
        new BadRequest({
          code: "OAUTH_ONLY_ACCOUNT",
          message: "this account signs in through its identity provider, not a password",
        }),
      )
    const ok = user?.password_hash
      ? yield* Effect.promise(() => verifyPassword(user.password_hash!, input.password))
      : false
    if (!user || !ok) {
      if (!user) yield* Effect.promise(() => burnPasswordCheck(input.password))
      const [account] = yield* Effect.promise(() =>
        Promise.all([
          throttle.recordFailure(sql, keys[0]!, throttle.DEFAULT_LIMITS.account, now),
          throttle.recordFailure(sql, keys[1]!, throttle.DEFAULT_LIMITS.address, now),
        ]),
      )
      yield* Effect.sleep(throttle.failureDelayMs(account))
      return yield* Effect.fail(
        new Unauthenticated({ code: "INVALID_CREDENTIALS", message: "wrong email or password" }),
      )
    }
    const tenant = yield* Effect.promise(() => findTenant(sql, user.tenant_id))
    if (!tenant) return yield* Effect.die(new Error(`user ${user.id} has no tenant`))
    yield* assertCanSignIn(user, tenant)
    yield* Effect.promise(() => throttle.clearFailures(sql, keys[0]!))
    return yield* issueSession(user, tenant)
  })

/** Revokes the presented session (if it is a valid one); always succeeds. */
export const logout = (token: string | undefined) =>
  Effect.gen(function* () {
    if (token === undefined) return
    const auth = yield* Auth
    const { sql } = yield* Db
    const clock = yield* Clock
    const verified = yield* Effect.promise(() => auth.jwt.verify(token, Math.floor(clock.nowMs() / 1000)))
    if (!verified.ok) return
    const c = verified.claims
    yield* Effect.promise(() =>
      repo.revokeSession(sql, { jti: c.jti, userId: Number(c.sub), expiresAt: new Date(c.exp * 1000) }),
    )
    yield* Effect.promise(() => auth.invalidate({ kind: "session", jti: c.jti }))
  })

export const me = (principal: UserPrincipal) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const user = yield* Effect.promise(() => repo.findUser(sql, principal.userId))
    const tenant = user && (yield* Effect.promise(() => findTenant(sql, user.tenant_id)))
    if (!user || !tenant) return yield* Effect.fail(new Unauthenticated({ message: "invalid session token" }))
    return {
      user: repo.userView(user),
      tenant: tenantView(tenant),
      expires_at: new Date(principal.expiresAt * 1000).toISOString(),
    }
  })
