// bench/sse: GET /api/runs/{run_id}/turns/stream on one api process (real NATS and Postgres) at
// 1,000 clients × 1,000 turns/s and 5,000 × 100/s, against a bare uWS fan-out of the same turns from
// the same publisher: delivered events/s, end-to-end latency, CPU and RSS; then a tenth of the
// clients stop reading, and each server's RSS is followed while the other nine tenths are checked.
import { type ChildProcess, fork } from "node:child_process"
import { randomBytes } from "node:crypto"
import { readFileSync } from "node:fs"
import { loadavg } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { redact } from "../src/platform/Db.js"
import { PROJECT_ROOT } from "../src/platform/paths.js"
import { cpuMicros, machine, record, type ServerProcess, scratchDatabase, startProcess } from "./lib.js"

const ROUNDS = Number(process.env.BENCH_SSE_ROUNDS ?? 2)
const WARMUP_S = Number(process.env.BENCH_SSE_WARMUP_S ?? 2)
const WINDOW_S = Number(process.env.BENCH_SSE_SECONDS ?? 10)
/**
 * Longer than the others: a stalled socket first fills loopback's buffers (the server's send buffer
 * grows to tcp_wmem's 4 MB), ~15 s at 1,000 turns/s, before anything waits in the server at all.
 */
const STALL_S = Number(process.env.BENCH_SSE_STALL_SECONDS ?? 28)
/** Client processes; the sockets are split evenly between them. */
const CLIENT_PROCS = Number(process.env.BENCH_SSE_CLIENT_PROCS ?? 2)
/** Publishing stops when the server's RSS passes this: it is no longer keeping up, and never will. */
const RSS_LIMIT = 1.5 * 2 ** 30
/** How long the tail of a window may take to arrive. */
const TAIL_MS = 5000
const TARGET_P99_RATIO = 1.5
const parseLoad = (s: string) => {
  const [clients, rate] = s.split("x").map(Number)
  return { clients: clients!, rate: rate! }
}
const SCENARIOS = (process.env.BENCH_SSE_SCENARIOS ?? "1000x1000,5000x100").split(",").map(parseLoad)
/**
 * clients × turns/s, of which a tenth stop reading: the headline load, and one the hub sustains
 * (so what is seen there is the stalled clients, not the hub falling behind).
 */
const STALLS = (process.env.BENCH_SSE_STALL ?? "1000x1000,100x1000").split(",").map((s) => {
  const l = parseLoad(s)
  return { ...l, stalled: Math.round(l.clients / 10) }
})
const TARGET_ID = 42
/** One spoken sentence after the timestamp, as turns are. */
const SENTENCE =
  "Thanks for taking my call, I'm following up on the membership renewal we mentioned last week. Do you have a minute?"

const nowUs = (): number => Math.round((performance.timeOrigin + performance.now()) * 1000)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const mib = (b: number) => (Number.isFinite(b) ? `${Math.round(b / 2 ** 20)} MiB` : "—")
const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : "—")
const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : "—")
const int = (x: number) => (Number.isFinite(x) ? Math.round(x).toLocaleString("en-US") : "—")
const median = (xs: number[]) => {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b)
  return v.length === 0 ? NaN : v.length % 2 ? v[(v.length - 1) / 2]! : (v[v.length / 2 - 1]! + v[v.length / 2]!) / 2
}

function rssBytes(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return m ? Number(m[1]) * 1024 : NaN
  } catch {
    return NaN
  }
}

/** Bytes the kernel holds in TCP buffers, machine-wide (/proc/net/sockstat counts pages). */
function tcpKernelBytes(): number {
  try {
    const m = /TCP:.* mem (\d+)/.exec(readFileSync("/proc/net/sockstat", "utf8"))
    return m ? Number(m[1]) * 4096 : NaN
  } catch {
    return NaN
  }
}

/** SIGTERM, then SIGKILL if a server that fell behind does not stop within 3 s. */
async function stopServer(p: ServerProcess): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return
  const exited = new Promise<void>((resolve) => p.child.once("exit", () => resolve()))
  p.child.kill("SIGTERM")
  const t = setTimeout(() => p.child.kill("SIGKILL"), 3000)
  await exited
  clearTimeout(t)
}

// ---- the clients' processes ----

interface Histo {
  fine: Array<[number, number]>
  coarse: Array<[number, number]>
  count: number
  max: number
}

