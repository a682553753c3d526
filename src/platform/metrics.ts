// Every Prometheus metric the process exports, defined here and nowhere else (prom-client, one
// registry per process). Hot paths only bump counters and observe histograms through cached
// children; gauges that describe state (open runs, pending approvals, the pool) are read when
// scraped. No label carries an id: routes are templates, reasons and outcomes are code constants.

import { monitorEventLoopDelay } from "node:perf_hooks"
import type postgres from "postgres"
import { Counter, Gauge, Histogram, Registry } from "prom-client"
import { countPendingApprovals } from "./metrics.repo.js"

export const registry = new Registry()
/** The exposition format's content type (Prometheus text 0.0.4). */
export const METRICS_CONTENT_TYPE = registry.contentType

const registers = [registry]

// ---- Process ------------------------------------------------------------------------------------
// Read when scraped. (prom-client's collectDefaultMetrics also observes every GC, which cost a few
// microseconds of CPU per request under load: left out.)

const loopDelay = monitorEventLoopDelay({ resolution: 20 })
loopDelay.enable()

new Gauge({
  name: "parley_event_loop_delay_seconds",
  help: "Event-loop delay since the previous scrape (sampled every 20 ms): p50, p90, p99, max and mean",
  labelNames: ["stat"] as const,
  registers,
  collect() {
    const s = (ns: number) => (Number.isFinite(ns) ? ns / 1e9 : 0)
    this.set({ stat: "p50" }, s(loopDelay.percentile(50)))
    this.set({ stat: "p90" }, s(loopDelay.percentile(90)))
    this.set({ stat: "p99" }, s(loopDelay.percentile(99)))
    this.set({ stat: "max" }, s(loopDelay.max))
    this.set({ stat: "mean" }, s(loopDelay.mean))
    loopDelay.reset()
  },
})

new Gauge({
  name: "process_resident_memory_bytes",
  help: "Resident memory of the process",
  registers,
  collect() {
    this.set(process.memoryUsage.rss())
  },
})

new Gauge({
  name: "nodejs_heap_used_bytes",
  help: "V8 heap in use",
  registers,
  collect() {
    this.set(process.memoryUsage().heapUsed)
  },
})

new Counter({
  name: "process_cpu_seconds_total",
  help: "User and system CPU time of the process",
  registers,
  collect() {
    const u = process.cpuUsage()
    this.reset()
    this.inc((u.user + u.system) / 1e6)
  },
})

// ---- Hot-path series ----------------------------------------------------------------------------
// prom-client's own counters hash their label object on every call (microseconds a request), so
// the series touched per request, per bus message and per statement are plain numbers here, read
// into the exposition when scraped.

type Labels = Readonly<Record<string, string>>
interface MetricValue {
  readonly labels: Labels
  readonly value: number
  readonly metricName?: string
}

/** A counter whose children are cached objects: inc() is one addition. */
class FastCounter {
  private readonly children = new Map<string, { labels: Labels; value: number }>()
  constructor(
    readonly name: string,
    readonly help: string,
  ) {
    registry.registerMetric(this as never)
  }
  /** The child for `labels` (cache it: creating one is the expensive part). */
  child(labels: Labels = {}): { inc(n?: number): void } {
    const key = JSON.stringify(labels)
    let c = this.children.get(key)
    if (c === undefined) this.children.set(key, (c = { labels, value: 0 }))
    const series = c
    return {
      inc: (n = 1) => {
        series.value += n
      },
    }
  }
  reset(): void {
    for (const c of this.children.values()) c.value = 0
  }
  get() {
    const values: MetricValue[] = [...this.children.values()].map((c) => ({ labels: c.labels, value: c.value }))
    return { name: this.name, help: this.help, type: "counter", values, aggregator: "sum" }
  }
}

