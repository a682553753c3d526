// One-time sign-in codes by email: a 6-digit code valid 10 minutes, at most one send per 30 s
// per address, 5 wrong guesses spend it, and hourly budgets per address and per client IP that
// no new code resets. Start, resend and verify answer the same whether or not an account exists,
// so the endpoints can't be used to find out who has one.
import { createHash, randomInt, timingSafeEqual } from "node:crypto"
import { Effect } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import { Clock } from "../platform/Clock.js"
import { Db, type Sql } from "../platform/Db.js"
import { RateLimited, Unauthenticated } from "../platform/errors.js"
import * as counters from "../platform/rate-counters.repo.js"
import { sendBestEffort } from "../providers/Mail.js"
import { findTenant } from "../workspaces/workspaces.repo.js"
import * as repo from "./auth.repo.js"
import { assertCanSignIn, issueSession } from "./auth.service.js"
import * as otp from "./otp.repo.js"

export const OTP_TTL_SECONDS = 10 * 60
export const OTP_RESEND_SECONDS = 30
export const OTP_MAX_ATTEMPTS = 5
/**
 * Codes mailed to one address per hour (starts and resends). Five is more than a person needs and
 * keeps the sign-in form from being a way to flood someone's inbox. Codes one client IP may have
 * mailed per hour (to any addresses) share the per-IP guess budget, OTP_GUESSES_PER_IP_HOUR.
 */
export const OTP_SENDS_PER_ADDRESS_HOUR = 5

// Bound to the address so one code's hash says nothing about another's.
const codeHash = (email: string, code: string) => createHash("sha256").update(`${email}\n${code}`).digest()

const ACCEPTED = {
  ok: true,
  message: "if an account exists for this address, a sign-in code is on its way",
  expires_in: OTP_TTL_SECONDS,
  resend_after: OTP_RESEND_SECONDS,
} as const

const WRONG = () =>
  new Unauthenticated({ code: "INVALID_CREDENTIALS", message: "the code is wrong, expired or used up" })

const keys = {
  sendAddress: (email: string) => `otp:send:addr:${email}`,
  sendIp: (ip: string) => `otp:send:ip:${ip}`,
  guessAddress: (email: string) => `otp:guess:addr:${email}`,
  guessIp: (ip: string) => `otp:guess:ip:${ip}`,
}

const hourly = (limit: number): counters.Budget => ({ limit, windowMs: counters.HOUR_MS })

const refused = (results: counters.HitResult[], message: string) => {
  const wait = Math.max(0, ...results.map((r) => (r.allowed ? 0 : r.retryAfterSeconds)))
  return wait > 0 ? new RateLimited({ retryAfterSeconds: wait, message }) : undefined
}

/**
 * Issues a new code (replacing any earlier one) and mails it when the address has an account.
 * `resend` only acts after a start (both ask the ALTCHA challenge when it is required). Either
 * way the answer is the same. Budgets: every request counts against the client IP (taken before
 * anything else, so a burst cannot slip past it); the address's hourly budget counts codes
 * actually issued, which the 30-second upsert already serialises.
 */
