// GET /metrics: Prometheus text behind METRICS_TOKEN on the public port, on METRICS_PORT beside
// it, 404 where no token is configured; scraped and parsed, the values move with the traffic and
// no label carries an id.
import { type AddressInfo, createServer } from "node:net"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { stream } from "../../api/reply.js"
import { route } from "../../api/route.js"
import { api } from "../support/clients.js"
import { startTestServer, stopSharedServers, type TestServer } from "../support/harness.js"

// No shared server runs beside this suite: it reads the process's metrics, which would count theirs too.
beforeAll(stopSharedServers)

const TOKEN = "metrics-token-0123456789"

interface Sample {
  readonly name: string
  readonly labels: Record<string, string>
  readonly value: number
}

/** Parses the exposition text, failing on any line that is neither a comment nor a sample. */
function parse(text: string): Sample[] {
  const out: Sample[] = []
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("# HELP ") || line.startsWith("# TYPE ")) continue
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (m === null) throw new Error(`not a sample line: ${line}`)
    const labels: Record<string, string> = {}
    for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!
    const value = m[3] === "+Inf" ? Infinity : m[3] === "-Inf" ? -Infinity : Number(m[3])
    // Prometheus reads NaN in any case (prom-client writes "Nan").
    if (Number.isNaN(value) && m[3]!.toLowerCase() !== "nan") throw new Error(`bad value: ${line}`)
    out.push({ name: m[1]!, labels, value })
  }
  return out
}

/** The sum of the samples named `name` whose labels include `labels`. */
function total(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((n, s) => n + s.value, 0)
}

async function freePort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r))
  const port = (s.address() as AddressInfo).port
  await new Promise((r) => s.close(r))
  return port
}

/** An event stream that stays open until its client leaves. */
const sseProbe = route({
  method: "GET",
  path: "/test/sse",
  auth: "public",
  summary: "probe",
  tags: ["test"],
  handler: () =>
    Effect.succeed(
      stream("text/event-stream", async (w) => {
        await w.write("data: hello\n\n")
        await new Promise<void>((r) => w.onClose(r))
      }),
    ),
})

let srv: TestServer
let metricsPort: number
beforeAll(async () => {
  metricsPort = await freePort()
  srv = await startTestServer({
    env: { METRICS_TOKEN: TOKEN, METRICS_PORT: String(metricsPort) },
    extraRoutes: [sseProbe],
  })
})
afterAll(async () => srv?.stop())

