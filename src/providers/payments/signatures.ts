// Webhook signature checks and signers for the payment gateways: pure functions that compare in
// constant time and answer false, never throw, on anything malformed.
import { Buffer } from "node:buffer"
import { createHmac, timingSafeEqual } from "node:crypto"

/** Longest a timestamped signature may be away from now, either way, in seconds. */
export const DEFAULT_TOLERANCE_SECONDS = 300

const HEX_SHA256 = /^[0-9a-fA-F]{64}$/
const UNIX_SECONDS = /^\d{1,15}$/

const hmac = (secret: string, ...parts: Array<Buffer | string>): Buffer => {
  const h = createHmac("sha256", Buffer.from(secret, "utf8"))
  for (const part of parts) h.update(part)
  return h.digest()
}

const bytes = (raw: Buffer | string): Buffer => (typeof raw === "string" ? Buffer.from(raw, "utf8") : raw)

/** Constant-time comparison of a hex candidate (either case) with the expected 32-byte MAC. */
function hexMatches(candidate: string, expected: Buffer): boolean {
  if (!HEX_SHA256.test(candidate)) return false
  const given = Buffer.from(candidate, "hex")
  return given.length === expected.length && timingSafeEqual(given, expected)
}

/**
 * The `t=<unix>,v1=<hex>[,v1=<hex>…]` scheme: HMAC-SHA256(secret, `${t}.` + raw body). Any v1
 * entry may match (secret rotation); other schemes (v0) are ignored; exactly one t is required.
 */
export function verifyTimestamped(
  raw: Buffer,
  header: string | undefined,
  secret: string,
  nowSeconds: number,
  toleranceSeconds: number,
): boolean {
  try {
    // An empty secret is a misconfiguration; anyone could sign with it.
    if (typeof header !== "string" || typeof secret !== "string" || secret === "" || !Buffer.isBuffer(raw)) return false
    if (!Number.isFinite(nowSeconds) || !Number.isFinite(toleranceSeconds) || toleranceSeconds < 0) return false
    let t: string | undefined
    let tCount = 0
    const v1: string[] = []
    for (const item of header.split(",")) {
      const eq = item.indexOf("=")
      if (eq === -1) continue
      const key = item.slice(0, eq).trim()
      const value = item.slice(eq + 1).trim()
      if (key === "t") {
        t = value
        tCount++
      } else if (key === "v1") v1.push(value)
    }
    if (tCount !== 1 || t === undefined || !UNIX_SECONDS.test(t) || v1.length === 0) return false
    if (Math.abs(nowSeconds - Number(t)) > toleranceSeconds) return false
    const expected = hmac(secret, `${t}.`, raw)
    // Every entry is compared, match or not, so the time taken does not reveal which one matched.
    let ok = false
    for (const candidate of v1) if (hexMatches(candidate, expected)) ok = true
    return ok
  } catch {
    return false
  }
}

/** Header `gw_card-Signature` of a card-gateway webhook. */
export function verifyGwCardSignature(
  raw: Buffer,
  header: string | undefined,
  secret: string,
  nowSeconds: number,
  toleranceSeconds: number = DEFAULT_TOLERANCE_SECONDS,
): boolean {
  return verifyTimestamped(raw, header, secret, nowSeconds, toleranceSeconds)
}

/** Header `X-SVC-Signature` of the generic payment webhook: the same scheme as gw_card. */
export function verifyGenericSignature(
  raw: Buffer,
  header: string | undefined,
  secret: string,
  nowSeconds: number,
  toleranceSeconds: number = DEFAULT_TOLERANCE_SECONDS,
): boolean {
  return verifyTimestamped(raw, header, secret, nowSeconds, toleranceSeconds)
}

/** Header `X-gw_upi-Signature` of a UPI-gateway webhook: hex HMAC-SHA256(secret, raw body). */
export function verifyGwUpiSignature(raw: Buffer, header: string | undefined, secret: string): boolean {
  try {
    if (typeof header !== "string" || typeof secret !== "string" || secret === "" || !Buffer.isBuffer(raw)) return false
    return hexMatches(header.trim(), hmac(secret, raw))
  } catch {
    return false
  }
}

/** A `gw_card-Signature` header value for `raw` signed at unix time `t` (tests, fake gateways). */
export function signGwCard(raw: Buffer | string, secret: string, t: number): string {
  return `t=${Math.floor(t)},v1=${hmac(secret, `${Math.floor(t)}.`, bytes(raw)).toString("hex")}`
}

/** An `X-SVC-Signature` header value for `raw` signed at unix time `t`. */
export function signGeneric(raw: Buffer | string, secret: string, t: number): string {
  return signGwCard(raw, secret, t)
}

/** An `X-gw_upi-Signature` header value for `raw`. */
export function signGwUpi(raw: Buffer | string, secret: string): string {
  return hmac(secret, bytes(raw)).toString("hex")
}