export const sendCode = (email: string, mode: "start" | "resend", ip: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const config = yield* AppConfig
    const clock = yield* Clock
    const now = clock.now()
    const byIp = yield* Effect.promise(() =>
      counters.hit(sql, keys.sendIp(ip), hourly(config.otpGuessesPerIpHour), now),
    )
    const byAddress = yield* Effect.promise(() =>
      counters.exhausted(sql, keys.sendAddress(email), hourly(OTP_SENDS_PER_ADDRESS_HOUR), now),
    )
    const limited = refused([byIp, byAddress], "too many sign-in codes were asked for; try again later")
    if (limited) return yield* Effect.fail(limited)
    if (mode === "resend") {
      const started = yield* Effect.promise(() => otp.hasCode(sql, email))
      if (!started) return ACCEPTED
    }
    const user = yield* Effect.promise(() => repo.findUserByEmail(sql, email))
    const code = String(randomInt(1_000_000)).padStart(6, "0")
    const resendBefore = new Date(now.getTime() - OTP_RESEND_SECONDS * 1000)
    // One statement decides the rate limit, so two racing starts can't both send.
    const expiresAt = new Date(now.getTime() + OTP_TTL_SECONDS * 1000)
    const issued = yield* Effect.promise(() =>
      otp.issueCode(sql, { email, codeSha256: user ? codeHash(email, code) : null, expiresAt, now, resendBefore }),
    )
    if (!issued) {
      const last = yield* Effect.promise(() => otp.lastSentAt(sql, email))
      const wait = Math.max(1, Math.ceil((last.getTime() + OTP_RESEND_SECONDS * 1000 - now.getTime()) / 1000))
      return yield* Effect.fail(
        new RateLimited({ retryAfterSeconds: wait, message: `a code was sent moments ago; ask again in ${wait} s` }),
      )
    }
    // Counted for unknown addresses too, so the budget's answers reveal nothing.
    yield* Effect.promise(() => counters.hit(sql, keys.sendAddress(email), hourly(OTP_SENDS_PER_ADDRESS_HOUR), now))
    if (user && user.status === "active")
      yield* sendBestEffort({
        to: email,
        kind: "otp",
        subject: `${code} is your Parley sign-in code`,
        text:
          `Your Parley sign-in code is ${code}. It expires in ${OTP_TTL_SECONDS / 60} minutes. ` +
          "If you did not ask for it, ignore this email.",
        html:
          `<p>Your Parley sign-in code is <strong>${code}</strong>.</p>` +
          `<p>It expires in ${OTP_TTL_SECONDS / 60} minutes. If you did not ask for it, ignore this email.</p>`,
        links: [],
      })
    return ACCEPTED
  })

/** Checks the live code for `email` under its row lock and spends it (right, or wrong too often). */
const checkCode = (sql: Sql, email: string, code: string, now: Date): Promise<boolean> =>
  sql.begin(async (tx) => {
    const row = await otp.lockLiveCode(tx, email, now)
    const given = codeHash(email, code)
    if (!row) return false
    const stored = Buffer.from(row.code_sha256)
    // Both are SHA-256 digests, so the lengths match; compared in constant time all the same.
    const ok = stored.length === given.length && timingSafeEqual(stored, given)
    if (ok) await otp.spendCode(tx, email)
    else await otp.countWrongGuess(tx, email, OTP_MAX_ATTEMPTS)
    return ok
  }) as Promise<boolean>

/**
 * Checks a code; on success it is spent and the user gets a session like a password login.
 * Every guess is counted against the address and the client IP before it is checked (atomically,
 * so a burst cannot get past the budget); past either budget every guess, the right one too, is
 * refused with 429 until the window ends. A right guess is refunded and clears the address.
 */
export const verifyCode = (email: string, code: string, ip: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const config = yield* AppConfig
    const clock = yield* Clock
    const now = clock.now()
    const budgets = yield* Effect.promise(() =>
      Promise.all([
        counters.hit(sql, keys.guessAddress(email), hourly(config.otpGuessesPerAddressHour), now),
        counters.hit(sql, keys.guessIp(ip), hourly(config.otpGuessesPerIpHour), now),
      ]),
    )
    const limited = refused(budgets, "too many sign-in code attempts; try again later")
    if (limited) return yield* Effect.fail(limited)
    const ok = yield* Effect.promise(() => checkCode(sql, email, code, now))
    if (!ok) return yield* Effect.fail(WRONG())
    yield* Effect.promise(() =>
      Promise.all([counters.reset(sql, keys.guessAddress(email)), counters.refund(sql, keys.guessIp(ip))]),
    )
    const user = yield* Effect.promise(() => repo.findUserByEmail(sql, email))
    const tenant = user && (yield* Effect.promise(() => findTenant(sql, user.tenant_id)))
    if (!user || !tenant) return yield* Effect.fail(WRONG())
    yield* assertCanSignIn(user, tenant)
    // Receiving the code proves the address is theirs.
    yield* Effect.promise(() => repo.markEmailVerified(sql, user.id, now))
    return yield* issueSession({ ...user, email_verified: true }, tenant)
  })