interface ClientReport {
  clients: number
  received: number
  complete: number
  minPerClient: number
  ended: number
  gaps: number
  dups: number
  hist: Histo
  lastArrivalUs: number
}

interface Report {
  clients: number
  expected: number
  received: number
  complete: number
  minPerClient: number
  ended: number
  gaps: number
  dups: number
  p50: number
  p99: number
  p999: number
  max: number
  lastArrivalUs: number
}

/** Percentiles (ms) of the clients' histograms merged (10 µs buckets below 100 ms, then 1 ms). */
function quantiles(hs: Histo[], ps: number[]): number[] {
  const fine = new Float64Array(10_000)
  const coarse = new Float64Array(120_000)
  let count = 0
  for (const h of hs) {
    for (const [i, n] of h.fine) fine[i]! += n
    for (const [i, n] of h.coarse) coarse[i]! += n
    count += h.count
  }
  const max = Math.max(0, ...hs.map((h) => h.max))
  return ps.map((p) => {
    if (count === 0) return NaN
    let rank = Math.ceil(count * p)
    for (let i = 0; i < fine.length; i++) if ((rank -= fine[i]!) <= 0) return ((i + 1) * 10) / 1000
    for (let i = 100; i < coarse.length; i++) if ((rank -= coarse[i]!) <= 0) return i + 1
    return max / 1000
  })
}

interface ClientPool {
  readonly pids: number[]
  /** Sends one command to every process (with that process's share of `n` and `count`). */
  all<T>(cmd: string, extra?: Record<string, unknown>, share?: (i: number) => Record<string, unknown>): Promise<T[]>
  kill(): void
}

async function startClientProcess(): Promise<{
  child: ChildProcess
  ask<T>(cmd: string, extra: Record<string, unknown>): Promise<T>
}> {
  const child = fork(join(PROJECT_ROOT, "bench", "servers", "sse-clients.ts"), [], {
    cwd: PROJECT_ROOT,
    execArgv: ["--import", "tsx", ...(process.env.BENCH_SSE_CLIENT_FLAGS?.split(" ").filter((f) => f !== "") ?? [])],
    env: { PATH: process.env.PATH ?? "" },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  })
  const kill = () => child.kill("SIGKILL")
  process.once("exit", kill)
  child.once("exit", () => process.off("exit", kill))
  await new Promise<void>((resolve, reject) => {
    child.once("message", () => resolve())
    child.once("exit", (code) => reject(new Error(`sse clients exited (${code}) before starting`)))
  })
  let lastId = 0
  return {
    child,
    ask: <T>(cmd: string, extra: Record<string, unknown>) =>
      new Promise<T>((resolve, reject) => {
        const id = ++lastId
        const onMessage = (raw: unknown) => {
          const m = raw as { type: string; id: number; error?: string }
          if (m.type !== "reply" || m.id !== id) return
          child.off("message", onMessage)
          if (m.error !== undefined) reject(new Error(`sse clients, ${cmd}: ${m.error}`))
          else resolve(m as T)
        }
        child.on("message", onMessage)
        child.send({ id, cmd, ...extra })
      }),
  }
}

async function startClientPool(n: number): Promise<ClientPool> {
  const procs = await Promise.all(Array.from({ length: n }, startClientProcess))
  return {
    pids: procs.map((p) => p.child.pid!),
    all: <T>(cmd: string, extra: Record<string, unknown> = {}, share?: (i: number) => Record<string, unknown>) =>
      Promise.all(procs.map((p, i) => p.ask<T>(cmd, { ...extra, ...share?.(i) }))),
    kill: () => {
      for (const p of procs) p.child.kill("SIGKILL")
    },
  }
}

/** Process i's share of n, when n is split evenly over `of` processes. */
const shareOf = (n: number, i: number, of: number) => Math.floor(n / of) + (i < n % of ? 1 : 0)

async function report(pool: ClientPool, expected: number): Promise<Report> {
  const rs = await pool.all<ClientReport>("report")
  const [p50, p99, p999] = quantiles(
    rs.map((r) => r.hist),
    [0.5, 0.99, 0.999],
  )
  const sum = (f: (r: ClientReport) => number) => rs.reduce((a, r) => a + f(r), 0)
  return {
    clients: sum((r) => r.clients),
    expected,
    received: sum((r) => r.received),
    complete: sum((r) => r.complete),
    minPerClient: Math.min(...rs.map((r) => r.minPerClient)),
    ended: sum((r) => r.ended),
    gaps: sum((r) => r.gaps),
    dups: sum((r) => r.dups),
    p50: p50!,
    p99: p99!,
    p999: p999!,
    max: Math.max(...rs.map((r) => r.hist.max)) / 1000,
    lastArrivalUs: Math.max(...rs.map((r) => r.lastArrivalUs)),
  }
}

