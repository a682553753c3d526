// The console as a compiled install serves it: from a build directory written by
// scripts/build-console.mjs (here a temporary one standing in for dist/console/), the manifest's
// content-hashed files exactly, cached for a year; and without a build, a 503 that says in words
// to run `npm run build`, decided once at start-up rather than retried per request.
import { createHash } from "node:crypto"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { get as httpGet } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { gunzipSync } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { consoleSource, serveBuildForTests } from "../../api/console/assets.js"
import { writeConsole } from "../../scripts/build-console.mjs"
import { sharedTestServer, type TestServer } from "../support/harness.js"

const scratch = mkdtempSync(join(tmpdir(), "parley-console-dist-"))
const built = join(scratch, "built")
const unbuilt = join(scratch, "unbuilt")
const dirUrl = (dir: string) => pathToFileURL(`${dir}/`)

let srv: TestServer
beforeAll(async () => {
  mkdirSync(unbuilt)
  srv = await sharedTestServer()
})
afterAll(async () => {
  await srv?.stop()
  rmSync(scratch, { recursive: true, force: true })
})

const get = (path: string, headers: Record<string, string> = {}) => fetch(srv.url + path, { headers })

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

describe("a compiled install without the console's build", () => {
  it("answers /console with 503 and a page saying to run npm run build, under the console's CSP", async () => {
    serveBuildForTests(dirUrl(unbuilt))
    expect(consoleSource().kind).toBe("missing")
    for (const path of ["/console", "/console/"]) {
      const res = await get(path, { accept: "text/html,application/xhtml+xml,*/*;q=0.8" })
      expect(res.status, path).toBe(503)
      expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8")
      expect(res.headers.get("content-security-policy")).toContain("script-src 'self'")
      expect(res.headers.get("cache-control")).toBe("no-store")
      const html = await res.text()
      expect(html).toContain("The console was not built")
      expect(html).toContain("npm run build")
      expect(html).not.toMatch(/<script|<style|\sstyle=/i)
    }
  })

  it("answers a client asking for JSON, and any asset, in the contract's error shape", async () => {
    const page = await get("/console", { accept: "application/json" })
    expect(page.status).toBe(503)
    const body = (await page.json()) as Json
    expect(body.code).toBe("CONSOLE_NOT_BUILT")
    expect(body.error).toContain("npm run build")
    const asset = await get("/console/assets/main.ABCDEFGH.js")
    expect(asset.status).toBe(503)
    expect(((await asset.json()) as Json).code).toBe("CONSOLE_NOT_BUILT")
  })

  it("decides once: a build appearing later is not picked up by a running process", async () => {
    await writeConsole(unbuilt)
    expect((await get("/console")).status).toBe(503)
    expect(consoleSource().kind).toBe("missing")
  })
})

describe("a compiled install serving its build", () => {
  it("serves index.html as written, naming the manifest's hashed assets", async () => {
    const written = await writeConsole(built)
    serveBuildForTests(dirUrl(built))
    expect(consoleSource().kind).toBe("dist")
    const manifest = JSON.parse(readFileSync(join(built, "manifest.json"), "utf8")) as Json
    expect(manifest.assets).toEqual(written)
    const res = await get("/console")
    expect(res.status).toBe(200)
    expect(res.headers.get("cache-control")).toBe("no-store")
    const html = Buffer.from(await res.arrayBuffer())
    expect(html.equals(readFileSync(join(built, "index.html")))).toBe(true)
    for (const a of written) expect(html.toString()).toContain(`/console/assets/${a.name}`)
  })

  it("serves each manifest asset byte for byte, by its content-hashed name, immutable for a year", async () => {
    const manifest = JSON.parse(readFileSync(join(built, "manifest.json"), "utf8")) as Json
    expect(manifest.assets.length).toBeGreaterThanOrEqual(2)
    for (const a of manifest.assets as Json[]) {
      expect(a.name).toMatch(/^[A-Za-z0-9_-]+\.[A-Z0-9]{8}\.(js|css)$/)
      const res = await get(`/console/assets/${a.name}`, { "accept-encoding": "identity" })
      expect(res.status, a.name).toBe(200)
      expect(res.headers.get("cache-control")).toBe("public, max-age=31536000, immutable")
      expect(res.headers.get("content-type")).toBe(a.type)
      const body = Buffer.from(await res.arrayBuffer())
      expect(body.equals(readFileSync(join(built, "assets", a.name)))).toBe(true)
      expect(createHash("sha256").update(body).digest("hex")).toBe(a.sha256)
      expect(body.length).toBe(a.bytes)
    }
  })

  it("gzips for a client that accepts it (node:http: nothing undone behind our back)", async () => {
    const js = (JSON.parse(readFileSync(join(built, "manifest.json"), "utf8")) as Json).assets.find((a: Json) =>
      a.name.endsWith(".js"),
    ) as Json
    const zipped = await new Promise<{ encoding: string | undefined; body: Buffer }>((resolve, reject) => {
      httpGet(`${srv.url}/console/assets/${js.name}`, { headers: { "accept-encoding": "gzip" } }, (r) => {
        const chunks: Buffer[] = []
        r.on("data", (c: Buffer) => chunks.push(c))
        r.on("end", () => resolve({ encoding: r.headers["content-encoding"], body: Buffer.concat(chunks) }))
      }).on("error", reject)
    })
    expect(zipped.encoding).toBe("gzip")
    expect(gunzipSync(zipped.body).equals(readFileSync(join(built, "assets", js.name)))).toBe(true)
  })

  it("serves nothing outside the manifest, even a file placed beside the assets", async () => {
    const js = (JSON.parse(readFileSync(join(built, "manifest.json"), "utf8")) as Json).assets[0] as Json
    const stray = js.name.replace(/\.[A-Z0-9]{8}\./, ".ZZZZZZZZ.")
    writeFileSync(join(built, "assets", stray), "stray")
    for (const path of [`/console/assets/${stray}`, "/console/assets/manifest.json", "/console/assets/index.html"]) {
      const res = await get(path)
      expect(res.status, path).toBe(404)
      expect(((await res.json()) as Json).code).toBe("NOT_FOUND")
    }
  })
})
