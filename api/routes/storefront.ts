// The storefront connection (Shopify-style OAuth): install hands out the platform's authorize URL
// with a single-use state, the platform sends the browser back to the public callback, status
// answers what is connected, and DELETE (admin; an addition to the spec) forgets the token.
import { Effect } from "effect"
import { z } from "zod"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { completeInstall, connectionStatus, disconnect, startInstall } from "../../src/storefront/storefront.service.js"
import { baseUrl } from "../base-url.js"
import { esc, page } from "../html.js"
import { bytes, json } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"

const required = (max: number) =>
  z.string({ error: "is required" }).trim().min(1, "is required").max(max, `must be at most ${max} characters`)

const wantsJson = (headers: Readonly<Record<string, string>>) => (headers["accept"] ?? "").includes("application/json")

export const storefrontInstall = route({
  method: "GET",
  path: "/storefront/install",
  auth: "jwt",
  permission: "write",
  summary:
    "Start connecting a shop: 302 to the platform's authorize URL, or {authorize_url} for Accept: application/json",
  tags: ["storefront"],
  query: z.object({ shop: required(255) }),
  responses: {
    200: { description: "{authorize_url, shop, expires_at} (Accept: application/json)" },
    302: { description: "Redirect to the authorize URL (browsers)" },
    503: { description: "ENCRYPTION_UNAVAILABLE: the server has no CREDENTIALS_MASTER_KEY to keep the token" },
  },
  handler: ({ principal, query, headers }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      const config = yield* AppConfig
      const redirectUri = `${baseUrl(config, headers)}/storefront/callback`
      const r = yield* startInstall(caller.tenantId, query.shop, redirectUri)
      if (wantsJson(headers)) return json(r)
      return bytes("text/plain; charset=utf-8", `Redirecting to ${r.authorize_url}\n`, 302, {
        Location: r.authorize_url,
        "Cache-Control": "no-store",
      })
    }),
})

export const storefrontCallback = route({
  method: "GET",
  path: "/storefront/callback",
  auth: "public",
  summary:
    "Where the platform sends the merchant back: verifies state and hmac, connects the shop, fetches its customers",
  tags: ["storefront"],
  query: z.object({ shop: required(255), code: required(1024), state: required(256) }),
  responses: {
    200: { description: "{connected: true, shop, source_id, status} (JSON), or an HTML page for browsers" },
    401: { description: "INVALID_SIGNATURE: the hmac query signature does not verify" },
    403: { description: "FORBIDDEN: the state is unknown, already used, expired, or for another shop" },
    409: { description: "CREDENTIAL_REJECTED: the shop refused the code" },
    502: { description: "GATEWAY_UNAVAILABLE: the shop could not be reached" },
  },
  handler: ({ query, rawQuery, headers }) =>
    Effect.gen(function* () {
      const r = yield* completeInstall({ rawQuery, shop: query.shop, code: query.code, state: query.state })
      if (wantsJson(headers)) return json(r)
      return page(
        "Storefront connected",
        `<h1>Storefront connected</h1><p>${esc(r.shop)} is connected. Its customers are being read into the data
source “Storefront customers” (id ${r.source_id}); chat with them from the dashboard or with
POST /data/sources/${r.source_id}/chat.</p>`,
      )
    }),
})

export const storefrontStatus = route({
  method: "GET",
  path: "/storefront/status",
  auth: "jwt",
  summary: "Whether the workspace has a shop connected: {connected, shop?, connected_at?, scopes?}",
  tags: ["storefront"],
  handler: ({ principal }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* connectionStatus(caller.tenantId))
    }),
})

export const storefrontDisconnect = route({
  method: "DELETE",
  path: "/storefront",
  auth: "jwt",
  permission: "admin",
  summary: "Disconnect the shop (forgets its token; the storefront data source keeps its rows)",
  tags: ["storefront"],
  handler: ({ principal }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* disconnect(caller.tenantId))
    }),
})
