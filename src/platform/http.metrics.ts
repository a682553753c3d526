// The HTTP layer's metrics: requests by route template, method and status, their durations, the
// workspace rate limit's refusals, and the event streams (open, refused by a cap, dropped).
import { Counter, Gauge } from "prom-client"
import { FastCounter, FastHistogram, registers } from "./metrics.js"

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

const httpRequests = new FastCounter(
  "parley_http_requests_total",
  "HTTP requests answered, by route template (unmatched: no route), method and status (499: client left)",
)

const httpDuration = new FastHistogram(
  "parley_http_request_duration_seconds",
  "Time from a request's arrival until its response ended (a stream counts its whole life)",
  LATENCY_BUCKETS,
)

export const rateLimited = new Counter({
  name: "parley_http_rate_limited_total",
  help: "Requests refused 429 by the workspace rate limit (RATE_LIMIT_RPS)",
  registers,
})

/** The children of one (route, method): the histogram's and one counter per status seen. */
interface RouteSeries {
  readonly duration: { observe(v: number): void }
  readonly byStatus: Map<number, { inc(): void }>
  readonly route: string
  readonly method: string
}
const series = new Map<string, Map<string, RouteSeries>>()
/** Unknown methods are folded so a client cannot mint label values. */
const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])

/** Counts one finished request. `route`: the matched template, or undefined when none matched. */
export function observeRequest(route: string | undefined, method: string, status: number, seconds: number): void {
  const r = route ?? "unmatched"
  let byMethod = series.get(r)
  if (byMethod === undefined) series.set(r, (byMethod = new Map()))
  let s = byMethod.get(method)
  if (s === undefined) {
    const m = METHODS.has(method) ? method : "OTHER"
    s = { duration: httpDuration.child({ route: r, method: m }), byStatus: new Map(), route: r, method: m }
    // A method outside the list is not kept as a key: a client could mint any number of them.
    if (m !== "OTHER") byMethod.set(method, s)
  }
  let c = s.byStatus.get(status)
  if (c === undefined) {
    c = httpRequests.child({ route: s.route, method: s.method, status: String(status) })
    s.byStatus.set(status, c)
  }
  c.inc()
  s.duration.observe(seconds)
}

// ---- Streams (SSE) ------------------------------------------------------------------------------

export const sseOpen = new Gauge({
  name: "parley_sse_streams_open",
  help: "Server-sent event streams open in this process",
  registers,
})

/** Counts an SSE stream as open until it closes. */
export function trackSse(stream: { onClose(cb: () => void): void }): void {
  sseOpen.inc()
  stream.onClose(() => sseOpen.dec())
}

/** Why an event stream was refused: its API key's or session's cap, or its workspace's. */
export type SseRefusal = "key" | "session" | "workspace"

export const sseRefused = new Counter({
  name: "parley_sse_streams_refused_total",
  help:
    "Event streams refused 429 because the caller's API key or session (SSE_MAX_STREAMS_PER_KEY) or its " +
    "workspace (SSE_MAX_STREAMS_PER_WORKSPACE) already held its most open streams in this process",
  labelNames: ["reason"] as const,
  registers,
})
for (const reason of ["key", "session", "workspace"] satisfies SseRefusal[]) sseRefused.inc({ reason }, 0)

export const sseDropped = new Counter({
  name: "parley_sse_clients_dropped_total",
  help: "Turn-stream clients dropped because they stopped reading (past SSE_MAX_BUFFER_BYTES)",
  registers,
})

/** Cached list reads (api/pipeline/cached-reads.ts): answered from memory, loaded, and loads kept. */
export const readCache = new FastCounter(
  "parley_read_cache_total",
  "Reads of cached lists: hit (answered from memory), miss (loaded from the database), kept (a load's answer kept)",
)