// ---- the publisher (this process) ----

interface Published {
  /** Publish time of the window's first and last turn (µs since the epoch). */
  readonly windowStartUs: number
  readonly windowEndUs: number
  readonly sent: number
}

/**
 * Publishes seq 1..count at `rate`/s on `subject`, each turn stamped with its publish time, in
 * catch-up bursts every millisecond; `stop` ends it early.
 */
async function publish(
  nc: NatsConnection,
  subject: string,
  runId: number,
  rate: number,
  count: number,
  windowFrom: number,
  stop: () => boolean,
): Promise<Published> {
  const t0 = performance.now()
  let sent = 0
  let windowStartUs = 0
  let windowEndUs = 0
  while (sent < count && !stop()) {
    const due = Math.min(count, Math.floor(((performance.now() - t0) * rate) / 1000) + 1)
    for (; sent < due; sent++) {
      const seq = sent + 1
      const ts = nowUs()
      if (seq === windowFrom) windowStartUs = ts
      windowEndUs = ts
      const turn = {
        seq,
        run_id: runId,
        target_id: TARGET_ID,
        call_id: 7,
        turn_index: seq,
        speaker: seq % 2 ? "callee" : "agent",
        text: `@${ts} ${SENTENCE}`,
        at: new Date(ts / 1000).toISOString(),
      }
      nc.publish(subject, JSON.stringify(turn))
    }
    await sleep(1)
  }
  await nc.flush()
  return { windowStartUs, windowEndUs, sent }
}

// ---- one measured fan-out, on a server process of its own ----

interface Server {
  readonly process: ServerProcess
  /** The path to GET and the subject its turns are published on. */
  readonly path: string
  readonly subject: string
  readonly runId: number
  readonly headers: Record<string, string>
  /** Times (performance.now()) of the "dropping a turn-stream client" warnings it logged. */
  readonly drops: number[]
}

interface FanoutResult {
  readonly name: "parley" | "bare"
  readonly clients: number
  readonly rate: number
  readonly report: Report
  readonly delivered: number
  readonly cpu: number
  readonly clientsCpu: number
  readonly rssIdle: number
  readonly rssConnected: number
  readonly rssMax: number
  /** Server RSS and the kernel's TCP buffers (above their level before the first turn), from the window's start. */
  readonly rssSamples: Array<{ t: number; rss: number; kernel: number }>
  readonly drops: number[]
  readonly stalled?: { stalled: number; ended: number; maxInWindow: number }
  /** When the RSS limit was passed (s into the window) and publishing stopped. */
  readonly stoppedAtS?: number
  readonly windowCount: number
}