async function scrape(): Promise<Sample[]> {
  const res = await fetch(`${srv.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
  expect(res.status).toBe(200)
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/)
  return parse(await res.text())
}

describe("GET /metrics on the public port", () => {
  it("answers only the bearer METRICS_TOKEN, with the contract's error shape otherwise", async () => {
    const attempts: Array<Record<string, string>> = [
      {},
      { authorization: "Bearer wrong-token-wrong-token" },
      { authorization: TOKEN },
    ]
    for (const headers of attempts) {
      const res = await fetch(`${srv.url}/metrics`, { headers })
      expect(res.status).toBe(401)
      expect(await res.json()).toMatchObject({ code: "UNAUTHENTICATED", error: expect.any(String) })
    }
    // A workspace's own credentials are not the metrics token.
    const session = await api(srv).signup({ verify: false })
    const res = await fetch(`${srv.url}/metrics`, { headers: { authorization: `Bearer ${session.token}` } })
    expect(res.status).toBe(401)
  })

  it("is Prometheus text that parses, with every metric family of the issue", async () => {
    const samples = await scrape()
    const names = new Set(samples.map((s) => s.name))
    for (const name of [
      "parley_http_requests_total",
      "parley_http_request_duration_seconds_bucket",
      "parley_sse_streams_open",
      "parley_sse_clients_dropped_total",
      "parley_bus_messages_total",
      "parley_bus_reconnects_total",
      "parley_runtime_runs_owned",
      "parley_runtime_live_calls",
      "parley_runtime_calls_started_total",
      "parley_approvals_pending",
      "parley_approval_decision_seconds_count",
      "parley_db_pool_in_use",
      "parley_db_pool_size",
      "parley_db_query_duration_seconds_count",
      "parley_event_loop_delay_seconds",
      "process_resident_memory_bytes",
    ])
      expect(names, name).toContain(name)
    expect(total(samples, "parley_db_pool_size")).toBeGreaterThanOrEqual(1)
    expect(total(samples, "parley_approvals_pending")).toBe(0)
  })

  it("moves with the traffic: requests by route template, method and status; database statements", async () => {
    const before = await scrape()
    const client = api(srv)
    const session = await client.signup({ verify: false })
    for (let i = 0; i < 5; i++) expect((await fetch(`${srv.url}/healthz`)).status).toBe(200)
    for (const id of [123456, 654321])
      expect((await client.call("GET", `/api/workflows/${id}`, { token: session.token })).status).toBe(404)
    expect((await fetch(`${srv.url}/no/such/path/98765`)).status).toBe(404)
    expect((await fetch(`${srv.url}/v1/healthz`)).status).toBe(200)
    const after = await scrape()

    const delta = (name: string, labels: Record<string, string>) =>
      total(after, name, labels) - total(before, name, labels)
    expect(delta("parley_http_requests_total", { route: "/healthz", method: "GET", status: "200" })).toBe(6)
    expect(delta("parley_http_request_duration_seconds_count", { route: "/healthz", method: "GET" })).toBe(6)
    expect(delta("parley_http_requests_total", { route: "/api/workflows/{id}", method: "GET", status: "404" })).toBe(2)
    expect(delta("parley_http_requests_total", { route: "unmatched", method: "GET", status: "404" })).toBe(1)
    expect(delta("parley_http_requests_total", { route: "/auth/signup", method: "POST", status: "201" })).toBe(1)
    expect(delta("parley_db_query_duration_seconds_count", {})).toBeGreaterThan(5)
    // Signup credits the trial: one ledger post.
    expect(delta("parley_ledger_posts_total", { outcome: "posted" })).toBeGreaterThanOrEqual(1)

    // Bounded labels: templates only, never an id or a raw path.
    for (const s of after.filter((x) => x.name.startsWith("parley_http_"))) {
      expect(s.labels["route"] ?? "").not.toMatch(/\/\d+(\/|$)/)
      expect(s.labels["route"] ?? "").not.toMatch(/^\/v1\//)
    }
  })

  it("keeps histograms cumulative, +Inf equal to the count", async () => {
    const samples = await scrape()
    const buckets = samples.filter(
      (s) => s.name === "parley_http_request_duration_seconds_bucket" && s.labels["route"] === "/healthz",
    )
    expect(buckets.length).toBeGreaterThan(2)
    for (let i = 1; i < buckets.length; i++) expect(buckets[i]!.value).toBeGreaterThanOrEqual(buckets[i - 1]!.value)
    const count = total(samples, "parley_http_request_duration_seconds_count", { route: "/healthz" })
    expect(buckets.at(-1)).toMatchObject({ labels: { le: "+Inf" }, value: count })
  })

  it("counts open event streams while they are open", async () => {
    const open = () => scrape().then((s) => total(s, "parley_sse_streams_open"))
    const before = await open()
    const ctl = new AbortController()
    const res = await fetch(`${srv.url}/test/sse`, { signal: ctl.signal })
    const reader = res.body!.getReader()
    await reader.read()
    expect(await open()).toBe(before + 1)
    ctl.abort()
    await reader.cancel().catch(() => {})
    for (let i = 0; i < 50 && (await open()) !== before; i++) await new Promise((r) => setTimeout(r, 50))
    expect(await open()).toBe(before)
  })

  it("counts the metrics of the request that asks: a scrape is itself a request", async () => {
    const a = await scrape()
    const b = await scrape()
    const n = (s: Sample[]) => total(s, "parley_http_requests_total", { route: "/metrics", status: "200" })
    expect(n(b) - n(a)).toBe(1)
  })
})

describe("METRICS_PORT", () => {
  it("serves the same text on its own port, asking for the token when one is set", async () => {
    expect((await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).status).toBe(401)
    const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    })
    expect(res.status).toBe(200)
    const samples = parse(await res.text())
    expect(total(samples, "parley_db_pool_size")).toBeGreaterThanOrEqual(1)
    expect((await fetch(`http://127.0.0.1:${metricsPort}/`, { method: "POST" })).status).toBe(405)
  })
})

describe("without METRICS_TOKEN", () => {
  it("is not served on the public port (404 in the contract's shape), and METRICS_PORT is open", async () => {
    const port = await freePort()
    const other = await startTestServer({ env: { METRICS_PORT: String(port) } })
    try {
      const res = await fetch(`${other.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
      expect(res.status).toBe(404)
      expect(await res.json()).toMatchObject({ code: "NOT_FOUND" })
      const open = await fetch(`http://127.0.0.1:${port}/metrics`)
      expect(open.status).toBe(200)
      expect(parse(await open.text()).length).toBeGreaterThan(10)
    } finally {
      await other.stop()
    }
  })
})
