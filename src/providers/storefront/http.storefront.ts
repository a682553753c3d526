// The Shopify-style HTTP adapter: the authorize URL on the shop's admin, the code-for-token
// exchange (POST /admin/oauth/access_token) and the customers read (GET /admin/api/2024-01/customers.json,
// following the Link header's next pages), every answer read bounded and no redirect followed.
import type { Config } from "../../platform/config.js"
import { type Outbound, outboundFor, type VendorAnswer, vendorAttempt } from "../outbound.js"
import {
  STOREFRONT_SCOPES,
  type StorefrontAdapter,
  type StorefrontCustomer,
  StorefrontRefused,
  StorefrontUnavailable,
} from "./storefront.interface.js"

const EXCHANGE_TIMEOUT_MS = 10_000
const READ_TIMEOUT_MS = 30_000
const PAGE_SIZE = 250
/** At most this many customers are read (the data-source row limit). */
export const MAX_CUSTOMERS = 100_000
const API_VERSION = "2024-01"

/** What the adapter reads of the configuration. */
export type StorefrontConfig = Pick<Config, "storefront" | "allowPrivateProviderUrls" | "providerResponseLimitBytes">

/** A field of a customer as the platform sends it. */
interface ApiCustomer {
  id?: unknown
  first_name?: unknown
  last_name?: unknown
  email?: unknown
  phone?: unknown
  orders_count?: unknown
  total_spent?: unknown
  currency?: unknown
  default_address?: { city?: unknown; country_code?: unknown; phone?: unknown } | null
}

const str = (v: unknown): string | null => (typeof v === "string" && v.trim() !== "" ? v.trim() : null)
const num = (v: unknown): number => {
  const n = typeof v === "number" ? v : typeof v === "string" ? Number(v) : Number.NaN
  return Number.isFinite(n) ? n : 0
}

export function toCustomer(c: ApiCustomer): StorefrontCustomer {
  const first = str(c.first_name) ?? ""
  const last = str(c.last_name) ?? ""
  return {
    customer_id: num(c.id),
    name: `${first} ${last}`.trim(),
    first_name: first,
    last_name: last,
    email: str(c.email),
    phone: str(c.phone) ?? str(c.default_address?.phone),
    city: str(c.default_address?.city),
    country: str(c.default_address?.country_code),
    orders_count: num(c.orders_count),
    total_spent: num(c.total_spent),
    currency: str(c.currency) ?? "",
  }
}

/** The `rel="next"` URL of a Link header, if any. */
function nextLink(link: string | null): string | undefined {
  if (link === null) return undefined
  for (const part of link.split(",")) {
    const m = /<([^>]+)>\s*;\s*rel="?next"?/i.exec(part)
    if (m) return m[1]
  }
  return undefined
}

export function makeHttpStorefront(config: StorefrontConfig, doFetch?: typeof fetch): StorefrontAdapter {
  const app = config.storefront.app
  if (app === undefined)
    throw new Error("the HTTP storefront adapter needs STOREFRONT_API_KEY and STOREFRONT_API_SECRET")
  // The shop's host comes from the merchant: its requests get the public-address guard.
  const outbound: Outbound = outboundFor(config, "tenant")
  const root = (shop: string) => config.storefront.baseUrlOverride ?? `https://${shop}`

  /** One request, its answer read bounded; a 4xx is StorefrontRefused, anything else unusable StorefrontUnavailable. */
  async function call(url: string, init: RequestInit, timeoutMs: number, what: string): Promise<VendorAnswer> {
    const r = await vendorAttempt<VendorAnswer, Error>({
      url,
      init,
      timeoutMs,
      outbound,
      fetch: doFetch,
      unreachable: (f) => new StorefrontUnavailable(`the shop is ${f.message}`),
      answered: (answer) => ({ ok: true, value: answer }),
      refused: ({ status }) =>
        status >= 400 && status < 500
          ? new StorefrontRefused(`the shop refused ${what} (HTTP ${status})`)
          : new StorefrontUnavailable(`the shop answered HTTP ${status} to ${what}`),
    })
    if (!r.ok) throw r.error
    return r.value
  }

  return {
    mode: "http",
    signingSecret: app.apiSecret,
    authorizeUrl({ shop, state, redirectUri }) {
      const q = new URLSearchParams({
        client_id: app.apiKey,
        scope: STOREFRONT_SCOPES.join(","),
        redirect_uri: redirectUri,
        state,
      })
      return `https://${shop}/admin/oauth/authorize?${q.toString()}`
    },
    async exchangeCode(shop, code) {
      const { text } = await call(
        `${root(shop)}/admin/oauth/access_token`,
        {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json" },
          body: JSON.stringify({ client_id: app.apiKey, client_secret: app.apiSecret, code }),
        },
        EXCHANGE_TIMEOUT_MS,
        "the code",
      )
      let body: { access_token?: unknown; scope?: unknown }
      try {
        body = JSON.parse(text) as typeof body
      } catch {
        throw new StorefrontUnavailable("the shop's token answer is not JSON")
      }
      const token = str(body?.access_token)
      if (token === null) throw new StorefrontUnavailable("the shop's token answer has no access_token")
      const scopes = (str(body.scope) ?? "")
        .split(",")
        .map((s) => s.trim())
        .filter((s) => s !== "")
      return { accessToken: token, scopes }
    },
    async customers(shop, accessToken) {
      const out: StorefrontCustomer[] = []
      const first = `${root(shop)}/admin/api/${API_VERSION}/customers.json?limit=${PAGE_SIZE}`
      const origin = new URL(first).origin
      const deadline = Date.now() + READ_TIMEOUT_MS
      let url: string | undefined = first
      while (url !== undefined && out.length < MAX_CUSTOMERS) {
        // The next page must stay on the shop: the token is never sent anywhere else.
        if (new URL(url).origin !== origin) throw new StorefrontUnavailable("the shop's next page points elsewhere")
        const left = deadline - Date.now()
        if (left <= 0)
          throw new StorefrontUnavailable(`the shop's customers were not read within ${READ_TIMEOUT_MS} ms`)
        const { text, headers } = await call(
          url,
          { headers: { "x-shopify-access-token": accessToken, accept: "application/json" } },
          left,
          "the customers read",
        )
        let body: { customers?: unknown }
        try {
          body = JSON.parse(text) as typeof body
        } catch {
          throw new StorefrontUnavailable("the shop's customers answer is not JSON")
        }
        if (!Array.isArray(body?.customers)) throw new StorefrontUnavailable("the shop's answer has no customers list")
        for (const c of body.customers as ApiCustomer[])
          if (c !== null && typeof c === "object") out.push(toCustomer(c))
        url = nextLink(headers.get("link"))
      }
      return out.slice(0, MAX_CUSTOMERS)
    },
  }
}
