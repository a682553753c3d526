// telco_a's webhook signature (DESIGN.md): base64 HMAC-SHA1 keyed with the account's auth token,
// over the full URL the provider called followed by every POST parameter's name and value,
// sorted by name in plain code-unit order; GET callbacks sign the URL alone.
import { createHmac, timingSafeEqual } from "node:crypto"

/** The string telco_a signs: the URL, then each parameter name and value, sorted by name. */
export function telcoASignedPayload(url: string, params: Readonly<Record<string, string>> | undefined): string {
  let out = url
  if (params === undefined) return out
  // Code-unit order (what Array.prototype.sort does with no comparator), not localeCompare.
  for (const name of Object.keys(params).sort()) out += name + params[name]
  return out
}

export function signTelcoA(token: string, url: string, params?: Readonly<Record<string, string>>): string {
  return createHmac("sha1", Buffer.from(token, "utf8"))
    .update(telcoASignedPayload(url, params), "utf8")
    .digest("base64")
}

/** Constant-time check of a presented signature; false (never a throw) for anything malformed. */
export function verifyTelcoA(
  token: string,
  url: string,
  params: Readonly<Record<string, string>> | undefined,
  presented: string | undefined,
): boolean {
  try {
    if (typeof presented !== "string" || presented === "" || token === "") return false
    const expected = Buffer.from(signTelcoA(token, url, params), "base64")
    const given = Buffer.from(presented.trim(), "base64")
    return given.length === expected.length && timingSafeEqual(given, expected)
  } catch {
    return false
  }
}