/** A histogram whose children count into plain arrays; cumulative buckets are made when scraped. */
class FastHistogram {
  private readonly children = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>()
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly buckets: readonly number[],
  ) {
    registry.registerMetric(this as never)
  }
  child(labels: Labels = {}): { observe(v: number): void } {
    const key = JSON.stringify(labels)
    let c = this.children.get(key)
    if (c === undefined) this.children.set(key, (c = { labels, counts: this.buckets.map(() => 0), sum: 0, count: 0 }))
    const series = c
    const bounds = this.buckets
    return {
      observe: (v) => {
        series.sum += v
        series.count++
        for (let i = 0; i < bounds.length; i++)
          if (v <= bounds[i]!) {
            series.counts[i]!++
            return
          }
      },
    }
  }
  reset(): void {
    for (const c of this.children.values()) {
      c.counts.fill(0)
      c.sum = 0
      c.count = 0
    }
  }
  get() {
    const values: MetricValue[] = []
    for (const c of this.children.values()) {
      let cumulative = 0
      this.buckets.forEach((le, i) => {
        cumulative += c.counts[i]!
        values.push({ metricName: `${this.name}_bucket`, labels: { ...c.labels, le: String(le) }, value: cumulative })
      })
      values.push({ metricName: `${this.name}_bucket`, labels: { ...c.labels, le: "+Inf" }, value: c.count })
      values.push({ metricName: `${this.name}_sum`, labels: c.labels, value: c.sum })
      values.push({ metricName: `${this.name}_count`, labels: c.labels, value: c.count })
    }
    return { name: this.name, help: this.help, type: "histogram", values, aggregator: "sum" }
  }
}

// ---- HTTP ---------------------------------------------------------------------------------------

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

// ---- Bus ----------------------------------------------------------------------------------------

const busMessages = new FastCounter(
  "parley_bus_messages_total",
  "Bus messages published (out) and delivered to this process's subscriptions (in; NATS only)",
)
export const busOut = busMessages.child({ direction: "out" })
export const busIn = busMessages.child({ direction: "in" })

export const busReconnects = new Counter({
  name: "parley_bus_reconnects_total",
  help: "Times the NATS connection was re-established after a disconnect",
  registers,
})

// ---- Runtime ------------------------------------------------------------------------------------

/** What a runtime host reports when scraped. */
export interface RuntimeSample {
  readonly runs: number
  readonly calls: number
}
const runtimeSources = new Set<() => RuntimeSample>()

/** A runtime host registers how to count its runs and live calls; returns the unregister. */
export function trackRuntime(sample: () => RuntimeSample): () => void {
  runtimeSources.add(sample)
  return () => runtimeSources.delete(sample)
}

const sumRuntime = (k: keyof RuntimeSample): number => {
  let n = 0
  for (const s of runtimeSources) n += s()[k]
  return n
}

new Gauge({
  name: "parley_runtime_runs_owned",
  help: "Runs this process drives (holds the lease of)",
  registers,
  collect() {
    this.set(sumRuntime("runs"))
  },
})

new Gauge({
  name: "parley_runtime_live_calls",
  help: "Calls in flight in this process",
  registers,
  collect() {
    this.set(sumRuntime("calls"))
  },
})

export const callsStarted = new Counter({
  name: "parley_runtime_calls_started_total",
  help: "Calls the dialer started (rate() gives calls started per second)",
  registers,
})

export const dialDecisions = new Counter({
  name: "parley_runtime_dial_decisions_total",
  help: "Dialer decisions by kind (dial, skip, hold, retry, stop) and reason",
  labelNames: ["decision", "reason"] as const,
  registers,
})

/** Reasons are code constants; past this many distinct ones the rest are folded into "other". */
const MAX_REASONS = 200
const reasonsSeen = new Set<string>()
export function observeDialDecision(decision: string, reason: string): void {
  if (!reasonsSeen.has(reason)) {
    if (reasonsSeen.size >= MAX_REASONS) reason = "other"
    else reasonsSeen.add(reason)
  }
  dialDecisions.labels(decision, reason).inc()
}

