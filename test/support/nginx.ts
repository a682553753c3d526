// nginx in front of spawned api processes, for test/integration/nginx*.test.ts: the repo's
// deploy/nginx.conf with only its ports, upstream servers and certificate paths substituted, run
// unprivileged from a temp prefix (own pid, logs, temp dirs), TLS with a throwaway certificate;
// and an HTTPS client (undici) that trusts that certificate.
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer, Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, fetch as undiciFetch } from "undici"
import { PROJECT_ROOT } from "../../src/platform/paths.js"

export const NGINX_CONF = join(PROJECT_ROOT, "deploy/nginx.conf")

/** The nginx binary on PATH or in /usr/sbin; undefined when nginx is not installed. */
export function nginxBinary(): string | undefined {
  for (const dir of [...(process.env.PATH ?? "").split(":"), "/usr/sbin", "/usr/local/sbin"]) {
    const candidate = join(dir, "nginx")
    if (dir !== "" && existsSync(candidate)) return candidate
  }
  return undefined
}

/** A port nobody listens on right now (the kernel's pick, released again). */
export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer()
    s.once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })

/**
 * deploy/nginx.conf with the deployment's specifics replaced: the listen ports (IPv4 loopback
 * only), the upstream's servers, and the certificate paths. Every replacement must match exactly
 * as often as expected, so a reshaped file fails here loudly instead of running half-substituted.
 */
export function templateConf(
  text: string,
  opts: { httpPort: number; httpsPort: number; upstreams: string[]; cert: string; key: string },
): string {
  const replace = (s: string, pattern: RegExp, to: string, times: number): string => {
    const found = s.match(pattern)?.length ?? 0
    if (found !== times) throw new Error(`deploy/nginx.conf: expected ${times} match(es) of ${pattern}, found ${found}`)
    return s.replace(pattern, to)
  }
  let s = text
  s = replace(s, /^\s*listen \[::\]:.*\n/gm, "", 2)
  s = replace(s, /^(\s*)listen 80;/gm, `$1listen 127.0.0.1:${opts.httpPort};`, 1)
  s = replace(s, /^(\s*)listen 443 ssl( http2)?;/gm, `$1listen 127.0.0.1:${opts.httpsPort} ssl$2;`, 1)
  s = replace(s, /^\s*ssl_certificate\s+\S+;/gm, `    ssl_certificate ${opts.cert};`, 1)
  s = replace(s, /^\s*ssl_certificate_key\s+\S+;/gm, `    ssl_certificate_key ${opts.key};`, 1)
  const servers = opts.upstreams.map((u) => `    server ${u} max_fails=1 fail_timeout=5s;\n`).join("")
  s = replace(s, /^\s*server 127\.0\.0\.1:\d+[^\n]*\n/gm, "", 2)
  s = replace(s, /^(upstream parley_api \{\n(?:\s*#[^\n]*\n)*)/gm, `$1${servers}`, 1)
  return s
}

export interface RunningNginx {
  /** http://127.0.0.1:<port>: the plain-HTTP server (a redirect to HTTPS). */
  readonly httpUrl: string
  /** https://127.0.0.1:<port>: the TLS server in front of the api processes. */
  readonly httpsUrl: string
  /** The certificate nginx presents (PEM), for clients to trust. */
  readonly cert: string
  /** The configuration nginx runs: deploy/nginx.conf substituted. */
  readonly siteConf: string
  readonly child: ChildProcess
  errorLog(): string
  stop(): Promise<void>
}

/** Generates a throwaway self-signed certificate for 127.0.0.1 and localhost. */
function makeCert(dir: string): { cert: string; key: string } {
  const cert = join(dir, "cert.pem")
  const key = join(dir, "key.pem")
  execFileSync(
    "openssl",
    [
      ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"],
      ...["-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost"],
      ...["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
    ],
    { stdio: "ignore" },
  )
  return { cert, key }
}

const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = new Socket()
    s.once("connect", () => {
      s.destroy()
      resolve(true)
    })
    s.once("error", () => resolve(false))
    s.connect(port, "127.0.0.1")
  })

/** Starts nginx (not as a daemon) on deploy/nginx.conf in front of `upstreams` ("127.0.0.1:port"). */
export async function startNginx(opts: { upstreams: string[]; siteConf?: string }): Promise<RunningNginx> {
  const bin = nginxBinary()
  if (bin === undefined) throw new Error("nginx is not installed (.ci/run installs it)")
  const prefix = mkdtempSync(join(tmpdir(), "parley-nginx-"))
  // When run as root, nginx's workers run as nobody: they must reach the temp dirs under the prefix.
  chmodSync(prefix, 0o755)
  const { cert, key } = makeCert(prefix)
  const [httpPort, httpsPort] = [await freePort(), await freePort()]
  const siteConf = templateConf(opts.siteConf ?? readFileSync(NGINX_CONF, "utf8"), {
    httpPort,
    httpsPort,
    upstreams: opts.upstreams,
    cert,
    key,
  })
  writeFileSync(join(prefix, "parley.conf"), siteConf)
  // The parts of Debian's /etc/nginx/nginx.conf a site file relies on, pointed at the prefix.
  writeFileSync(
    join(prefix, "nginx.conf"),
    [
      "worker_processes 1;",
      `pid ${join(prefix, "nginx.pid")};`,
      `error_log ${join(prefix, "error.log")} warn;`,
      "events { worker_connections 512; }",
      "http {",
      `  access_log ${join(prefix, "access.log")};`,
      ...["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map(
        (t) => `  ${t}_temp_path ${join(prefix, `${t}_temp`)};`,
      ),
      `  include ${join(prefix, "parley.conf")};`,
      "}",
      "",
    ].join("\n"),
  )
  const args = ["-p", prefix, "-e", join(prefix, "error.log"), "-c", join(prefix, "nginx.conf")]
  execFileSync(bin, [...args, "-t", "-q"], { stdio: ["ignore", "ignore", "pipe"] })
  const child = spawn(bin, [...args, "-g", "daemon off;"], { stdio: ["ignore", "ignore", "pipe"] })
  let stderr = ""
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()))
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  const errorLog = () => {
    try {
      return stderr + readFileSync(join(prefix, "error.log"), "utf8")
    } catch {
      return stderr
    }
  }
  const deadline = Date.now() + 10_000
  while (!(await listening(httpsPort)) || !(await listening(httpPort))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL")
      throw new Error(`nginx did not start: ${errorLog()}`)
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  return {
    httpUrl: `http://127.0.0.1:${httpPort}`,
    httpsUrl: `https://127.0.0.1:${httpsPort}`,
    cert: readFileSync(cert, "utf8"),
    siteConf,
    child,
    errorLog,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGQUIT")
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000)
      await exited
      clearTimeout(timer)
      rmSync(prefix, { recursive: true, force: true })
    },
  }
}

