// bench/auth: requests/s of one handler behind an API key (GET /bench/keyed, scope read) against
// the same handler with no auth (GET /bench/open), on one server process, in alternating rounds.
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import autocannon from "autocannon"
import { cpuMicros, type LoadResult, machine, record, startProcess } from "./lib.js"

// More, shorter rounds than bench/http: the difference measured is smaller than the machine's
// drift, so each keyed round is compared with the open round beside it (orders alternate).
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 6)
const CONNECTIONS = 64
/** Auth may cost at most this share of the open route's throughput. */
const TARGET_OVERHEAD = 0.15

type Name = "open" | "keyed"
type Round = LoadResult & { cpuPerReq: number }

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/** bench/lib's load(), with request headers (the API key). */
async function loadWith(url: string, headers: Record<string, string>, seconds: number): Promise<LoadResult> {
  const r = await autocannon({ url, headers, connections: CONNECTIONS, duration: seconds, pipelining: 1 })
  return {
    requests: r.requests.total,
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.errors + r.timeouts,
    non2xx: r.non2xx,
  }
}

async function call(
  base: string,
  method: string,
  path: string,
  opts: { body?: unknown; bearer?: string } = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const headers: Record<string, string> = {}
  if (opts.body !== undefined) headers["content-type"] = "application/json"
  if (opts.bearer !== undefined) headers["authorization"] = `Bearer ${opts.bearer}`
  const res = await fetch(base + path, {
    method,
    headers,
    ...(opts.body !== undefined && { body: JSON.stringify(opts.body) }),
  })
  const text = await res.text()
  return { status: res.status, body: text === "" ? {} : (JSON.parse(text) as Record<string, unknown>) }
}

function expectStatus(what: string, got: { status: number; body: unknown }, want: number): void {
  if (got.status !== want) throw new Error(`${what}: expected ${want}, got ${got.status} ${JSON.stringify(got.body)}`)
}

/** Signs up, signs in and creates a read-scoped API key over HTTP; returns its secret. */
async function readKey(base: string): Promise<string> {
  const email = `bench-${randomBytes(4).toString("hex")}@example.com`
  const password = "bench-password-1"
  expectStatus(
    "signup",
    await call(base, "POST", "/auth/signup", { body: { email, password, full_name: "Bench" } }),
    201,
  )
  const login = await call(base, "POST", "/auth/login", { body: { email, password } })
  expectStatus("login", login, 200)
  const key = await call(base, "POST", "/api-keys", {
    bearer: String(login.body["token"]),
    body: { name: "bench", scope: "read" },
  })
  expectStatus("create API key", key, 201)
  return String(key.body["secret"])
}

export async function benchAuth(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-bench-"))
  const server = await startProcess(["--import", "tsx", "bench/servers/auth-probe.ts"], {
    HOST: "127.0.0.1",
    PORT: "0",
    DATA_DIR: dataDir,
    LOG_LEVEL: "info",
  })
  const base = `http://127.0.0.1:${server.port}`
  const results: Record<Name, Round[]> = { open: [], keyed: [] }
  try {
    const secret = await readKey(base)
    const targets: Record<Name, { url: string; headers: Record<string, string> }> = {
      open: { url: `${base}/bench/open`, headers: {} },
      keyed: { url: `${base}/bench/keyed`, headers: { authorization: `Bearer ${secret}` } },
    }
    // The keyed route really checks the key: without it, 401; with it, 200.
    expectStatus("keyed route without a key", await call(base, "GET", "/bench/keyed"), 401)
    expectStatus("keyed route with the key", await call(base, "GET", "/bench/keyed", { bearer: secret }), 200)

    for (const t of Object.values(targets)) await loadWith(t.url, t.headers, 2) // warm-up
    for (let round = 0; round < ROUNDS; round++) {
      for (const name of (round % 2 === 0 ? ["open", "keyed"] : ["keyed", "open"]) as Name[]) {
        const pid = server.child.pid!
        const cpu0 = cpuMicros(pid)
        const r = await loadWith(targets[name].url, targets[name].headers, SECONDS)
        const cpuPerReq = (cpuMicros(pid) - cpu0) / r.requests
        if (r.errors > 0 || r.non2xx > 0) throw new Error(`${name}: ${r.errors} errors, ${r.non2xx} non-2xx`)
        results[name].push({ ...r, cpuPerReq })
        process.stdout.write(
          `round ${round + 1} ${name}: ${Math.round(r.rps)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms, ` +
            `${cpuPerReq.toFixed(1)} µs CPU/req\n`,
        )
      }
    }
  } finally {
    await server.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }

  const summary = (rs: Round[]) => ({
    rps: median(rs.map((r) => r.rps)),
    p50: median(rs.map((r) => r.p50)),
    p99: median(rs.map((r) => r.p99)),
    cpu: median(rs.map((r) => r.cpuPerReq)),
  })
  const o = summary(results.open)
  const k = summary(results.keyed)
  // Each round's pair ran back to back on the same machine: the median of the paired ratios is
  // the headline; the ratio of the medians is shown beside it.
  const overhead = median(results.keyed.map((r, i) => 1 - r.rps / results.open[i]!.rps))
  const cpuOverhead = median(results.keyed.map((r, i) => r.cpuPerReq / results.open[i]!.cpuPerReq - 1))
  const verdict = overhead <= TARGET_OVERHEAD ? "within" : "over"
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`
  const md =
    `## auth — one handler behind an API key vs no auth\n\n` +
    `Machine: ${machine()}. Run ${new Date().toISOString().slice(0, 10)}; ${ROUNDS} alternating rounds of ` +
    `${SECONDS} s, ${CONNECTIONS} keep-alive connections (autocannon in the bench process; the server, ` +
    `\`bench/servers/auth-probe.ts\`, in its own process on the embedded defaults, LOG_LEVEL=info with its ` +
    `buffered request line). Both routes share one handler returning a small JSON body; the key is a ` +
    `read-scoped API key created over HTTP. Medians.\n\n` +
    `| route | req/s | p50 ms | p99 ms | server CPU µs/request |\n` +
    `|---|---:|---:|---:|---:|\n` +
    `| GET /bench/open (public) | ${Math.round(o.rps)} | ${o.p50} | ${o.p99} | ${o.cpu.toFixed(1)} |\n` +
    `| GET /bench/keyed (\`Authorization: Bearer svc_live_…\`, scope read) | ${Math.round(k.rps)} | ${k.p50} | ` +
    `${k.p99} | ${k.cpu.toFixed(1)} |\n\n` +
    `**API-key auth costs ${pct(overhead)} of the throughput** (median over rounds of 1 − keyed/open; ratio of ` +
    `the medians above: ${pct(1 - k.rps / o.rps)}), ${verdict} the ${pct(TARGET_OVERHEAD)} target; ` +
    `**${(k.cpu - o.cpu).toFixed(1)} µs more server CPU per request** (+${pct(cpuOverhead)}, paired median).`
  process.stdout.write(`\n${md}\n`)
  record("auth", md)
}
