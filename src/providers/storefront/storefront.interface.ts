// The storefront platform behind one interface: the OAuth authorize URL, the code-for-token
// exchange and the customers read, plus the platform's hmac query signature (checked with the app secret).
import { createHmac, timingSafeEqual } from "node:crypto"

/** The access the install asks for. */
export const STOREFRONT_SCOPES = ["read_customers", "read_orders"] as const

/** One customer as Parley stores it: flat, JSON-ready (a source row). */
export interface StorefrontCustomer {
  readonly customer_id: number
  readonly name: string
  readonly first_name: string
  readonly last_name: string
  readonly email: string | null
  readonly phone: string | null
  readonly city: string | null
  readonly country: string | null
  readonly orders_count: number
  readonly total_spent: number
  readonly currency: string
}

export interface StorefrontToken {
  readonly accessToken: string
  readonly scopes: ReadonlyArray<string>
}

/** The shop answered but refused (a bad or used code, a revoked token): a retry will not help. */
export class StorefrontRefused extends Error {
  override readonly name = "StorefrontRefused"
}

/** The shop could not be reached, or answered something unusable. */
export class StorefrontUnavailable extends Error {
  override readonly name = "StorefrontUnavailable"
}

export interface StorefrontAdapter {
  readonly mode: "simulator" | "http"
  /** The secret the platform signs its redirects with (hmac query parameter). */
  readonly signingSecret: string
  /** Where the merchant's browser goes to approve the install. */
  authorizeUrl(p: { shop: string; state: string; redirectUri: string }): string
  /** Trades the callback's one-time code for an access token. Throws StorefrontRefused / StorefrontUnavailable. */
  exchangeCode(shop: string, code: string): Promise<StorefrontToken>
  /** The shop's customers, bounded. Throws StorefrontRefused / StorefrontUnavailable. */
  customers(shop: string, accessToken: string): Promise<StorefrontCustomer[]>
}

/** The string the platform signs: every query parameter but hmac (and legacy signature), sorted by name. */
export function signedMessage(params: URLSearchParams): string {
  return [...params.entries()]
    .filter(([k]) => k !== "hmac" && k !== "signature")
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join("&")
}

/** The hex HMAC-SHA256 of the query, as the platform computes it. */
export function signQuery(params: URLSearchParams, secret: string): string {
  return createHmac("sha256", secret).update(signedMessage(params)).digest("hex")
}

/** true when the query's hmac is the one `secret` makes (compared in constant time). */
export function verifyQueryHmac(rawQuery: string, secret: string): boolean {
  const params = new URLSearchParams(rawQuery)
  const given = params.get("hmac") ?? ""
  if (!/^[0-9a-fA-F]{64}$/.test(given)) return false
  const expected = Buffer.from(signQuery(params, secret), "hex")
  return timingSafeEqual(expected, Buffer.from(given.toLowerCase(), "hex"))
}
