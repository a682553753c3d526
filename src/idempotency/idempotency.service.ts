// Idempotent retries (Stripe's Idempotency-Key convention): a request claims (workspace, key) in
// Postgres before its handler runs, so a duplicate in any api process finds the claim; the first
// completed response is kept for 24 hours and replayed. A failure the client should retry (5xx,
// a defect, an abort) releases the claim instead.
import { createHash, hkdfSync, randomUUID } from "node:crypto"
import { Duration, Effect } from "effect"
import { Db } from "../platform/Db.js"
import { Conflict, IdempotencyKeyReused } from "../platform/errors.js"
import { openBytes, sealBytes } from "../platform/secret-store.js"
import * as repo from "./idempotency.repo.js"

export type { StoredResponse } from "./idempotency.repo.js"

/** How long a completed response is replayed. */
export const IDEMPOTENCY_TTL = Duration.hours(24)
/**
 * A claim still running after this long belongs to a process that died mid-request: a retry may
 * take it over (until then it answers 409 IDEMPOTENCY_IN_PROGRESS).
 */
export const STALE_CLAIM = Duration.minutes(5)

export interface Claimed {
  readonly tenantId: number
  /** The key as stored: the client's, or its hash for a sealed answer. */
  readonly key: string
  readonly token: string
  /** The AES-256-GCM key the kept answer is sealed with, for an answer that carries a secret. */
  readonly seal: Buffer | undefined
}

/**
 * An answer that carries a secret shown once (a new API key, a webhook signing secret) is kept
 * sealed, so the database never holds it readable: the row is keyed by the Idempotency-Key's
 * SHA-256, and the body is sealed by the secret store (src/platform/secret-store.ts, AES-256-GCM)
 * under a key derived from the Idempotency-Key itself, which only the client holds. A random key
 * (a UUID) is as strong as the seal.
 */
const sealedKey = (key: string) => `sha256:${createHash("sha256").update(key).digest("hex")}`
const sealKey = (tenantId: number, key: string, fingerprint: Buffer) =>
  Buffer.from(hkdfSync("sha256", key, fingerprint, `parley idempotent answer ${tenantId}`, 32))

/** What a claim decided: run the handler under it, or answer with the stored response. */
export type Begin =
  | { readonly kind: "run"; readonly claimed: Claimed }
  | { readonly kind: "replay"; readonly response: repo.StoredResponse }

/**
 * Claims the key for a request with this fingerprint. Fails 422 IDEMPOTENCY_KEY_REUSED when the key
 * was used for another request, 409 IDEMPOTENCY_IN_PROGRESS while the first is still running.
 */
export const begin = (
  tenantId: number,
  clientKey: string,
  fingerprint: Buffer,
  opts: { readonly sealed: boolean } = { sealed: false },
): Effect.Effect<Begin, Conflict | IdempotencyKeyReused, Db> =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const token = randomUUID()
    const key = opts.sealed ? sealedKey(clientKey) : clientKey
    const aesKey = opts.sealed ? sealKey(tenantId, clientKey, fingerprint) : undefined
    const found = yield* Effect.promise(() =>
      repo.claim(sql, {
        tenantId,
        key,
        fingerprint,
        token,
        ttlSeconds: Duration.toSeconds(IDEMPOTENCY_TTL),
        staleSeconds: Duration.toSeconds(STALE_CLAIM),
      }),
    )
    if (found.kind === "claimed") return { kind: "run", claimed: { tenantId, key, token, seal: aesKey } } as const
    if (!found.sameRequest)
      return yield* new IdempotencyKeyReused({
        message: "this Idempotency-Key was already used for a different request (method, path, body or caller)",
      })
    if (found.kind === "running")
      return yield* new Conflict({
        message: "a request with this Idempotency-Key is still being processed; retry later",
        code: "IDEMPOTENCY_IN_PROGRESS",
      })
    const response =
      aesKey === undefined ? found.response : { ...found.response, body: openBytes(aesKey, found.response.body) }
    return { kind: "replay", response } as const
  })

/** Keeps the completed response for replays. */
export const complete = (c: Claimed, response: repo.StoredResponse): Effect.Effect<void, never, Db> => {
  const kept = c.seal === undefined ? response : { ...response, body: sealBytes(c.seal, response.body) }
  return Effect.flatMap(Db, ({ sql }) => Effect.promise(() => repo.complete(sql, c.tenantId, c.key, c.token, kept)))
}

/** Gives the key up so a retry runs the request again. */
export const release = (c: Claimed): Effect.Effect<void, never, Db> =>
  Effect.flatMap(Db, ({ sql }) => Effect.promise(() => repo.release(sql, c.tenantId, c.key, c.token)))

/** Rows one delete takes; a sweep runs at most MAX_BATCHES of them and leaves the rest for the next. */
const SWEEP_BATCH = 1000
const MAX_BATCHES = 20

/** Forgets expired keys; answers how many went. Safe to run in several processes at once. */
export const pruneExpired: Effect.Effect<number, never, Db> = Effect.gen(function* () {
  const { sql } = yield* Db
  let pruned = 0
  for (let i = 0; i < MAX_BATCHES; i++) {
    const n = yield* Effect.promise(() => repo.pruneExpired(sql, SWEEP_BATCH))
    pruned += n
    if (n < SWEEP_BATCH) break
  }
  return pruned
})
