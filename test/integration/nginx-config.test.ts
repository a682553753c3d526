// deploy/nginx.conf read as text against the code it fronts (no nginx needed; runs everywhere):
// HTTP/1.1 keep-alive upstream, every underscore header the code reads stripped and mapped to its
// hyphenated name, no proxy_set_header hidden in a location (nginx would drop the server's), SSE
// unbuffered with a read timeout above the keepalive interval, and body limits matching Parley's
// on exactly the routes that take uploads. test/integration/nginx.test.ts runs the file for real.
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { routeTable } from "../../api/routes/index.js"
import { loadConfig } from "../../src/platform/config.js"
import { PROJECT_ROOT } from "../../src/platform/paths.js"
import { NGINX_CONF, templateConf } from "../support/nginx.js"

const conf = readFileSync(NGINX_CONF, "utf8")
/** The directives, comments removed. */
const text = conf.replace(/#[^\n]*/g, "")

/** The body of the block that starts at the first match of `head` (braces inside quotes skipped). */
function block(head: RegExp): string {
  const m = head.exec(text)
  if (m === null) throw new Error(`no block ${head}`)
  let depth = 0
  let quote: string | undefined
  const start = m.index + m[0].length
  for (let i = start - 1; i < text.length; i++) {
    const ch = text[i]!
    if (quote !== undefined) {
      if (ch === quote) quote = undefined
    } else if (ch === "'" || ch === '"') quote = ch
    else if (ch === "{") depth++
    else if (ch === "}" && --depth === 0) return text.slice(start, i)
  }
  throw new Error(`unclosed block ${head}`)
}

const tlsServer = block(/server\s*\{(?=[^}]*listen 443)/)
/** The TLS server's own directives, without its location blocks. */
const serverLevel = tlsServer.replace(/location[^{]*\{(?:'[^']*'|"[^"]*"|[^}'"])*\}/g, "")
const locations = [...tlsServer.matchAll(/location\s+([^{]+)\{((?:'[^']*'|"[^"]*"|[^}'"])*)\}/g)].map((m) => ({
  match: m[1]!.trim(),
  body: m[2]!,
}))

/** Every string literal in the server's sources naming a header with an underscore (x-gw_upi-…). */
function underscoreHeaders(): string[] {
  const found = new Set<string>()
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name)
      if (statSync(p).isDirectory()) walk(p)
      else if (p.endsWith(".ts"))
        for (const m of readFileSync(p, "utf8").matchAll(/"((?:x-)?[a-z0-9]+_[a-z0-9_]*-[a-z0-9-]+)"/g))
          found.add(m[1]!)
    }
  }
  walk(join(PROJECT_ROOT, "api"))
  walk(join(PROJECT_ROOT, "src"))
  return [...found].sort()
}

const seconds = (v: string): number => {
  const m = /^(\d+)(ms|s|m|h)?$/.exec(v)
  if (m === null) throw new Error(`not a time: ${v}`)
  return Number(m[1]) * { ms: 0.001, s: 1, m: 60, h: 3600 }[m[2] ?? "s"]!
}
const bytes = (v: string): number => {
  const m = /^(\d+)([kKmMgG])?$/.exec(v)
  if (m === null) throw new Error(`not a size: ${v}`)
  return Number(m[1]) * { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[(m[2] ?? "").toLowerCase()]!
}
const directive = (body: string, name: string): string | undefined =>
  new RegExp(`(?:^|[;{\\s])${name}\\s+([^;]+);`).exec(body)?.[1]?.trim()

describe("deploy/nginx.conf", () => {
  it("speaks HTTP/1.1 with keep-alive to the api processes (the engine refuses HTTP/1.0 with 505)", () => {
    expect(directive(serverLevel, "proxy_http_version")).toBe("1.1")
    expect(text).not.toMatch(/proxy_http_version\s+1\.0/)
    // Empty (keep-alive) unless the client asks for a WebSocket upgrade (a carrier's media stream).
    expect(serverLevel).toMatch(/proxy_set_header\s+Connection\s+\$parley_connection;/)
    expect(serverLevel).toMatch(/proxy_set_header\s+Upgrade\s+\$http_upgrade;/)
    expect(text).toMatch(/map\s+\$http_upgrade\s+\$parley_connection\s*\{\s*default\s+upgrade;\s*""\s+"";\s*\}/)
    const upstream = block(/upstream\s+parley_api\s*\{/)
    expect(Number(directive(upstream, "keepalive"))).toBeGreaterThan(0)
    // Shorter than uWebSockets.js's 10 s idle timeout: nginx never reuses a connection being closed.
    expect(seconds(directive(upstream, "keepalive_timeout") ?? "60s")).toBeLessThan(10)
    for (const l of locations.filter((l) => /proxy_pass/.test(l.body)))
      expect(l.body, l.match).toMatch(/proxy_pass\s+http:\/\/parley_api;/)
  })

  it("keeps every proxy_set_header at server level (a location's own would drop them all)", () => {
    for (const l of locations) expect(l.body, l.match).not.toMatch(/proxy_set_header/)
  })

  it("strips each underscore header the code reads and forwards it hyphenated", () => {
    expect(text).toMatch(/^\s*underscores_in_headers\s+on;/m)
    const headers = underscoreHeaders()
    expect(headers).toEqual(
      expect.arrayContaining([
        "gw_card-signature",
        "x-gw_upi-signature",
        "x-gw_upi-event-id",
        "x-mail_b-signature",
        "x-telco_a-signature",
        "x-telco_b-signature",
      ]),
    )
    const sets = [...serverLevel.matchAll(/proxy_set_header\s+(\S+)\s+(\S+);/g)].map((m) => ({
      name: m[1]!.toLowerCase(),
      value: m[2]!,
    }))
    for (const h of headers) {
      expect(sets, `${h} stripped`).toContainEqual({ name: h, value: '""' })
      expect(sets, `${h} forwarded hyphenated`).toContainEqual({
        name: h.replace(/_/g, "-"),
        value: `$http_${h.replace(/-/g, "_")}`,
      })
    }
  })

  it("sets X-Forwarded-For, -Proto and -Host, and the Host the client used", () => {
    const value = (name: string) =>
      new RegExp(`proxy_set_header\\s+${name}\\s+(\\S+);`, "i").exec(serverLevel)?.[1] ?? undefined
    expect(value("X-Forwarded-For")).toBe("$proxy_add_x_forwarded_for")
    expect(value("X-Forwarded-Proto")).toBe("$scheme")
    expect(value("X-Forwarded-Host")).toBe("$http_host")
    expect(value("Host")).toBe("$http_host")
  })

  it("streams every server-sent-events route unbuffered, with a read timeout well above the keepalive", () => {
    const config = loadConfig({})
    const streams = routeTable()
      .filter((r) => r.responses?.[200]?.contentType === "text/event-stream")
      .map((r) => r.path.replace(/\{[^}]+\}/g, "17"))
    expect(streams).toEqual(expect.arrayContaining(["/api/runs/17/turns/stream", "/api/approvals/stream"]))
    for (const stream of streams) {
      const sse = locations.filter((l) => l.match.startsWith("~") && new RegExp(l.match.slice(1).trim()).test(stream))
      expect(sse, stream).toHaveLength(1)
      expect(directive(sse[0]!.body, "proxy_buffering")).toBe("off")
      const timeout = seconds(directive(sse[0]!.body, "proxy_read_timeout") ?? "60s")
      expect(timeout).toBeGreaterThanOrEqual((3 * config.sse.keepaliveMs) / 1000)
    }
  })

  it("limits bodies as Parley does: the JSON limit everywhere, the upload limit on exactly the upload routes", () => {
    const config = loadConfig({})
    expect(bytes(directive(serverLevel, "client_max_body_size")!)).toBe(config.bodyLimitBytes)
    const upload = locations.filter((l) => directive(l.body, "client_max_body_size") !== undefined)
    expect(upload).toHaveLength(1)
    expect(bytes(directive(upload[0]!.body, "client_max_body_size")!)).toBe(config.uploadLimitBytes)
    const pattern = new RegExp(upload[0]!.match.replace(/^~\s*/, ""))
    const concrete = (path: string) => path.replace(/\{[^}]+\}/g, "17")
    for (const r of routeTable()) {
      const body = r.body as { multipart?: unknown; raw?: boolean; limit?: string } | undefined
      const takesUpload = body !== undefined && (Boolean(body.multipart) || body.limit === "upload")
      if (takesUpload) expect(pattern.test(concrete(r.path)), `${r.method} ${r.path}`).toBe(true)
      else if (pattern.test(concrete(r.path)))
        // Another method on an upload path (GET /data/sources): it takes no large body.
        expect(
          routeTable().some((o) => o.path === r.path && o !== r),
          `${r.method} ${r.path}`,
        ).toBe(true)
    }
  })

  it("answers its own errors in Parley's error shape", () => {
    const named = (name: string) => locations.find((l) => l.match === `@${name}`)?.body ?? ""
    expect(named("payload_too_large")).toMatch(/return 413 '\{"error":"[^"]+","code":"PAYLOAD_TOO_LARGE"\}/)
    expect(named("upstream_unavailable")).toMatch(/return 503 '\{"error":"[^"]+","code":"[A-Z_]+"\}/)
  })

  it("templates for tests only where a deployment differs: ports, upstream servers, certificates", () => {
    const out = templateConf(conf, {
      httpPort: 1080,
      httpsPort: 1443,
      upstreams: ["127.0.0.1:9001", "127.0.0.1:9002"],
      cert: "/tmp/c.pem",
      key: "/tmp/k.pem",
    })
    const changed = out.split("\n").filter((l) => !conf.includes(l))
    expect(changed.map((l) => l.trim()).sort()).toEqual(
      [
        "listen 127.0.0.1:1080;",
        "listen 127.0.0.1:1443 ssl http2;",
        "server 127.0.0.1:9001 max_fails=1 fail_timeout=5s;",
        "server 127.0.0.1:9002 max_fails=1 fail_timeout=5s;",
        "ssl_certificate /tmp/c.pem;",
        "ssl_certificate_key /tmp/k.pem;",
      ].sort(),
    )
  })
})