export type Json = Record<string, any>

export interface TlsClient {
  /** One request; the body is sent as given (a string or bytes: exact, for signatures). */
  request(
    method: string,
    path: string,
    opts?: { token?: string; json?: unknown; body?: string | Buffer; headers?: Record<string, string> },
  ): Promise<{ status: number; headers: Headers; text: string; body: Json }>
  /** A streaming GET: the response, its body still arriving. */
  open(path: string, headers: Record<string, string>): Promise<Response>
  close(): Promise<void>
}

/** An HTTPS client of `base` that trusts `cert` (and nothing else). */
export function tlsClient(base: string, cert: string): TlsClient {
  const dispatcher = new Agent({ connect: { ca: cert }, bodyTimeout: 0 })
  return {
    async request(method, path, opts = {}) {
      const headers: Record<string, string> = { ...opts.headers }
      if (opts.token !== undefined) headers["authorization"] = `Bearer ${opts.token}`
      let body: string | Buffer | undefined = opts.body
      if (opts.json !== undefined) {
        headers["content-type"] = "application/json"
        body = JSON.stringify(opts.json)
      }
      const res = await undiciFetch(base + path, {
        method,
        headers,
        dispatcher,
        redirect: "manual",
        ...(body !== undefined && { body }),
      })
      const text = await res.text()
      let parsed: Json = {}
      try {
        parsed = JSON.parse(text) as Json
      } catch {
        // not JSON (TwiML, HTML): text only
      }
      return { status: res.status, headers: res.headers as unknown as Headers, text, body: parsed }
    },
    async open(path, headers) {
      return (await undiciFetch(base + path, { headers, dispatcher })) as unknown as Response
    },
    close: () => dispatcher.close(),
  }
}

/** Reads server-sent events from a streaming response until `done` says so (or the stream ends). */
export async function readEvents(
  res: Response,
  done: (events: Array<{ id: string | undefined; data: string }>) => boolean,
  timeoutMs: number,
): Promise<{ events: Array<{ id: string | undefined; data: string }>; comments: number }> {
  const events: Array<{ id: string | undefined; data: string }> = []
  let comments = 0
  const reader = res.body!.getReader()
  const decoder = new TextDecoder()
  let buffer = ""
  const timer = setTimeout(() => void reader.cancel().catch(() => {}), timeoutMs)
  try {
    for (;;) {
      const { value, done: ended } = await reader.read()
      if (ended) break
      buffer += decoder.decode(value, { stream: true })
      let at: number
      while ((at = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, at)
        buffer = buffer.slice(at + 2)
        let id: string | undefined
        const data: string[] = []
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) comments++
          else if (line.startsWith("id:")) id = line.slice(3).trim()
          else if (line.startsWith("data:")) data.push(line.slice(5).trimStart())
        }
        if (data.length > 0) events.push({ id, data: data.join("\n") })
      }
      if (done(events)) break
    }
  } finally {
    clearTimeout(timer)
    await reader.cancel().catch(() => {})
  }
  return { events, comments }
}
