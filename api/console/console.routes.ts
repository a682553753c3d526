// GET /console (the operator console's page) and GET /console/assets/{name} (its hashed script
// and CSS). Both under a CSP that allows no inline script or style and only same-origin requests;
// a compiled install without a console build answers 503 saying so.
import { Effect } from "effect"
import { z } from "zod"
import { NotFound } from "../../src/platform/errors.js"
import { consoleNotBuilt } from "../error-map.js"
import { esc } from "../html.js"
import { bytes, json, type Reply } from "../reply.js"
import { route } from "../route.js"
import { ASSET_NAME, consoleAssets, NOT_BUILT } from "./assets.js"

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

/**
 * The 503 for a compiled install without a console build: a page for a browser, the contract's
 * error shape for a client that asks for JSON. Never cached: a build and restart fixes it.
 */
function notBuilt(accept: string | undefined): Reply {
  const answer = consoleNotBuilt(NOT_BUILT)
  const headers = { ...SECURITY_HEADERS, "Cache-Control": "no-store", ...answer.headers }
  const wantsJson =
    /\bapplication\/(?:[a-z0-9.+-]*\+)?json\b/i.test(accept ?? "") && !/\btext\/html\b/i.test(accept ?? "")
  if (wantsJson) return json(answer.body, answer.status, headers)
  const html =
    '<!doctype html><html lang="en"><head><meta charset="utf-8">' +
    '<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">' +
    "<title>Parley console: not built</title></head><body><main><h1>The console was not built</h1>" +
    `<p>${esc(NOT_BUILT)}</p><p>The API itself is up: see <a href="/openapi.json">/openapi.json</a>.</p>` +
    "</main></body></html>\n"
  return bytes("text/html; charset=utf-8", html, 503, headers)
}

export const consolePage = route({
  method: "GET",
  path: "/console",
  auth: "public",
  summary: "The operator console (a single page; it signs in with the svc_session cookie and calls this API)",
  tags: ["console"],
  responses: {
    200: { description: "The console's HTML page", contentType: "text/html" },
    503: {
      description:
        "CONSOLE_NOT_BUILT: a compiled install without `npm run build`'s dist/console/ (a page saying so, or " +
        "{error, code} for Accept: application/json)",
    },
  },
  handler: ({ headers }) =>
    Effect.map(load, (c) =>
      c === undefined
        ? notBuilt(headers["accept"])
        : // no-store: the page names the current assets, so a deploy is picked up on the next load.
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
    503: { description: "CONSOLE_NOT_BUILT: a compiled install without `npm run build`'s dist/console/" },
  },
  handler: ({ params, headers }) =>
    Effect.gen(function* () {
      const c = yield* load
      if (c === undefined) return notBuilt("application/json")
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