async function fanout(
  nc: NatsConnection,
  pool: ClientPool,
  name: "parley" | "bare",
  start: () => Promise<Server>,
  opts: { clients: number; rate: number; seconds: number; stall?: number },
): Promise<FanoutResult> {
  const server = await start()
  const pid = server.process.child.pid!
  try {
    await sleep(500)
    const rssIdle = rssBytes(pid)
    await pool.all(
      "connect",
      { host: "127.0.0.1", port: server.process.port, path: server.path, headers: server.headers, concurrency: 50 },
      (i) => ({ n: shareOf(opts.clients, i, pool.pids.length) }),
    )
    // Clients that stop reading do so from the start: a socket that read at full speed first has a
    // grown receive window, and its first megabytes would wait in the kernel instead of the server.
    if (opts.stall) await pool.all("stall", {}, (i) => ({ count: shareOf(opts.stall!, i, pool.pids.length) }))
    // Every client past its (empty) history and live before the first turn.
    await sleep(1000)
    const rssConnected = rssBytes(pid)
    const warm = Math.round(WARMUP_S * opts.rate)
    const windowCount = Math.round(opts.seconds * opts.rate)
    await pool.all("window", { from: warm + 1, to: warm + windowCount })
    const drops0 = server.drops.length

    const t0 = performance.now()
    const rssSamples: Array<{ t: number; rss: number; kernel: number }> = []
    const kernel0 = tcpKernelBytes()
    let stoppedAtS: number | undefined
    const sampler = setInterval(() => {
      const rss = rssBytes(pid)
      const t = (performance.now() - t0) / 1000 - WARMUP_S
      rssSamples.push({ t, rss, kernel: tcpKernelBytes() - kernel0 })
      if (rss > RSS_LIMIT && stoppedAtS === undefined) stoppedAtS = t
    }, 250)
    const cpu = {
      server: cpuMicros(pid),
      clients: pool.pids.reduce((a, p) => a + cpuMicros(p), 0),
      at: performance.now(),
    }
    const published = await publish(
      nc,
      server.subject,
      server.runId,
      opts.rate,
      warm + windowCount,
      warm + 1,
      () => stoppedAtS !== undefined,
    )
    const elapsedUs = (performance.now() - cpu.at) * 1000
    const serverCpu = (cpuMicros(pid) - cpu.server) / elapsedUs
    const clientsCpu = (pool.pids.reduce((a, p) => a + cpuMicros(p), 0) - cpu.clients) / elapsedUs
    // Let what is in flight arrive: until every reading client has the whole window, or TAIL_MS.
    let r = await report(pool, windowCount)
    for (let waited = 0; r.complete < r.clients && waited < TAIL_MS && stoppedAtS === undefined; waited += 250) {
      await sleep(250)
      r = await report(pool, windowCount)
    }
    clearInterval(sampler)
    const spanUs = Math.max(published.windowEndUs, r.lastArrivalUs) - published.windowStartUs
    const delivered = published.windowStartUs > 0 ? r.received / (spanUs / 1e6) : NaN
    let stalled: FanoutResult["stalled"]
    if (opts.stall) {
      const rs = await pool.all<{ stalled: number; ended: number; maxInWindow: number }>("resume-stalled", {
        waitMs: 2000,
      })
      stalled = {
        stalled: rs.reduce((a, x) => a + x.stalled, 0),
        ended: rs.reduce((a, x) => a + x.ended, 0),
        maxInWindow: Math.max(...rs.map((x) => x.maxInWindow)),
      }
    }
    const drops = server.drops.slice(drops0).map((t) => (t - t0) / 1000 - WARMUP_S)
    const rssMax = Math.max(...rssSamples.map((s) => s.rss))
    process.stdout.write(
      `${name} ${opts.clients}×${opts.rate}/s${opts.stall ? ` (${opts.stall} stalled)` : ""}: delivered ` +
        `${int(delivered)}/s, complete ${r.complete}/${r.clients} (slowest ${r.minPerClient}/${windowCount}, ` +
        `${r.gaps} gaps, ${r.dups} dups, ${r.ended} ended), p50 ${f2(r.p50)} ms, p99 ${f2(r.p99)} ms, max ` +
        `${f1(r.max)} ms; CPU server ${Math.round(serverCpu * 100)}%, clients ` +
        `${Math.round(clientsCpu * 100)}%; RSS ${mib(rssIdle)} → ${mib(rssConnected)} → max ${mib(rssMax)}; ` +
        `${drops.length} drops` +
        (drops.length > 0 ? ` (${f1(drops[0]!)}–${f1(drops.at(-1)!)} s)` : "") +
        (stalled ? `; stalled ended ${stalled.ended}/${stalled.stalled}` : "") +
        (stoppedAtS !== undefined ? `; RSS passed ${mib(RSS_LIMIT)} at ${f1(stoppedAtS)} s, publisher stopped` : "") +
        `\n`,
    )
    return {
      name,
      clients: opts.clients,
      rate: opts.rate,
      report: r,
      delivered,
      cpu: serverCpu,
      clientsCpu,
      rssIdle,
      rssConnected,
      rssMax,
      rssSamples,
      drops,
      windowCount,
      ...(stalled && { stalled }),
      ...(stoppedAtS !== undefined && { stoppedAtS }),
    }
  } finally {
    await pool.all("close")
    await stopServer(server.process)
  }
}

// ---- set-up over HTTP, as a customer would ----

