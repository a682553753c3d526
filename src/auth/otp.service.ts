// One-time sign-in codes by email: a 6-digit code valid 10 minutes, at most one send per 30 s
// per address, 5 wrong guesses spend it. Start and resend answer the same whether or not an
// account exists, so the endpoint can't be used to find out who has one.
import { createHash, randomInt } from "node:crypto"
import { Effect } from "effect"
import { RateLimited, Unauthenticated } from "../errors.js"
import { sendBestEffort } from "../providers/Mail.js"
import { Clock } from "../services/Clock.js"
import { Db } from "../services/Db.js"
import * as repo from "./auth.repo.js"
import { assertCanSignIn, issueSession } from "./auth.service.js"

export const OTP_TTL_SECONDS = 10 * 60
export const OTP_RESEND_SECONDS = 30
export const OTP_MAX_ATTEMPTS = 5

// Bound to the address so one code's hash says nothing about another's.
const codeHash = (email: string, code: string) => createHash("sha256").update(`${email}\n${code}`).digest()

const ACCEPTED = { ok: true, message: "if an account exists for this address, a sign-in code is on its way", expires_in: OTP_TTL_SECONDS, resend_after: OTP_RESEND_SECONDS } as const

/**
 * Issues a new code (replacing any earlier one) and mails it when the address has an account.
 * `resend` only acts after a start: start is where the ALTCHA challenge is asked, so resend must
 * not be a way around it. Either way the answer is the same.
 */
export const sendCode = (email: string, mode: "start" | "resend") =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const now = clock.now()
    if (mode === "resend") {
      const [started] = yield* Effect.promise(() => sql`select 1 from otp_codes where email = ${email}`)
      if (!started) return ACCEPTED
    }
    const user = yield* Effect.promise(() => repo.findUserByEmail(sql, email))
    const code = String(randomInt(1_000_000)).padStart(6, "0")
    const resendBefore = new Date(now.getTime() - OTP_RESEND_SECONDS * 1000)
    // One statement decides the rate limit, so two racing starts can't both send.
    const [row] = yield* Effect.promise(
      () => sql<[{ last_sent_at: Date }?]>`
        insert into otp_codes as o (email, code_sha256, expires_at, attempts, last_sent_at)
        values (${email}, ${user ? codeHash(email, code) : null}, ${new Date(now.getTime() + OTP_TTL_SECONDS * 1000)}, 0, ${now})
        on conflict (email) do update set
          code_sha256 = excluded.code_sha256, expires_at = excluded.expires_at, attempts = 0, last_sent_at = excluded.last_sent_at
          where o.last_sent_at <= ${resendBefore}
        returning last_sent_at`,
    )
    if (!row) {
      const [last] = yield* Effect.promise(() => sql<[{ last_sent_at: Date }]>`select last_sent_at from otp_codes where email = ${email}`)
      const wait = Math.max(1, Math.ceil((last.last_sent_at.getTime() + OTP_RESEND_SECONDS * 1000 - now.getTime()) / 1000))
      return yield* Effect.fail(new RateLimited({ retryAfterSeconds: wait, message: `a code was sent moments ago; ask again in ${wait} s` }))
    }
    if (user && user.status === "active")
      yield* sendBestEffort({
        to: email,
        kind: "otp",
        subject: `${code} is your Parley sign-in code`,
        text: `Your Parley sign-in code is ${code}. It expires in ${OTP_TTL_SECONDS / 60} minutes. If you did not ask for it, ignore this email.`,
        html: `<p>Your Parley sign-in code is <strong>${code}</strong>.</p><p>It expires in ${OTP_TTL_SECONDS / 60} minutes. If you did not ask for it, ignore this email.</p>`,
        links: [],
      })
    return ACCEPTED
  })

/** Checks a code; on success it is spent and the user gets a session like a password login. */
export const verifyCode = (email: string, code: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const now = clock.now()
    const [result] = yield* Effect.promise(
      () => sql<[{ ok: boolean }?]>`
        with current as (
          select email, code_sha256 = ${codeHash(email, code)} as ok
          from otp_codes where email = ${email} and code_sha256 is not null and expires_at > ${now}
          for update
        )
        update otp_codes o set
          attempts = case when current.ok then o.attempts else o.attempts + 1 end,
          code_sha256 = case when current.ok or o.attempts + 1 >= ${OTP_MAX_ATTEMPTS} then null else o.code_sha256 end
        from current where o.email = current.email
        returning current.ok`,
    )
    if (!result?.ok) return yield* Effect.fail(new Unauthenticated({ code: "INVALID_CREDENTIALS", message: "the code is wrong, expired or used up" }))
    const user = yield* Effect.promise(() => repo.findUserByEmail(sql, email))
    const tenant = user && (yield* Effect.promise(() => repo.findTenant(sql, user.tenant_id)))
    if (!user || !tenant) return yield* Effect.fail(new Unauthenticated({ code: "INVALID_CREDENTIALS", message: "the code is wrong, expired or used up" }))
    yield* assertCanSignIn(user, tenant)
    // Receiving the code proves the address is theirs.
    yield* Effect.promise(() => sql`update users set email_verified = true, email_verified_at = coalesce(email_verified_at, ${now}) where id = ${user.id}`)
    return yield* issueSession({ ...user, email_verified: true }, tenant)
  })
