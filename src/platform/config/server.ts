// The process and its HTTP edge: where it listens and logs, how much a request may carry, which
// hosts, origins and proxies it believes, its event streams, the workspace rate limit and metrics.
import { z } from "zod"
import { commaList, optionalString, type Parsed, port, positiveInt } from "./fields.js"

export const serverEnv = {
  HOST: z.string().min(1).default("0.0.0.0"),
  PORT: port.default(8080),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  /** Largest JSON (or other non-multipart) request body, in bytes. */
  BODY_LIMIT_BYTES: positiveInt.default(1024 * 1024),
  /** Largest multipart upload (audience CSVs, voice clips), in bytes. */
  UPLOAD_LIMIT_BYTES: positiveInt.default(50 * 1024 * 1024),
  /** How long shutdown waits for in-flight requests before closing what is left. */
  SHUTDOWN_TIMEOUT_MS: positiveInt.default(10_000),
  /** Absolute base for links the server hands out (sample MP3s, checkout pages). */
  PUBLIC_BASE_URL: optionalString.pipe(z.url().optional()),
  /** Origins allowed to send cookie-authenticated state changes (CSRF), comma-separated. */
  ALLOWED_ORIGINS: commaList((o) => o.replace(/\/+$/, "")).pipe(
    z.array(z.url({ protocol: /^https?$/, error: "must be a comma-separated list of http(s) origins" })),
  ),
  /** Proxies whose X-Forwarded-Proto/Host are believed when rebuilding a signed webhook's URL (comma-separated IPs). */
  TRUSTED_PROXIES: commaList(),
  /** Hosts (host[:port]) whose Host header may stand in for PUBLIC_BASE_URL in links we hand out. */
  ALLOWED_HOSTS: commaList((x) => x.toLowerCase()),
  /** Turn streams: a comment this often when nothing else was sent, closed after this long without a turn. */
  SSE_KEEPALIVE_MS: positiveInt.default(15_000),
  SSE_IDLE_TIMEOUT_MS: positiveInt.default(30 * 60_000),
  /** A turn-stream client with more than this unsent is dropped (it stopped reading). */
  SSE_MAX_BUFFER_BYTES: positiveInt.default(1024 * 1024),
  /**
   * Event streams one API key or session, and one workspace, may hold open at once in each api
   * process (429 RATE_LIMITED past either; api/pipeline/stream-caps.ts).
   */
  SSE_MAX_STREAMS_PER_KEY: positiveInt.max(1_000_000).default(100),
  SSE_MAX_STREAMS_PER_WORKSPACE: positiveInt.max(1_000_000).default(500),
  /** Requests per second one workspace may make, across every api process; unset → no limit. */
  RATE_LIMIT_RPS: optionalString.pipe(z.coerce.number<string>().int().positive().max(1_000_000).optional()),
  /** GET /metrics on its own port (any path; keep the port private); unset → no metrics listener. */
  METRICS_PORT: optionalString.pipe(z.coerce.number<string>().int().min(0).max(65535).optional()),
  /** Bearer token for /metrics: required on the public port (unset → 404 there), and on METRICS_PORT when set. */
  METRICS_TOKEN: optionalString.pipe(z.string().min(16, "must be at least 16 characters").optional()),
}
export type ServerEnv = Parsed<typeof serverEnv>

export type ServerConfig = Readonly<{
  host: string
  port: number
  logLevel: ServerEnv["LOG_LEVEL"]
  bodyLimitBytes: number
  uploadLimitBytes: number
  shutdownTimeoutMs: number
  publicBaseUrl: string | undefined
  allowedOrigins: readonly string[]
  trustedProxies: readonly string[]
  allowedHosts: readonly string[]
  sse: { keepaliveMs: number; idleMs: number; maxBufferedBytes: number }
  /** Event streams open at once per API key or session, and per workspace, in each api process. */
  sseCaps: { perCredential: number; perWorkspace: number }
  rateLimitRps: number | undefined
  metricsPort: number | undefined
  metricsToken: string | undefined
}>

export function serverConfig(e: ServerEnv): ServerConfig {
  return {
    host: e.HOST,
    port: e.PORT,
    logLevel: e.LOG_LEVEL,
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    uploadLimitBytes: e.UPLOAD_LIMIT_BYTES,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    publicBaseUrl: e.PUBLIC_BASE_URL?.replace(/\/+$/, ""),
    allowedOrigins: e.ALLOWED_ORIGINS,
    trustedProxies: e.TRUSTED_PROXIES,
    allowedHosts: e.ALLOWED_HOSTS,
    sse: { keepaliveMs: e.SSE_KEEPALIVE_MS, idleMs: e.SSE_IDLE_TIMEOUT_MS, maxBufferedBytes: e.SSE_MAX_BUFFER_BYTES },
    sseCaps: { perCredential: e.SSE_MAX_STREAMS_PER_KEY, perWorkspace: e.SSE_MAX_STREAMS_PER_WORKSPACE },
    rateLimitRps: e.RATE_LIMIT_RPS,
    metricsPort: e.METRICS_PORT,
    metricsToken: e.METRICS_TOKEN,
  }
}
