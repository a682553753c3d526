// The operator console as the api process serves it: the page and its hashed assets under a strict
// CSP, cached for a year by name, with no inline script or style, and nothing but the fixed set.
import { get as httpGet, type IncomingHttpHeaders } from "node:http"
import { gunzipSync } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"
import { rawRequest } from "../support/raw-http.js"

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self' blob:; " +
  "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

let srv: TestServer
beforeAll(async () => {
  srv = await sharedTestServer()
})
afterAll(async () => srv?.stop())

const get = (path: string, init?: RequestInit) => fetch(srv.url + path, init)

/** The asset URLs the page names, in order. */
function assetsOf(html: string): string[] {
  return [...html.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1]!)
}

describe("GET /console", () => {
  it("serves the page under the strict CSP, never cached", async () => {
    for (const path of ["/console", "/console/"]) {
      const res = await get(path)
      expect(res.status).toBe(200)
      expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8")
      expect(res.headers.get("content-security-policy")).toBe(CSP)
      expect(res.headers.get("x-content-type-options")).toBe("nosniff")
      expect(res.headers.get("referrer-policy")).toBe("no-referrer")
      expect(res.headers.get("cache-control")).toBe("no-store")
      const html = await res.text()
      expect(html).toMatch(/^<!doctype html>/i)
      expect(html).toContain('<div id="app"></div>')
    }
  })

  it("has no inline script, style or event handler: every script and stylesheet is a hashed asset", async () => {
    const html = await (await get("/console")).text()
    // Every <script> has a src and an empty body.
    const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/gi)]
    expect(scripts.length).toBeGreaterThanOrEqual(1)
    for (const [, attrs, body] of scripts) {
      expect(attrs).toMatch(/\bsrc="\/console\/assets\/[^"]+\.js"/)
      expect(body).toBe("")
    }
    expect(html).not.toMatch(/<style\b/i)
    expect(html).not.toMatch(/\sstyle=/i)
    expect(html).not.toMatch(/\son[a-z]+=/i)
    expect(html).not.toMatch(/javascript:/i)
    // No third-party origin: the console works with no network beyond this server.
    expect(html).not.toMatch(/https?:\/\//)
    const assets = assetsOf(html)
    expect(assets.some((a) => a.endsWith(".js"))).toBe(true)
    expect(assets.some((a) => a.endsWith(".css"))).toBe(true)
    for (const a of assets) expect(a).toMatch(/^\/console\/assets\/[A-Za-z0-9_-]+\.[A-Z0-9]{8}\.(js|css)$/)
  })

  it("answers HEAD, and refuses other methods with 405", async () => {
    expect((await get("/console", { method: "HEAD" })).status).toBe(200)
    const post = await get("/console", { method: "POST" })
    expect(post.status).toBe(405)
    expect(post.headers.get("allow")).toContain("GET")
    expect(((await post.json()) as { code: string }).code).toBe("METHOD_NOT_ALLOWED")
  })
})

