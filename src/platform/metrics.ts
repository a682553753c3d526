// The process's Prometheus registry and the means to fill it (prom-client, one registry per
// process): the hot-path counter and histogram, gauges read from their sources when scraped, the
// process's own gauges, and the exposition. Each concern names its metrics beside its code (HTTP
// and streams: http.metrics.ts; the bus: bus/bus.metrics.ts; the database: db.metrics.ts; the
// domains and the runtime: their *.metrics.ts), all on this registry. Hot paths only bump counters
// and observe histograms through cached children; gauges that describe state are read when
// scraped. No label carries an id: routes are templates, reasons and outcomes are code constants.

import { monitorEventLoopDelay } from "node:perf_hooks"
import { Counter, Gauge, Registry } from "prom-client"

export const registry = new Registry()
/** The exposition format's content type (Prometheus text 0.0.4). */
export const METRICS_CONTENT_TYPE = registry.contentType

/** Pass as `registers` to a prom-client metric: the process's registry. */
export const registers = [registry]

// ---- Process ------------------------------------------------------------------------------------
// Read when scraped. (prom-client's collectDefaultMetrics also observes every GC, which cost a few
// microseconds of CPU per request under load: left out.)

const LOOP_SAMPLE_MS = 20
const loopDelay = monitorEventLoopDelay({ resolution: LOOP_SAMPLE_MS })
loopDelay.enable()

new Gauge({
  name: "parley_event_loop_delay_seconds",
  help: "Event-loop delay since the previous scrape (sampled every 20 ms): p50, p90, p99, max and mean",
  labelNames: ["stat"] as const,
  registers,
  collect() {
    // Node's histogram records each sampling interval whole: the delay is what it took beyond 20 ms.
    const s = (ns: number) => (Number.isFinite(ns) ? Math.max(0, ns / 1e6 - LOOP_SAMPLE_MS) / 1e3 : 0)
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
export class FastCounter {
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
export class FastHistogram {
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

// ---- Gauges read when scraped ------------------------------------------------------------------

/** How long a scrape waits for a source; one that does not answer keeps its last value. */
const SOURCE_WAIT_MS = 1000
const scrapedGauges = new Set<ScrapedGauge>()

/**
 * A gauge whose value is read from its sources when scraped: a deployment's process has one
 * (its database, its runtime host), a test process one per server, each tracked while it runs.
 * The sources' values are summed, or the largest is shown; a source that fails or takes over a
 * second keeps its last value rather than failing the scrape.
 */
export class ScrapedGauge {
  private readonly sources = new Map<() => number | Promise<number>, number>()
  private readonly gauge: Gauge
  constructor(
    name: string,
    help: string,
    private readonly combine: "sum" | "max" = "sum",
  ) {
    this.gauge = new Gauge({ name, help, registers })
    scrapedGauges.add(this)
  }
  /** Reads `source` at every scrape until the returned function is called. */
  track(source: () => number | Promise<number>): () => void {
    this.sources.set(source, 0)
    return () => {
      this.sources.delete(source)
    }
  }
  async refresh(): Promise<void> {
    await Promise.all(
      [...this.sources.keys()].map(async (source) => {
        const value = await Promise.race([
          Promise.resolve()
            .then(source)
            .catch(() => undefined),
          new Promise<undefined>((r) => setTimeout(() => r(undefined), SOURCE_WAIT_MS).unref()),
        ])
        if (value !== undefined && this.sources.has(source)) this.sources.set(source, value)
      }),
    )
    const values = [...this.sources.values()]
    this.gauge.set(this.combine === "sum" ? values.reduce((a, b) => a + b, 0) : Math.max(0, ...values))
  }
}

// ---- Failures nobody waits on ---------------------------------------------------------------------
// Each is logged too, with its context; the counters say how often, for alerts.

export const backgroundFailures = new Counter({
  name: "parley_background_failures_total",
  help:
    "Background steps that failed with no caller to tell, by reason (approval_expiry: an expired approval not " +
    "recorded or announced; run_release: a run's lease not given back, so it waits for the lease to lapse)",
  labelNames: ["reason"] as const,
  registers,
})

// ---- Exposition ---------------------------------------------------------------------------------

/** The exposition text, the scraped gauges read first. */
export async function renderMetrics(): Promise<string> {
  await Promise.all([...scrapedGauges].map((g) => g.refresh()))
  return registry.metrics()
}