// ---- Failures nobody waits on ---------------------------------------------------------------------
// Each is logged too, with its context; the counters say how often, for alerts.

export const hangupFailures = new Counter({
  name: "parley_call_hangup_failures_total",
  help:
    "Hang-ups a carrier did not take after the adapter's retries, by provider and reason (hangup: a call's own, " +
    "marked for the sweep; handoff: the callee of a failed hand-off; sweep: the sweep tried again and failed; " +
    "given_up: the sweep stopped trying, the call may have stayed up)",
  labelNames: ["provider", "reason"] as const,
  registers,
})

export const hangupsSwept = new Counter({
  name: "parley_call_hangups_swept_total",
  help: "Hang-ups that failed at first and went through when the sweep tried again, by provider",
  labelNames: ["provider"] as const,
  registers,
})

export const backgroundFailures = new Counter({
  name: "parley_background_failures_total",
  help:
    "Background steps that failed with no caller to tell, by reason (approval_expiry: an expired approval not " +
    "recorded or announced; run_release: a run's lease not given back, so it waits for the lease to lapse)",
  labelNames: ["reason"] as const,
  registers,
})

// ---- Approvals ----------------------------------------------------------------------------------

const approvalsPendingGauge = new Gauge({
  name: "parley_approvals_pending",
  help: "Approvals waiting for a decision, in every workspace (read from the database when scraped)",
  registers,
})

export const approvalDecisionSeconds = new Histogram({
  name: "parley_approval_decision_seconds",
  help: "Time from an approval's proposal to its decision",
  buckets: [1, 5, 15, 30, 60, 120, 300, 900, 3600, 14_400, 86_400],
  registers,
})

// ---- Ledger -------------------------------------------------------------------------------------

export const ledgerPosts = new Counter({
  name: "parley_ledger_posts_total",
  help: "Ledger posts by outcome (posted, replayed, insufficient_funds), rolled-back ones included",
  labelNames: ["outcome"] as const,
  registers,
})
for (const outcome of ["posted", "replayed", "insufficient_funds"]) ledgerPosts.inc({ outcome }, 0)

// ---- Webhooks -----------------------------------------------------------------------------------

export const webhooksDelivered = new Counter({
  name: "parley_webhook_deliveries_delivered_total",
  help: "Webhook deliveries a receiver accepted (2xx)",
  registers,
})

export const webhookAttemptsFailed = new Counter({
  name: "parley_webhook_attempts_failed_total",
  help: "Webhook attempts that failed, by reason (status_5xx, timeout, …) and outcome (retry, or failed for good)",
  labelNames: ["reason", "outcome"] as const,
  registers,
})

export const webhookLagSeconds = new Histogram({
  name: "parley_webhook_lag_seconds",
  help: "Time from an event's commit to its delivery's first attempt",
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
  registers,
})

const webhooksQueuedGauge = new Gauge({
  name: "parley_webhook_deliveries_queued",
  help: "Webhook deliveries pending to live endpoints, in every workspace (read from the database when scraped)",
  registers,
})

const webhookOldestDueGauge = new Gauge({
  name: "parley_webhook_oldest_due_seconds",
  help:
    "How long the longest-waiting due webhook delivery has been due, in every workspace; 0 when none " +
    "(read from the database when scraped: it grows while delivery is stalled)",
  registers,
})

/** What the webhook gauges show, read from the database when scraped. */
export interface WebhookQueueState {
  readonly queued: number
  readonly oldestDueSeconds: number
}
/** How to read the webhook queue when scraped (set by a runtime process's delivery worker). */
let webhookQueue: (() => Promise<WebhookQueueState>) | undefined
export function trackWebhookQueue(read: () => Promise<WebhookQueueState>): void {
  webhookQueue = read
}

// ---- Database -----------------------------------------------------------------------------------

