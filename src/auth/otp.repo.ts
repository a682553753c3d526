// SQL for one-time sign-in codes: one row per address holding the live code's digest, its expiry,
// the wrong guesses against it and when the last code was sent.
import type { Sql, Tx } from "../platform/Db.js"

export const hasCode = async (sql: Sql, email: string): Promise<boolean> => {
  const [row] = await sql`select 1 from otp_codes where email = ${email}`
  return row !== undefined
}

/**
 * Stores a new code for `email` unless one was sent after `resendBefore`; one statement decides,
 * so two racing starts can't both send. Returns false when the earlier code is too recent.
 */
export const issueCode = async (
  sql: Sql,
  c: { email: string; codeSha256: Buffer | null; expiresAt: Date; now: Date; resendBefore: Date },
): Promise<boolean> => {
  const [row] = await sql<[{ last_sent_at: Date }?]>`
    insert into otp_codes as o (email, code_sha256, expires_at, attempts, last_sent_at)
    values (${c.email}, ${c.codeSha256}, ${c.expiresAt}, 0, ${c.now})
    on conflict (email) do update set
      code_sha256 = excluded.code_sha256, expires_at = excluded.expires_at, attempts = 0,
        last_sent_at = excluded.last_sent_at
      where o.last_sent_at <= ${c.resendBefore}
    returning last_sent_at`
  return row !== undefined
}

export const lastSentAt = async (sql: Sql, email: string): Promise<Date> => {
  const [row] = await sql<[{ last_sent_at: Date }]>`select last_sent_at from otp_codes where email = ${email}`
  return row.last_sent_at
}

/** The live code's digest for `email`, locked for the rest of the transaction. */
export const lockLiveCode = async (
  tx: Tx,
  email: string,
  now: Date,
): Promise<{ code_sha256: Uint8Array; attempts: number } | undefined> => {
  const [row] = await tx<[{ code_sha256: Uint8Array; attempts: number }?]>`
    select code_sha256, attempts from otp_codes
    where email = ${email} and code_sha256 is not null and expires_at > ${now}
    for update`
  return row
}

export const spendCode = async (tx: Tx, email: string): Promise<void> => {
  await tx`update otp_codes set code_sha256 = null where email = ${email}`
}

/** Counts a wrong guess; the guess that reaches `maxAttempts` spends the code. */
export const countWrongGuess = async (tx: Tx, email: string, maxAttempts: number): Promise<void> => {
  await tx`
    update otp_codes set attempts = attempts + 1,
      code_sha256 = case when attempts + 1 >= ${maxAttempts} then null else code_sha256 end
    where email = ${email}`
}
