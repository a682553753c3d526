// GET /console (the operator console's page) and GET /console/assets/{name} (its hashed script
// and CSS). Both under a CSP that allows no inline script or style and only same-origin requests.
import { Effect } from "effect"
import { z } from "zod"
import { NotFound } from "../../src/platform/errors.js"
import { bytes } from "../reply.js"
import { route } from "../route.js"
import { ASSET_NAME, consoleAssets } from "./assets.js"

export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "media-src 'self' blob:",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join("; ")

const SECURITY_HEADERS = {
  "Content-Security-Policy": CONSOLE_CSP,
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
} as const

const load = Effect.promise(consoleAssets)

export const consolePage = route({
  method: "GET",
  path: "/console",
  auth: "public",
  summary: "The operator console (a single page; it signs in with the svc_session cookie and calls this API)",
  tags: ["console"],
  responses: { 200: { description: "The console's HTML page", contentType: "text/html" } },
  handler: () =>
    Effect.map(load, (c) =>
      // no-store: the page names the current assets, so a deploy is picked up on the next load.
      bytes("text/html; charset=utf-8", c.index, 200, { ...SECURITY_HEADERS, "Cache-Control": "no-store" }),
    ),
})

export const consoleAsset = route({
  method: "GET",
  path: "/console/assets/{name}",
  auth: "public",
  summary: "A content-hashed console script or stylesheet, cacheable for a year",
  tags: ["console"],
  params: z.object({ name: z.string() }),
  responses: {
    200: { description: "The file (text/javascript or text/css)" },
    404: { description: "NOT_FOUND: no asset of that name in this build" },
  },
  handler: ({ params, headers }) =>
    Effect.gen(function* () {
      const c = yield* load
      const asset = ASSET_NAME.test(params.name) ? c.assets.get(params.name) : undefined
      if (asset === undefined) return yield* new NotFound({ message: "no console asset of that name" })
      const gzip = acceptsGzip(headers["accept-encoding"])
      return bytes(asset.type, gzip ? asset.gzipped : asset.body, 200, {
        ...SECURITY_HEADERS,
        // The name changes with the content, so a cached copy is never stale.
        "Cache-Control": "public, max-age=31536000, immutable",
        Vary: "Accept-Encoding",
        ...(gzip && { "Content-Encoding": "gzip" }),
      })
    }),
})

export const consoleRoutes = [consolePage, consoleAsset]

/** Whether Accept-Encoding allows gzip (a listed gzip, or *, without q=0). */
export function acceptsGzip(header: string | undefined): boolean {
  if (header === undefined) return false
  for (const part of header.toLowerCase().split(",")) {
    const [coding, ...params] = part.trim().split(";")
    if (coding !== "gzip" && coding !== "*") continue
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="))
    return q === undefined || Number(q.slice(2)) > 0
  }
  return false
}