async function call(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  token?: string,
): Promise<Record<string, unknown>> {
  const res = await fetch(base + path, {
    method,
    headers: {
      ...(body !== undefined && { "content-type": "application/json" }),
      ...(token !== undefined && { authorization: `Bearer ${token}` }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  })
  const text = await res.text()
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`)
  return text === "" ? {} : (JSON.parse(text) as Record<string, unknown>)
}

export async function benchSse(): Promise<void> {
  const baseUrl = process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/postgres"
  const natsUrl = process.env.NATS_URL || "nats://127.0.0.1:4222"
  const loadBefore = loadavg()[0]!
  const ns = `benchsse${randomBytes(4).toString("hex")}`
  const scratch = await scratchDatabase(baseUrl, "parley_bench_sse")
  const { url: dbUrl, sql } = scratch
  const pg = { version: scratch.pgVersion }
  process.stdout.write(
    `database ${redact(dbUrl)}, NATS ${natsUrl}, namespace ${ns}, ${CLIENT_PROCS} client processes\n`,
  )

  let pool: ClientPool | undefined
  let nc: NatsConnection | undefined
  const results: FanoutResult[] = []
  try {
    const startParley = async () => {
      const p = await startProcess(
        [
          ...(process.env.BENCH_SSE_SERVER_FLAGS?.split(" ").filter((f) => f !== "") ?? []),
          "--import",
          "tsx",
          "src/main/main.ts",
          "serve",
          "--role",
          "api",
        ],
        {
          HOST: "127.0.0.1",
          PORT: "0",
          DATABASE_URL: dbUrl,
          NATS_URL: natsUrl,
          BUS_NAMESPACE: ns,
          LOG_LEVEL: "info",
          // Thousands of watchers on one key: above the per-key and per-workspace caps of open streams.
          SSE_MAX_STREAMS_PER_KEY: "100000",
          SSE_MAX_STREAMS_PER_WORKSPACE: "100000",
        },
      )
      const drops: number[] = []
      createInterface({ input: p.child.stdout! }).on("line", (l) => {
        if (l.includes("dropping a turn-stream client")) drops.push(performance.now())
      })
      return { p, drops }
    }

    // The tenant, once: sessions outlive restarts (the JWT key is kept in the database).
    const first = await startParley()
    const base = `http://127.0.0.1:${first.p.port}`
    const email = `bench-sse-${randomBytes(4).toString("hex")}@example.com`
    const password = "correct horse battery staple"
    await call(base, "POST", "/auth/signup", { email, password, country: "US", full_name: "Bench SSE" })
    const login = await call(base, "POST", "/auth/login", { email, password })
    const token = login.token as string
    const tenantId = (login.tenant as { id: number }).id
    // One running run per workflow: a workflow for each scenario's run.
    const workflows: number[] = []
    for (let i = 0; i < ROUNDS * SCENARIOS.length + STALLS.length; i++)
      workflows.push(
        (
          await call(
            base,
            "POST",
            "/api/workflows",
            { nl_prompt: "Call members whose membership lapsed and offer a discount of up to $20 to rejoin." },
            token,
          )
        ).id as number,
      )
    await stopServer(first.p)

    pool = await startClientPool(CLIENT_PROCS)
    nc = await connect({ servers: natsUrl, name: "bench-sse-publisher" })

    // Each measurement gets a fresh server process, so one that fell behind does not carry its heap into the next.
    const parley = async (): Promise<Server> => {
      const [run] = await sql<[{ id: number }]>`insert into runs (tenant_id, workflow_id, status)
        values (${tenantId}, ${workflows.pop()!}, 'running') returning id`
      const { p, drops } = await startParley()
      return {
        process: p,
        path: `/api/runs/${run.id}/turns/stream`,
        subject: `${ns}.turns.${tenantId}.${run.id}.${TARGET_ID}`,
        runId: run.id,
        headers: { Authorization: `Bearer ${token}` },
        drops,
      }
    }
    let bareRuns = 0
    const bare = async (): Promise<Server> => {
      const runId = ++bareRuns
      const p = await startProcess(["--import", "tsx", "bench/servers/sse-bare.ts"], {
        PORT: "0",
        NATS_URL: natsUrl,
        BARE_SUBJECT: `${ns}.bare.>`,
        ...(process.env.BARE_FANOUT && { BARE_FANOUT: process.env.BARE_FANOUT }),
      })
      return { process: p, path: "/", subject: `${ns}.bare.${runId}`, runId, headers: {}, drops: [] }
    }

    // BENCH_SSE_ONLY (diagnosis; nothing recorded): e.g. "parley:1000x1000,bare:stall100x1000".
    const only = process.env.BENCH_SSE_ONLY?.split(",").filter((x) => x !== "")
    const wanted = (name: string, what: string) => only === undefined || only.includes(`${name}:${what}`)
    // Rounds alternate the order (bare first, then Parley first) so the shared machine's noise falls on both.
    for (let round = 0; round < ROUNDS; round++)
      for (const s of SCENARIOS)
        for (const [name, start] of round % 2 === 0
          ? ([
              ["bare", bare],
              ["parley", parley],
            ] as const)
          : ([
              ["parley", parley],
              ["bare", bare],
            ] as const))
          if (wanted(name, `${s.clients}x${s.rate}`))
            results.push(await fanout(nc, pool, name, start, { ...s, seconds: WINDOW_S }))
    for (const st of STALLS)
      for (const [name, start] of [
        ["parley", parley],
        ["bare", bare],
      ] as const)
        if (wanted(name, `stall${st.clients}x${st.rate}`))
          results.push(
            await fanout(nc, pool, name, start, {
              clients: st.clients,
              rate: st.rate,
              seconds: STALL_S,
              stall: st.stalled,
            }),
          )
    if (only !== undefined) return
  } finally {
    await nc?.close().catch(() => {})
    pool?.kill()
    await scratch.drop()
  }
  writeReport(results, { loadBefore, pgVersion: pg.version })
}

// ---- the report ----

function writeReport(results: FanoutResult[], env: { loadBefore: number; pgVersion: string }): void {
  const runsOf = (name: string, c: number, r: number) =>
    results.filter((x) => x.name === name && x.clients === c && x.rate === r && x.stalled === undefined)
  const summary = (rs: FanoutResult[]) => ({
    delivered: median(rs.map((x) => x.delivered)),
    p50: median(rs.map((x) => x.report.p50)),
    p99: median(rs.map((x) => x.report.p99)),
    p999: median(rs.map((x) => x.report.p999)),
    max: Math.max(...rs.map((x) => x.report.max)),
    cpu: median(rs.map((x) => x.cpu)),
    clientsCpu: median(rs.map((x) => x.clientsCpu)),
    complete: rs.map((x) => `${x.report.complete}/${x.report.clients}`).join(", "),
    allDelivered: rs.every((x) => x.report.complete === x.report.clients && x.report.gaps === 0 && x.report.dups === 0),
    rss:
      `${mib(median(rs.map((x) => x.rssIdle)))} → ${mib(median(rs.map((x) => x.rssConnected)))} → ` +
      `${mib(Math.max(...rs.map((x) => x.rssMax)))}`,
    stopped: rs.filter((x) => x.stoppedAtS !== undefined),
    p99s: rs.map((x) => f1(x.report.p99)).join(", "),
    slowest: Math.min(...rs.map((x) => x.report.minPerClient)),
  })
  const rows: string[] = []
  const lines: string[] = []
  let allDelivered = true
  let allP99 = true
  for (const s of SCENARIOS) {
    const b = summary(runsOf("bare", s.clients, s.rate))
    const p = summary(runsOf("parley", s.clients, s.rate))
    const row = (x: typeof b, label: string) =>
      `| ${label} | ${s.clients} × ${s.rate}/s | ${int(x.delivered)} | ${x.complete} | ${f2(x.p50)} | ` +
      `${f2(x.p99)} (${x.p99s}) | ${f1(x.p999)} | ${f1(x.max)} | ${Math.round(x.cpu * 100)}% ` +
      `(${Math.round(x.clientsCpu * 100)}%) | ${x.rss}` +
      (x.stopped.length > 0
        ? `; **passed ${mib(RSS_LIMIT)}** ${x.stopped.map((y) => `at ${f1(y.stoppedAtS!)} s`).join(", ")}, ` +
          `publisher stopped`
        : "") +
      ` |`
    rows.push(row(b, "bare uWS"), row(p, "**Parley**"))
    const p99Ratio = p.p99 / b.p99
    const p99Met = Number.isFinite(p99Ratio) && p99Ratio <= TARGET_P99_RATIO
    allDelivered &&= p.allDelivered
    allP99 &&= p99Met
    const ratio = (x: number, y: number) =>
      Number.isFinite(x / y) ? `${f2(x / y)}×` : "— (nothing arrived in the window)"
    lines.push(
      `- ${s.clients} × ${s.rate}/s (offered ${int(s.clients * s.rate)} events/s): **Parley delivered ` +
        `${ratio(p.delivered, b.delivered)} bare's events/s, p50 ${ratio(p.p50, b.p50)}, p99 ` +
        `${ratio(p.p99, b.p99)}** (target ≤ ${TARGET_P99_RATIO}×: ${p99Met ? "met" : "**not met**"}); every ` +
        `event to every client: ` +
        (p.allDelivered
          ? "met"
          : `**not met** (the slowest client had ${p.slowest} of ` +
            `${runsOf("parley", s.clients, s.rate)[0]?.windowCount} within ${TAIL_MS / 1000} s of the window's ` +
            `end)`) +
        `.`,
    )
  }
  const yes = (ok: boolean) => (ok ? "met" : "**not met**")
  const stalledLine = (x: FanoutResult) =>
    `${x.report.complete}/${x.report.clients} reading clients got every event (p50 ${f2(x.report.p50)} ms, ` +
    `p99 ${f2(x.report.p99)} ms, ${int(x.delivered)} events/s)`
  const step = STALL_S > 16 ? 4 : 2
  const times = [-WARMUP_S, ...Array.from({ length: Math.ceil(STALL_S / step) }, (_, i) => i * step)]
  /** The sample at t s (or the last one, for "end"), unless publishing had stopped by then. */
  const sample = (x: FanoutResult, t: number | "end") => {
    const s =
      t === "end"
        ? x.rssSamples.filter((y) => x.stoppedAtS === undefined || y.t <= x.stoppedAtS).at(-1)
        : x.rssSamples.find((y) => y.t >= t)
    return s && (x.stoppedAtS === undefined || s.t <= x.stoppedAtS + 0.5) ? s : undefined
  }
  const cells = (x: FanoutResult, f: (s: { rss: number; kernel: number }) => number) =>
    [...times, "end" as const].map((t) => {
      const s = sample(x, t)
      return s ? mib(f(s)) : x.stoppedAtS !== undefined ? "stopped" : "—"
    })
  const stallSections: string[] = []
  const stallMet: Array<{ load: string; bounded: boolean; delivered: boolean }> = []
  for (const st of STALLS) {
    const ps = results.find(
      (x) => x.name === "parley" && x.stalled !== undefined && x.clients === st.clients && x.rate === st.rate,
    )!
    const bs = results.find(
      (x) => x.name === "bare" && x.stalled !== undefined && x.clients === st.clients && x.rate === st.rate,
    )!
    // Bounded: every stalled client dropped, and the RSS never more than two caps per stalled client
    // (what uWS holds when the cap is checked, and one turn's flush) plus 160 MiB for the collector above its
    // level with everyone connected.
    const bounded =
      ps.stoppedAtS === undefined &&
      ps.drops.length >= st.stalled &&
      ps.rssMax < ps.rssConnected + st.stalled * 2 * 2 ** 20 + 160 * 2 ** 20
    const delivered = ps.report.complete === ps.report.clients && ps.report.gaps === 0 && ps.report.dups === 0
    stallMet.push({ load: `${st.clients} × ${st.rate}/s`, bounded, delivered })
    stallSections.push(
      `**${st.clients} clients × ${st.rate}/s, ${st.stalled} of them stalled** (${STALL_S} s window). Server ` +
        `RSS, and the growth of the kernel's TCP buffers (machine-wide, /proc/net/sockstat) since the first ` +
        `turn, from the window's start (warm-up from −${WARMUP_S} s):\n\n` +
        `| t s | ${times.join(" | ")} | end |\n` +
        `|---|${times.map(() => "---:").join("|")}|---:|\n` +
        `| Parley RSS | ${cells(ps, (s) => s.rss).join(" | ")} |\n` +
        `| Parley run: kernel TCP buffers | ${cells(ps, (s) => s.kernel).join(" | ")} |\n` +
        `| bare uWS RSS | ${cells(bs, (s) => s.rss).join(" | ")} |\n` +
        `| bare run: kernel TCP buffers | ${cells(bs, (s) => s.kernel).join(" | ")} |\n\n` +
        `- Parley: ${stalledLine(ps)}; ${ps.drops.length} "dropping a turn-stream client" ` +
        `warnings${ps.drops.length > 0 ? ` (at ${f1(ps.drops[0]!)}–${f1(ps.drops.at(-1)!)} s)` : ""}; resumed at ` +
        `the end, ${ps.stalled!.ended}/${ps.stalled!.stalled} stalled clients found their response ended.` +
        (ps.stoppedAtS !== undefined
          ? ` **RSS passed ${mib(RSS_LIMIT)} at ${f1(ps.stoppedAtS)} s; publisher stopped.**`
          : "") +
        ` RSS bounded (every stalled client dropped, RSS within 2 MiB per stalled client + 160 MiB of its level ` +
        `with all connected): ${yes(bounded)}; the others complete: ${yes(delivered)}.\n` +
        `- Bare uWS: ${stalledLine(bs)}; ` +
        (bs.stoppedAtS !== undefined
          ? `**RSS passed ${mib(RSS_LIMIT)} at ${f1(bs.stoppedAtS)} s; publisher stopped**`
          : `RSS reached ${mib(bs.rssMax)}`) +
        `; ${bs.stalled!.ended}/${bs.stalled!.stalled} stalled clients had been ended by the server.`,
    )
  }
  const eventBytes = Buffer.byteLength(
    `id: 10000\ndata: ` +
      JSON.stringify({
        seq: 10000,
        run_id: 1,
        target_id: TARGET_ID,
        call_id: 7,
        turn_index: 10000,
        speaker: "agent",
        text: `@${nowUs()} ${SENTENCE}`,
        at: new Date().toISOString(),
      }) +
      `\n\n`,
  )

  const md =
    `## sse — turn streams on one api process vs a bare uWebSockets.js fan-out\n\n` +
    `Machine: ${machine()}; PostgreSQL ${env.pgVersion} and NATS on the same machine (scratch database, unique ` +
    `BUS_NAMESPACE). Run ${new Date().toISOString().slice(0, 10)}; 1-minute load average ` +
    `${env.loadBefore.toFixed(1)} before and ${loadavg()[0]!.toFixed(1)} after (the machine is shared with ` +
    `other work).\n` +
    `Parley: \`src/main/main.ts serve --role api\` (LOG_LEVEL=info), the stream \`GET ` +
    `/api/runs/{run_id}/turns/stream\` with a session JWT on a run with no stored history. Baseline: ` +
    `\`bench/servers/sse-bare.ts\`, uWS subscribed to NATS itself, each event-loop turn's events framed once ` +
    `into one buffer written to every client in its own cork` +
    (process.env.BARE_FANOUT === "event"
      ? " (BARE_FANOUT=event: each event written to every client as it arrives)"
      : "") +
    `; no auth, no per-client state, no backpressure handling. Each measurement starts a fresh server process. ` +
    `One publisher (this process, @nats-io/transport-node) sends the same turns to either, \`{seq, run_id, ` +
    `target_id, call_id, turn_index, speaker, text, at}\` with text \`@<publish µs> \` + a ` +
    `${SENTENCE.length}-character sentence (${eventBytes} bytes per SSE event), in catch-up bursts every ` +
    `millisecond. Clients: \`bench/servers/sse-clients.ts\` in ${CLIENT_PROCS} processes, raw TCP sockets ` +
    `reading each event's \`id:\` and timestamp (no JSON parse); latency = receipt − publish, both from ` +
    `\`performance.timeOrigin + now()\`. Each measurement: ${WARMUP_S} s warm-up, a ${WINDOW_S} s window whose ` +
    `turns are counted and timed, up to ${TAIL_MS / 1000} s more for its tail; publishing stops if the ` +
    `server's RSS passes ${mib(RSS_LIMIT)}. ${ROUNDS} rounds in alternating order, medians (each round's p99 ` +
    `in brackets). Publisher, NATS, server and clients share the 2 cores.\n\n` +
    `| server | clients × turns/s | delivered events/s | clients with every event | p50 ms | p99 ms | p99.9 ms ` +
    `| max ms | CPU server (clients) | server RSS idle → connected → max |\n` +
    `|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n` +
    `${rows.join("\n")}\n\n` +
    `${lines.join("\n")}\n\n` +
    `**A tenth stops reading**: those clients pause their sockets right after the response head, before the ` +
    `first turn; SSE_MAX_BUFFER_BYTES at its 1 MiB default. The first ~4 MB of each stalled stream wait in ` +
    `loopback's socket buffers (135 KB received, the rest unsent as the server's send buffer grows to ` +
    `tcp_wmem's 4 MB), ~15 s at 1,000 turns/s, before anything waits in the server process, so the windows ` +
    `here are ${STALL_S} s.\n\n` +
    `${stallSections.join("\n\n")}\n\n` +
    `Targets: every event to every client that keeps up ${yes(allDelivered)}; p99 within ${TARGET_P99_RATIO}× ` +
    `of bare ${yes(allP99)}; with a tenth stalled, ` +
    stallMet
      .map((m) => `at ${m.load} RSS bounded ${yes(m.bounded)} and the rest complete ${yes(m.delivered)}`)
      .join("; ") +
    `.`
  process.stdout.write(`\n${md}\n`)
  record("sse", md)
}
