// The tokens that let a carrier's media stream in (migration 0047): minted for one call, taken by
// the one WebSocket upgrade that presents them before they expire and while the call is not over.
import { createHash, randomBytes } from "node:crypto"
import type { Sql, Tx } from "../platform/Db.js"

export const TOKEN_PREFIX = "mst_"
/** How long a stream has to connect once asked for (a carrier connects within a second or two). */
export const STREAM_TOKEN_TTL_MS = 60_000

/** The call a stream was let in for. */
export interface StreamGrant {
  readonly tenantId: number
  readonly callId: number
  /** The carrier's id of the call (its `start` message must name it), if it gave one. */
  readonly providerCallId: string | null
  /** How fast the stream's audio runs (a simulated call's time scale; 1 for a carrier's). */
  readonly timeScale: number
}

/** A token as presented, looked up before it is taken: the call, and the URL its carrier signs. */
export interface StreamClaim extends StreamGrant {
  /** The full URL the carrier was given (and signs), or undefined for a simulated call's stream. */
  readonly signedUrl: string | undefined
}

const hashOf = (secret: string): Buffer => createHash("sha256").update(secret, "utf8").digest()

/** The fastest a stream's audio may run: 500 times real time (src/platform/pacer.ts's floor). */
const MIN_TIME_SCALE = 0.002

/**
 * A new token for `callId`'s stream: `mst_<id>_<secret>`, URL-safe, shown once. `timeScale`: a
 * simulated call's (its audio faster than real time); a carrier's stream is real time. `signedBase`:
 * for a carrier's stream, the address it is given before the token (`wss://host/media/telco_a/`),
 * whose URL with the token its upgrade must be signed over; none for the simulator's.
 */
export async function mintStreamToken(
  sql: Sql | Tx,
  tenantId: number,
  callId: number,
  o: { readonly ttlMs?: number; readonly timeScale?: number; readonly signedBase?: string } = {},
): Promise<string> {
  const secret = randomBytes(32).toString("base64url")
  const ttlMs = o.ttlMs ?? STREAM_TOKEN_TTL_MS
  const timeScale = Math.min(1, Math.max(MIN_TIME_SCALE, o.timeScale ?? 1))
  const [row] = await sql<[{ id: number }]>`
    insert into media_stream_tokens (tenant_id, call_id, secret_hash, expires_at, time_scale, signed_base)
    values (${tenantId}, ${callId}, ${hashOf(secret)}, now() + ${ttlMs} * interval '1 millisecond', ${timeScale},
      ${o.signedBase ?? null})
    returning id`
  return `${TOKEN_PREFIX}${row.id}_${secret}`
}

/** The parts of a presented token, or undefined when it cannot be one. */
function parse(token: string): { id: number; secret: string } | undefined {
  const m = /^mst_([1-9]\d{0,17})_([A-Za-z0-9_-]{43})$/.exec(token)
  if (m === null) return undefined
  const id = Number(m[1])
  return Number.isSafeInteger(id) ? { id, secret: m[2]! } : undefined
}

/**
 * Looks a token up without taking it (its carrier's signature is checked first, so a stranger who
 * saw the URL cannot spend the token): undefined when takeStreamToken would refuse it.
 */
export async function claimOf(sql: Sql, token: string): Promise<StreamClaim | undefined> {
  const t = parse(token)
  if (t === undefined) return undefined
  const [row] = await sql<
    [
      {
        tenant_id: number
        call_id: number
        provider_call_id: string | null
        time_scale: number
        signed_base: string | null
      }?,
    ]
  >`
    select m.tenant_id, m.call_id, c.provider_call_id, m.time_scale, m.signed_base
    from media_stream_tokens m join calls c on c.id = m.call_id and c.tenant_id = m.tenant_id
    where m.id = ${t.id} and m.secret_hash = ${hashOf(t.secret)} and m.used_at is null and m.expires_at > now()
      and c.status <> 'ended'`
  return row === undefined
    ? undefined
    : {
        ...grantOf(row),
        signedUrl: row.signed_base === null ? undefined : row.signed_base + token,
      }
}

const grantOf = (row: {
  tenant_id: number
  call_id: number
  provider_call_id: string | null
  time_scale: number
}): StreamGrant => ({
  tenantId: row.tenant_id,
  callId: row.call_id,
  providerCallId: row.provider_call_id,
  timeScale: Number(row.time_scale),
})

/**
 * Takes a token: the call it grants a stream for, once. Undefined for a token that is malformed,
 * unknown, already taken, expired, or whose call has ended (one answer for all: nothing to learn).
 */
export async function takeStreamToken(sql: Sql, token: string): Promise<StreamGrant | undefined> {
  const t = parse(token)
  if (t === undefined) return undefined
  const [row] = await sql<
    [{ tenant_id: number; call_id: number; provider_call_id: string | null; time_scale: number }?]
  >`
    update media_stream_tokens m set used_at = now()
    from calls c
    where m.id = ${t.id} and m.secret_hash = ${hashOf(t.secret)} and m.used_at is null and m.expires_at > now()
      and c.id = m.call_id and c.tenant_id = m.tenant_id and c.status <> 'ended'
    returning m.tenant_id, m.call_id, c.provider_call_id, m.time_scale`
  return row === undefined ? undefined : grantOf(row)
}

/** Deletes tokens taken or expired before `olderThanMs` ago (the sweeper's). */
export async function sweepStreamTokens(sql: Sql, olderThanMs: number): Promise<number> {
  const rows = await sql`
    delete from media_stream_tokens
    where expires_at < now() - ${olderThanMs} * interval '1 millisecond'`
  return rows.count
}
