// The X-SVC-Signature header of an outbound webhook: `t=<unix seconds>,v1=<hex HMAC-SHA256(secret,
// t + "." + raw body)>`, one v1 entry per live secret (two during a rotation), as the card gateway
// signs its webhooks to us, so the verifier is that one (src/providers/payments/signatures.ts): what
// the README shows a receiver — constant-time, any v1 may match, a timestamp outside the window refused.
import { Buffer } from "node:buffer"
import { createHmac } from "node:crypto"
import { verifyTimestamped } from "../providers/payments/signatures.js"

/** How far a signature's timestamp may be from the receiver's clock, either way, in seconds. */
export const REPLAY_WINDOW_SECONDS = 300

const mac = (secret: string, t: number, raw: Buffer): Buffer =>
  createHmac("sha256", Buffer.from(secret, "utf8")).update(`${t}.`).update(raw).digest()

/**
 * The header for `raw` signed at unix time `t` with every secret given, newest first. The bytes
 * signed are the bytes sent: the caller passes the body exactly as it goes on the wire.
 */
export function signWebhook(raw: Buffer, secrets: ReadonlyArray<string>, t: number): string {
  if (secrets.length === 0) throw new Error("a webhook is signed with at least one secret")
  const ts = Math.floor(t)
  return [`t=${ts}`, ...secrets.map((s) => `v1=${mac(s, ts, raw).toString("hex")}`)].join(",")
}

/**
 * Whether `header` signs `raw` with `secret` at a time within the replay window of `nowSeconds`.
 * False, never a throw, on anything malformed.
 */
export function verifyWebhook(
  raw: Buffer,
  header: string | undefined,
  secret: string,
  nowSeconds: number,
  windowSeconds: number = REPLAY_WINDOW_SECONDS,
): boolean {
  if (typeof header === "string" && header.length > 4096) return false
  return verifyTimestamped(raw, header, secret, nowSeconds, windowSeconds)
}
