// Who may read /metrics, and the private listener on METRICS_PORT. On the public port /metrics
// answers only a bearer METRICS_TOKEN (404 without one configured, so the page does not exist
// there); on METRICS_PORT it answers anyone who can reach that port, and asks for the token too
// when one is set. The listener is plain node:http: any path serves the metrics, so runtime-only
// processes, which have no HTTP server, are scraped the same way.
import { createHash, timingSafeEqual } from "node:crypto"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import type { Logger } from "pino"
import { METRICS_CONTENT_TYPE, renderMetrics } from "./metrics.js"

const digest = (s: string): Buffer => createHash("sha256").update(s).digest()

/** Whether an Authorization header carries `token` as its bearer credential (constant time). */
export function bearerMatches(token: string, authorization: string | undefined): boolean {
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization ?? "")
  return m !== null && timingSafeEqual(digest(m[1]!), digest(token))
}

export interface MetricsServer {
  readonly port: number
  close(): Promise<void>
}

/** Serves the metrics on `host:port` (GET or HEAD, any path). */
export async function startMetricsServer(opts: {
  host: string
  port: number
  token: string | undefined
  log: Logger
}): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { Allow: "GET, HEAD", "Content-Type": "text/plain" }).end("method not allowed\n")
      return
    }
    if (opts.token !== undefined && !bearerMatches(opts.token, req.headers.authorization)) {
      res.writeHead(401, { "WWW-Authenticate": "Bearer", "Content-Type": "text/plain" }).end("unauthorized\n")
      return
    }
    renderMetrics().then(
      (text) => {
        res.writeHead(200, { "Content-Type": METRICS_CONTENT_TYPE })
        res.end(req.method === "HEAD" ? undefined : text)
      },
      (err: unknown) => {
        opts.log.error({ err }, "metrics scrape failed")
        res.writeHead(500, { "Content-Type": "text/plain" }).end("scrape failed\n")
      },
    )
  })
  server.headersTimeout = 10_000
  server.requestTimeout = 10_000
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(opts.port, opts.host, () => {
      server.off("error", reject)
      resolve()
    })
  })
  const port = (server.address() as AddressInfo).port
  opts.log.info({ host: opts.host, port }, "metrics listening")
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
