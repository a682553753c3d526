// ALTCHA proof-of-work challenges: issuing signed challenges and verifying solved ones exactly
// once, with spent solutions remembered in altcha_spent so every process refuses a replay.

// Protocol: ALTCHA PoW v2, the altcha-lib package root (not its `altcha-lib/v1` entry). The
// current widget (altcha 3.x) fetches the challenge JSON `{parameters, signature}`, solves it in
// Web Workers and submits base64(JSON `{challenge: {parameters, signature}, solution: {counter,
// derivedKey, time}}`) in the form field. It would still solve a v1 challenge and answer with the
// v1 payload `{algorithm, challenge, number, salt, signature}`, but that path exists only for
// servers that have not moved on; since this server chooses the challenge format, it issues v2
// and accepts only v2 payloads.
import { type Challenge, createChallenge, randomInt, type Solution, verifySolution } from "altcha-lib"
import { deriveKey } from "altcha-lib/algorithms/sha"
import type { Sql } from "../platform/Db.js"
import { spendAltcha } from "./credentials.repo.js"

export interface AltchaOptions {
  readonly hmacKey: string
  readonly sql: Sql
  /** Upper bound of the work counter (the number of hashes a solver tries); default 100 000. */
  readonly maxNumber?: number
  /** How long a challenge stays solvable; default 300 s. */
  readonly expiresInSeconds?: number
}

export interface Altcha {
  /** A fresh signed challenge, to send as the JSON body of GET /auth/altcha/challenge. */
  challenge(): Promise<Record<string, unknown>>
  /**
   * true once for a correctly solved, unexpired challenge of ours; false for anything else,
   * malformed input included. Rejects only when the database does (a 500, not a refusal).
   */
  verify(payload: unknown): Promise<boolean>
}

/*
 * Iterated SHA-256 with cost 1: one hash per counter value, which the widget computes with native
 * SubtleCrypto in several workers. With the counter drawn from [maxNumber/2, maxNumber] (the
 * deterministic mode: the server picks the counter, so the work is predictable rather than luck)
 * a browser needs 50 000–100 000 hashes, a small fraction of a second, while a bot pays the same
 * for every signup or OTP request it scripts. PBKDF2 or Argon2 would cost real users seconds.
 */
const ALGORITHM = "SHA-256"
const COST = 1
const DEFAULT_MAX_NUMBER = 100_000
const DEFAULT_EXPIRES_IN_SECONDS = 300
/** Base64 of a real payload is well under 1 KiB; refuse to decode anything much larger. */
const MAX_PAYLOAD_CHARS = 4096
/**
 * Spent rows are purged this long after their challenge expired. The expiry check that makes a
 * purged row harmless runs on this process's clock; the margin covers clock skew between the
 * api processes sharing the table, so no process accepts a replay another has already purged.
 */
const PURGE_MARGIN_MS = 5 * 60_000

export function makeAltcha(opts: AltchaOptions): Altcha {
  if (opts.hmacKey === "") throw new Error("makeAltcha: hmacKey must not be empty")
  const maxNumber = opts.maxNumber ?? DEFAULT_MAX_NUMBER
  const expiresInSeconds = opts.expiresInSeconds ?? DEFAULT_EXPIRES_IN_SECONDS
  if (!Number.isInteger(maxNumber) || maxNumber < 1 || maxNumber > 0xffffffff) {
    throw new Error("makeAltcha: maxNumber must be an integer from 1 to 2^32 - 1")
  }
  if (!(expiresInSeconds > 0)) throw new Error("makeAltcha: expiresInSeconds must be positive")
  const { sql } = opts

  return {
    async challenge() {
      const challenge = await createChallenge({
        algorithm: ALGORITHM,
        cost: COST,
        counter: randomInt(maxNumber, Math.ceil(maxNumber / 2)),
        deriveKey,
        expiresAt: new Date(Date.now() + expiresInSeconds * 1000),
        hmacSignatureSecret: opts.hmacKey,
      })
      return { parameters: challenge.parameters, signature: challenge.signature }
    },

    async verify(payload) {
      const decoded = decodePayload(payload)
      if (decoded === undefined) return false
      const { challenge, solution } = decoded
      const expiresAt = challenge.parameters.expiresAt
      // Every challenge we issue expires and uses our algorithm; a payload without an expiry could
      // never have its spent row purged, and another algorithm is not one of ours.
      if (typeof expiresAt !== "number" || challenge.parameters.algorithm !== ALGORITHM) return false
      let verified: boolean
      try {
        // Checks expiry, then the signature over the parameters, and only then derives the key,
        // so a forged cost cannot make us hash for long.
        const result = await verifySolution({ challenge, solution, deriveKey, hmacSignatureSecret: opts.hmacKey })
        verified = result.verified
      } catch {
        return false
      }
      if (!verified) return false
      // Recording only verified solutions keeps strangers from filling the table.
      return spendAltcha(sql, challenge.signature, new Date(expiresAt * 1000), new Date(Date.now() - PURGE_MARGIN_MS))
    },
  }
}

type SignedChallenge = Challenge & { signature: string }

/** The widget's base64 JSON payload, or undefined for anything that is not one. */
function decodePayload(payload: unknown): { challenge: SignedChallenge; solution: Solution } | undefined {
  if (typeof payload !== "string" || payload.length === 0 || payload.length > MAX_PAYLOAD_CHARS) return undefined
  // Buffer's decoder skips characters outside the alphabet; insist on what btoa produces.
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(payload)) return undefined
  let parsed: unknown
  try {
    parsed = JSON.parse(Buffer.from(payload, "base64").toString("utf8"))
  } catch {
    return undefined
  }
  if (!isRecord(parsed) || !isRecord(parsed.challenge) || !isRecord(parsed.solution)) return undefined
  const { parameters, signature } = parsed.challenge
  const { counter, derivedKey, time } = parsed.solution
  if (!isRecord(parameters) || typeof signature !== "string" || signature === "") return undefined
  if (typeof counter !== "number" || typeof derivedKey !== "string") return undefined
  for (const key of ["algorithm", "nonce", "salt", "keyPrefix"] as const) {
    if (typeof parameters[key] !== "string") return undefined
  }
  // Pass the parameters through untouched: the signature covers exactly what the client sent, so
  // any field added, dropped or changed on the way fails it.
  return {
    challenge: { parameters: parameters as unknown as Challenge["parameters"], signature },
    solution: { counter, derivedKey, ...(typeof time === "number" && { time }) },
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v)
}