describe("GET /console/assets/{name}", () => {
  it("serves each asset the page names, immutable for a year, with its type and the CSP", async () => {
    const assets = assetsOf(await (await get("/console")).text())
    for (const a of assets) {
      const res = await get(a)
      expect(res.status).toBe(200)
      expect(res.headers.get("cache-control")).toBe("public, max-age=31536000, immutable")
      expect(res.headers.get("content-security-policy")).toBe(CSP)
      expect(res.headers.get("x-content-type-options")).toBe("nosniff")
      expect(res.headers.get("content-type")).toBe(
        a.endsWith(".js") ? "text/javascript; charset=utf-8" : "text/css; charset=utf-8",
      )
      const body = await res.text()
      expect(body.length).toBeGreaterThan(10)
      // Built by esbuild and minified: the bundle mounts the app on #app.
      if (a.endsWith(".js")) expect(body).toContain("app")
    }
  })

  it("is gzipped for a client that accepts it, and plain for one that does not", async () => {
    const js = assetsOf(await (await get("/console")).text()).find((a) => a.endsWith(".js"))!
    // node:http, unlike fetch, neither asks for nor undoes an encoding by itself.
    const send = (enc: string | undefined) =>
      new Promise<{ headers: IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
        const req = httpGet(
          `${srv.url}${js}`,
          { headers: enc === undefined ? {} : { "accept-encoding": enc } },
          (res) => {
            const chunks: Buffer[] = []
            res.on("data", (c: Buffer) => chunks.push(c))
            res.on("end", () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }))
          },
        )
        req.on("error", reject)
      })
    const plain = await send(undefined)
    expect(plain.headers["content-encoding"]).toBeUndefined()
    const zipped = await send("br, gzip;q=0.8")
    expect(zipped.headers["content-encoding"]).toBe("gzip")
    expect(zipped.headers["vary"]).toBe("Accept-Encoding")
    expect(gunzipSync(zipped.body).equals(plain.body)).toBe(true)
    expect(zipped.body.length).toBeLessThan(plain.body.length / 2)
    for (const refused of ["gzip;q=0", "identity", "br"])
      expect((await send(refused)).headers["content-encoding"], refused).toBeUndefined()
  })

  it("is 404 in the contract's shape for any other name, including attempts at other paths", async () => {
    const page = await (await get("/console")).text()
    const js = assetsOf(page).find((a) => a.endsWith(".js"))!
    const misses = [
      "/console/assets/main.AAAAAAAA.js",
      js.replace(/\.js$/, ".css"),
      `${js}.map`,
      "/console/assets/index.html",
      "/console/assets/manifest.json",
      "/console/assets/..%2F..%2Fpackage.json",
      "/console/assets/%2e%2e%2fmanifest.json",
      // The longest name whose request head still fits the engine's 4 KB (past that the engine
      // itself answers 431 before any Parley code sees the request).
      `/console/assets/${"a".repeat(3800)}.js`,
    ]
    for (const path of misses) {
      const res = await get(path)
      expect(res.status, path).toBe(404)
      const body = (await res.json()) as { code: string; error: string }
      expect(body.code).toBe("NOT_FOUND")
      expect(body.error).toBeTypeOf("string")
    }
    expect((await get(`/console/assets/${"a".repeat(5000)}.js`)).status).toBe(431)
  })

  it("does not let dot segments sent raw reach the filesystem", async () => {
    for (const target of ["/console/assets/../../package.json", "/console/assets/../index.html"]) {
      const res = await rawRequest(srv.port, `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)
      expect(res.status, target).toBe(404)
      expect(res.body).not.toContain('"name": "parley"')
    }
  })
})

describe("the console's API calls", () => {
  it("pass the CSRF check from the console's own origin with no ALLOWED_ORIGINS, and no other", async () => {
    expect(srv.config.allowedOrigins).toEqual([])
    const session = await api(srv).signup()
    const create = (origin: string | undefined) =>
      fetch(`${srv.url}/api/workflows`, {
        method: "POST",
        headers: {
          cookie: session.cookie,
          "content-type": "application/json",
          ...(origin !== undefined && { origin }),
        },
        body: JSON.stringify({ nl_prompt: "Remind members about their renewal." }),
      })
    // What the browser sends from /console: the page's origin, the server's own.
    const ok = await create(srv.url)
    expect(ok.status).toBe(201)
    const id = ((await ok.json()) as { id: number }).id
    for (const origin of ["http://evil.example", undefined]) {
      const refused = await create(origin)
      expect(refused.status).toBe(403)
      expect(((await refused.json()) as { code: string }).code).toBe("CSRF_REJECTED")
    }
    const [{ n }] = await srv.sql<
      [{ n: number }]
    >`select count(*)::int as n from workflows where tenant_id = ${session.tenantId}`
    expect(n).toBe(1)
    expect(id).toBeGreaterThan(0)
  })
})
