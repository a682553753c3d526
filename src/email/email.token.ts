// Unsubscribe / preference tokens: "e1.<kid>.<payload>.<mac>", payload base64url JSON
// {t: tenant id, e: address, c: channel}, mac = base64url HMAC-SHA256(key[kid], "e1.<kid>.<payload>").
// Keys are per deployment, generated on first use and kept in system_secrets under
// "email_token_key:<kid>". Rotation: point CURRENT_KID at a new id; tokens already mailed keep
// verifying under their own kid, since old keys stay stored. Tokens never expire (an unsubscribe
// link must work for as long as the mail exists).
import { createHmac, timingSafeEqual } from "node:crypto"
import type { Sql } from "../platform/Db.js"
import { systemSecret } from "../platform/secret-store.js"
import { secretExists } from "./email.repo.js"

export const CURRENT_KID = "k1"
const VERSION = "e1"
const KID = /^[a-z0-9]{1,16}$/

export interface TokenClaims {
  readonly tenantId: number
  readonly email: string
  readonly channel: string
}

const keyOf = (sql: Sql, kid: string) => systemSecret(sql, `email_token_key:${kid}`)

const mac = (key: string, signed: string) => createHmac("sha256", key).update(signed).digest("base64url")

export async function signToken(sql: Sql, claims: TokenClaims, kid = CURRENT_KID): Promise<string> {
  const payload = Buffer.from(JSON.stringify({ t: claims.tenantId, e: claims.email, c: claims.channel })).toString(
    "base64url",
  )
  const signed = `${VERSION}.${kid}.${payload}`
  return `${signed}.${mac(await keyOf(sql, kid), signed)}`
}

/**
 * The claims of a token we issued: "malformed" when it can't be one of ours at all, "invalid" when
 * it is shaped right but the signature (or its key id) does not check out.
 */
export async function verifyToken(sql: Sql, token: string): Promise<TokenClaims | "malformed" | "invalid"> {
  const parts = token.split(".")
  if (parts.length !== 4 || parts[0] !== VERSION) return "malformed"
  const [v, kid, payload, sig] = parts as [string, string, string, string]
  if (!KID.test(kid) || !/^[A-Za-z0-9_-]{1,2000}$/.test(payload) || !/^[A-Za-z0-9_-]{43}$/.test(sig)) return "malformed"
  // Only keys that exist: an unknown kid must not create one.
  if (!(await secretExists(sql, `email_token_key:${kid}`))) return "invalid"
  const expected = Buffer.from(mac(await keyOf(sql, kid), `${v}.${kid}.${payload}`))
  const given = Buffer.from(sig)
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return "invalid"
  let claims: unknown
  try {
    claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"))
  } catch {
    return "invalid"
  }
  const c = claims as { t?: unknown; e?: unknown; c?: unknown }
  if (typeof c.t !== "number" || typeof c.e !== "string" || typeof c.c !== "string") return "invalid"
  return { tenantId: c.t, email: c.e, channel: c.c }
}