let queriesInFlight = 0
let poolSize = 0
/** How to count pending approvals when scraped (set with the process's database). */
let pendingApprovals: (() => Promise<number>) | undefined

new Gauge({
  name: "parley_db_pool_in_use",
  help: "Statements in flight on this process's database pool (parley_db_pool_size of them run at once)",
  registers,
  collect() {
    this.set(queriesInFlight)
  },
})

new Gauge({
  name: "parley_db_pool_size",
  help: "Connections this process's database pool may open (DB_POOL_MAX; 1 on the embedded database)",
  registers,
  collect() {
    this.set(poolSize)
  },
})

const dbQueryDuration = new FastHistogram(
  "parley_db_query_duration_seconds",
  "Time from a statement being handed to the pool until its result (or error) came back",
  [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 30],
).child()

interface QueryLike {
  executed: boolean
  resolve: (x: unknown) => unknown
  reject: (x: unknown) => unknown
  handle(): unknown
}
const TIMED = Symbol("parley.timed")
let instrumented = false

/**
 * Instruments the process's database (Db.ts calls it once its pool exists): the pool's size, the
 * pending approvals counted when scraped, and every statement of every postgres.js client in this
 * process timed. postgres.js has no query hooks, so its Query class's handle() (called once, when
 * a query is first awaited) is wrapped to note the start and to wrap the query's settle.
 */
export function instrumentDatabase(sql: postgres.Sql<{ bigint: number }>, max: number): void {
  poolSize = max
  pendingApprovals = () => countPendingApprovals(sql)
  if (instrumented) return
  instrumented = true
  // A tagged query is created lazily: nothing runs until it is awaited, so this one never does.
  const proto = Object.getPrototypeOf(sql`select 1`) as QueryLike
  const handle = proto.handle
  proto.handle = function (this: QueryLike & { [TIMED]?: true }) {
    if (!this.executed && this[TIMED] === undefined) {
      this[TIMED] = true
      const t0 = performance.now()
      queriesInFlight++
      let open = true
      const done = () => {
        if (!open) return
        open = false
        queriesInFlight--
        dbQueryDuration.observe((performance.now() - t0) / 1000)
      }
      const { resolve, reject } = this
      this.resolve = (x) => {
        done()
        return resolve(x)
      }
      this.reject = (x) => {
        done()
        return reject(x)
      }
    }
    return handle.call(this)
  }
}

// ---- Exposition ---------------------------------------------------------------------------------

/**
 * The exposition text. Database-derived gauges are refreshed first; a database that does not
 * answer within a second leaves them at their last value rather than failing the scrape.
 */
export async function renderMetrics(): Promise<string> {
  if (pendingApprovals !== undefined) {
    const n = await Promise.race([
      pendingApprovals().catch(() => undefined),
      new Promise<undefined>((r) => setTimeout(() => r(undefined), 1000).unref()),
    ])
    if (n !== undefined) approvalsPendingGauge.set(n)
  }
  if (webhookQueue !== undefined) {
    const q = await Promise.race([
      webhookQueue().catch(() => undefined),
      new Promise<undefined>((r) => setTimeout(() => r(undefined), 1000).unref()),
    ])
    if (q !== undefined) {
      webhooksQueuedGauge.set(q.queued)
      webhookOldestDueGauge.set(q.oldestDueSeconds)
    }
  }
  return registry.metrics()
}

/** Counts an SSE stream as open until it closes. */
export function trackSse(stream: { onClose(cb: () => void): void }): void {
  sseOpen.inc()
  stream.onClose(() => sseOpen.dec())
}

/** Observes how long an approval waited for its decision. */
export function observeApprovalDecision(createdAt: Date, decidedAt: Date | null): void {
  if (decidedAt !== null) approvalDecisionSeconds.observe(Math.max(0, decidedAt.getTime() - createdAt.getTime()) / 1000)
}
