// The link a data-subject export gives to the contact's call recordings (`recordings_zip_url`):
// whoever holds it may download the zip until it expires, an hour after the export, without signing
// in — it can be handed to the data subject. It is an HS256 JWS under a key of its own (never the
// sessions' key: neither token is the other), naming the workspace, the calls and the export's
// receipt; nothing in it is personal data (a payload is readable by whoever holds the link). The
// calls are looked up again at download: a recording erased since is not in the zip.
import { errors, jwtVerify, SignJWT } from "jose"
import type { Sql } from "../platform/Db.js"
import { systemSecret } from "../platform/secret-store.js"

/** How long a link works after the export. */
export const RECORDINGS_LINK_SECONDS = 60 * 60
/** The most calls one link names (a contact called more often gets the newest). */
export const RECORDINGS_LINK_MAX_CALLS = 500

const TYPE = "parley-recordings+jwt"
const keyOf = async (sql: Sql) => new TextEncoder().encode(await systemSecret(sql, "recordings_link_hs256"))

export interface RecordingsGrant {
  readonly tenantId: number
  readonly callIds: readonly number[]
  readonly receiptId: string
}

export async function signRecordingsLink(sql: Sql, g: RecordingsGrant, nowSeconds: number): Promise<string> {
  return new SignJWT({ tid: g.tenantId, calls: g.callIds.slice(0, RECORDINGS_LINK_MAX_CALLS), rcpt: g.receiptId })
    .setProtectedHeader({ alg: "HS256", typ: TYPE })
    .setIssuedAt(nowSeconds)
    .setExpirationTime(nowSeconds + RECORDINGS_LINK_SECONDS)
    .sign(await keyOf(sql))
}

/** The grant a link carries, or why not: expired, or not a link we signed. */
export async function verifyRecordingsLink(
  sql: Sql,
  token: string,
  nowSeconds: number,
): Promise<RecordingsGrant | "expired" | "invalid"> {
  if (token.length > 8_192) return "invalid"
  try {
    const { payload, protectedHeader } = await jwtVerify(token, await keyOf(sql), {
      algorithms: ["HS256"],
      typ: TYPE,
      currentDate: new Date(nowSeconds * 1000),
    })
    const { tid, calls, rcpt } = payload as Record<string, unknown>
    if (protectedHeader.typ !== TYPE || typeof tid !== "number" || typeof rcpt !== "string") return "invalid"
    if (!Array.isArray(calls) || !calls.every((c) => Number.isSafeInteger(c) && c > 0)) return "invalid"
    return { tenantId: tid, callIds: calls as number[], receiptId: rcpt }
  } catch (e) {
    return e instanceof errors.JWTExpired ? "expired" : "invalid"
  }
}
