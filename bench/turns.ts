// bench/turns: turn ingestion at line rate (issue 21 item 1). POST /internal/turns into one run, one
// turn per request and 100 per request, on real PostgreSQL + NATS and on the embedded defaults,
// against a bare uWS handler that parses the same bodies and answers from a counter in memory; then
// watchers' end-to-end latency (POST → stored → bus → hub → SSE client) at 1,000 watchers × 1,000
// turns/s and 5,000 × 100/s against the bare uWS fan-out of bench/sse fed straight from NATS.
import { type ChildProcess, fork } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import autocannon from "autocannon"
import { connectPostgres, type Sql, startEmbeddedPostgres } from "../src/platform/Db.js"
import { PROJECT_ROOT } from "../src/platform/paths.js"
import { machine, record, type ServerProcess, scratchDatabase, startProcess } from "./lib.js"

const INGEST_S = Number(process.env.BENCH_TURNS_INGEST_SECONDS ?? 4)
const FANOUT_S = Number(process.env.BENCH_TURNS_FANOUT_SECONDS ?? 3)
const WARMUP_S = 1
const BATCH = 100
const SCENARIOS = (process.env.BENCH_TURNS_SCENARIOS ?? "1000x1000,5000x100").split(",").map((s) => {
  const [clients, rate] = s.split("x").map(Number)
  return { clients: clients!, rate: rate! }
})
const CLIENT_PROCS = 2
const SYSTEM_KEY = `bench-turns-${randomBytes(8).toString("hex")}`
const TARGET_ID = 42
const SENTENCE =
  "Thanks for taking my call, I'm following up on the membership renewal we mentioned last week. Do you have a minute?"

const nowUs = (): number => Math.round((performance.timeOrigin + performance.now()) * 1000)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const int = (x: number) => (Number.isFinite(x) ? Math.round(x).toLocaleString("en-US") : "—")
const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : "—")

async function call(base: string, method: string, path: string, body?: unknown, token?: string) {
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

// ---- ingestion ----

interface Ingest {
  readonly turnsPerS: number
  readonly p99: number
  readonly errors: number
}

async function ingest(url: string, tenantId: number, runId: number, batch: number): Promise<Ingest> {
  const one = { run_id: runId, target_id: TARGET_ID, seq: 0, speaker: "agent", text: SENTENCE }
  const body = JSON.stringify(batch === 1 ? one : Array.from({ length: batch }, (_, i) => ({ ...one, seq: i })))
  const r = await autocannon({
    url: `${url}/internal/turns`,
    method: "POST",
    headers: { "content-type": "application/json", "x-system-key": SYSTEM_KEY, "x-tenant-id": String(tenantId) },
    body,
    connections: batch === 1 ? 32 : 8,
    duration: INGEST_S,
    pipelining: 1,
  })
  const ok = r["2xx"]
  return { turnsPerS: (ok * batch) / INGEST_S, p99: r.latency.p99, errors: r.errors + r.timeouts + r.non2xx }
}

// ---- watchers (the SSE clients of bench/sse, in processes of their own) ----

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
  gaps: number
  dups: number
  hist: Histo
}

function quantiles(hs: Histo[], ps: number[]): number[] {
  const fine = new Float64Array(10_000)
  const coarse = new Float64Array(120_000)
  let count = 0
  for (const h of hs) {
    for (const [i, n] of h.fine) fine[i]! += n
    for (const [i, n] of h.coarse) coarse[i]! += n
    count += h.count
  }
  return ps.map((p) => {
    if (count === 0) return NaN
    let rank = Math.ceil(count * p)
    for (let i = 0; i < fine.length; i++) if ((rank -= fine[i]!) <= 0) return ((i + 1) * 10) / 1000
    for (let i = 100; i < coarse.length; i++) if ((rank -= coarse[i]!) <= 0) return i + 1
    return Math.max(...hs.map((h) => h.max)) / 1000
  })
}

interface Pool {
  all<T>(cmd: string, extra?: Record<string, unknown>, share?: (i: number) => Record<string, unknown>): Promise<T[]>
  kill(): void
}

async function startPool(n: number): Promise<Pool> {
  const procs = await Promise.all(
    Array.from({ length: n }, async () => {
      const child: ChildProcess = fork(join(PROJECT_ROOT, "bench", "servers", "sse-clients.ts"), [], {
        cwd: PROJECT_ROOT,
        execArgv: ["--import", "tsx"],
        env: { PATH: process.env.PATH ?? "" },
        stdio: ["ignore", "inherit", "inherit", "ipc"],
      })
      process.once("exit", () => child.kill("SIGKILL"))
      await new Promise<void>((resolve, reject) => {
        child.once("message", () => resolve())
        child.once("exit", (code) => reject(new Error(`sse clients exited (${code})`)))
      })
      return child
    }),
  )
  let lastId = 0
  const ask = <T>(child: ChildProcess, cmd: string, extra: Record<string, unknown>) =>
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
    })
  return {
    all: <T>(cmd: string, extra: Record<string, unknown> = {}, share?: (i: number) => Record<string, unknown>) =>
      Promise.all(procs.map((p, i) => ask<T>(p, cmd, { ...extra, ...share?.(i) }))),
    kill: () => {
      for (const p of procs) p.kill("SIGKILL")
    },
  }
}

const shareOf = (n: number, i: number, of: number) => Math.floor(n / of) + (i < n % of ? 1 : 0)

interface Fanout {
  readonly p50: number
  readonly p99: number
  readonly complete: number
  readonly clients: number
  readonly gaps: number
  readonly dups: number
  readonly received: number
  readonly expected: number
}

/**
 * Connects the watchers, sends `rate` turns/s for WARMUP_S + FANOUT_S seconds (through `send`, each
 * turn's text stamped with its send time), and reports the window's end-to-end latency.
 */
async function fanout(
  pool: Pool,
  target: { port: number; path: string; headers: Record<string, string> },
  clients: number,
  rate: number,
  send: (seq: number, text: string) => void,
  settle: () => Promise<void>,
): Promise<Fanout> {
  await pool.all(
    "connect",
    { host: "127.0.0.1", port: target.port, path: target.path, headers: target.headers, concurrency: 50 },
    (i) => ({ n: shareOf(clients, i, CLIENT_PROCS) }),
  )
  await sleep(1000)
  const warm = Math.round(WARMUP_S * rate)
  const count = Math.round(FANOUT_S * rate)
  await pool.all("window", { from: warm + 1, to: warm + count })
  const t0 = performance.now()
  let sent = 0
  while (sent < warm + count) {
    const due = Math.min(warm + count, Math.floor(((performance.now() - t0) * rate) / 1000) + 1)
    for (; sent < due; sent++) send(sent + 1, `@${nowUs()} ${SENTENCE}`)
    await sleep(1)
  }
  await settle()
  let rs: ClientReport[] = []
  for (let waited = 0; waited <= 5000; waited += 250) {
    rs = await pool.all<ClientReport>("report")
    if (rs.every((r) => r.complete === r.clients)) break
    await sleep(250)
  }
  await pool.all("close")
  const [p50, p99] = quantiles(
    rs.map((r) => r.hist),
    [0.5, 0.99],
  )
  const sum = (f: (r: ClientReport) => number) => rs.reduce((a, r) => a + f(r), 0)
  return {
    p50: p50!,
    p99: p99!,
    complete: sum((r) => r.complete),
    clients: sum((r) => r.clients),
    gaps: sum((r) => r.gaps),
    dups: sum((r) => r.dups),
    received: sum((r) => r.received),
    expected: count * clients,
  }
}

// ---- the servers ----

interface Parley {
  readonly process: ServerProcess
  readonly url: string
  readonly tenantId: number
  readonly token: string
  /** A new running run of the tenant. */
  newRun(): Promise<number>
  /** A run's stored turns and its highest seq (real PostgreSQL only): a difference is a hole in the seqs. */
  stored(runId: number): Promise<{ turns: number; maxSeq: number } | undefined>
  stop(): Promise<void>
}

async function startParley(mode: "real" | "embedded"): Promise<Parley> {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-bench-turns-"))
  const ns = `benchturns${randomBytes(4).toString("hex")}`
  const scratch =
    mode === "real"
      ? await scratchDatabase(process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/postgres", "parley_bt")
      : undefined
  const env: Record<string, string> = {
    HOST: "127.0.0.1",
    PORT: "0",
    DATA_DIR: dataDir,
    SYSTEM_KEY,
    LOG_LEVEL: "info",
    // Thousands of watchers on one key: above the per-key and per-workspace caps of open streams.
    SSE_MAX_STREAMS_PER_KEY: "100000",
    SSE_MAX_STREAMS_PER_WORKSPACE: "100000",
    ...(scratch && {
      DATABASE_URL: scratch.url,
      NATS_URL: process.env.NATS_URL || "nats://127.0.0.1:4222",
      BUS_NAMESPACE: ns,
    }),
  }
  // The embedded database and bus live in one process: the embedded server is --role all.
  // BENCH_TURNS_PROFILE_DIR: a V8 CPU profile of the Parley process, written there when it stops; it runs
  // the build (npm run build first), whose functions keep their names and lines in the profile.
  const prof = process.env.BENCH_TURNS_PROFILE_DIR
  const args = [
    ...(prof
      ? ["--cpu-prof", "--cpu-prof-dir", prof, "dist/src/main/main.js"]
      : ["--import", "tsx", "src/main/main.ts"]),
    ...["serve", "--role", scratch ? "api" : "all"],
  ]
  let p = await startProcess(args, env)
  let url = `http://127.0.0.1:${p.port}`
  const email = `bench-turns-${randomBytes(4).toString("hex")}@example.com`
  const password = "correct horse battery staple"
  await call(url, "POST", "/auth/signup", { email, password, country: "US", full_name: "Bench Turns" })
  const login = await call(url, "POST", "/auth/login", { email, password })
  const token = login.token as string
  const tenantId = (login.tenant as { id: number }).id
  const workflows: number[] = []
  for (let i = 0; i < 8; i++)
    workflows.push(
      (await call(url, "POST", "/api/workflows", { nl_prompt: "Call members whose membership lapsed." }, token))
        .id as number,
    )
  const insertRuns = async (sql: Sql) =>
    (
      await sql<Array<{ id: number }>>`insert into runs (tenant_id, workflow_id, status)
        select ${tenantId}, w, 'running' from unnest(${workflows}::bigint[]) as w returning id`
    ).map((r) => r.id)
  let runs: number[]
  if (scratch) runs = await insertRuns(scratch.sql)
  else {
    // The embedded database is the server's own: stopped, opened here for the rows, started again.
    await p.stop()
    const pg = await startEmbeddedPostgres(join(dataDir, "pglite"))
    const sql = connectPostgres(pg.url, 1)
    runs = await insertRuns(sql)
    await sql.end({ timeout: 5 })
    await pg.close()
    p = await startProcess(args, env)
    url = `http://127.0.0.1:${p.port}`
  }
  return {
    process: p,
    url,
    tenantId,
    token,
    stored: async (runId) => {
      if (!scratch) return undefined
      const [r] = await scratch.sql<[{ turns: number; max_seq: number }]>`
        select count(*)::int as turns, coalesce(max(seq), 0)::int as max_seq from turns where run_id = ${runId}`
      return { turns: r.turns, maxSeq: r.max_seq }
    },
    newRun: async () => {
      const run = runs.shift()
      if (run === undefined) throw new Error("out of runs")
      return run
    },
    stop: async () => {
      await p.stop()
      await scratch?.drop()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

export async function benchTurns(): Promise<void> {
  const loadBefore = loadavg()[0]!
  const natsUrl = process.env.NATS_URL || "nats://127.0.0.1:4222"
  const lines: string[] = []
  const out = (s: string) => {
    process.stdout.write(`${s}\n`)
  }

  // Ingestion: the bare handler, then Parley on each database.
  const bare = await startProcess(["--import", "tsx", "bench/servers/ingest-bare.ts"], { PORT: "0" })
  const bareUrl = `http://127.0.0.1:${bare.port}`
  const bareOne = await ingest(bareUrl, 1, 1, 1)
  const bareBatch = await ingest(bareUrl, 1, 1, BATCH)
  await bare.stop()
  out(`bare: ${int(bareOne.turnsPerS)} turns/s one per request, ${int(bareBatch.turnsPerS)} in batches of ${BATCH}`)
  const ingestRows: string[] = [
    `| bare uWS (parse, count, answer) | ${int(bareOne.turnsPerS)} | 1.00 | ${int(bareBatch.turnsPerS)} | 1.00 |`,
  ]
  let realServer: Parley | undefined
  for (const mode of ["real", "embedded"] as const) {
    const parley = await startParley(mode)
    const one = await ingest(parley.url, parley.tenantId, await parley.newRun(), 1)
    const batch = await ingest(parley.url, parley.tenantId, await parley.newRun(), BATCH)
    out(
      `parley ${mode}: ${int(one.turnsPerS)} turns/s one per request (p99 ${one.p99} ms, ${one.errors} errors), ` +
        `${int(batch.turnsPerS)} in batches of ${BATCH} (p99 ${batch.p99} ms, ${batch.errors} errors)`,
    )
    ingestRows.push(
      `| Parley, ${mode === "real" ? "PostgreSQL + NATS" : "embedded defaults"} | ${int(one.turnsPerS)} | ` +
        `${f2(one.turnsPerS / bareOne.turnsPerS)} | ${int(batch.turnsPerS)} | ` +
        `${f2(batch.turnsPerS / bareBatch.turnsPerS)} |`,
    )
    if (mode === "real") realServer = parley
    else await parley.stop()
  }

  // Watchers, on real PostgreSQL + NATS: Parley (turns POSTed one per request) against the bare
  // fan-out (turns published on NATS by this process).
  const fanRows: string[] = []
  const pool = await startPool(CLIENT_PROCS)
  const nc: NatsConnection = await connect({ servers: natsUrl, name: "bench-turns" })
  try {
    const parley = realServer!
    const bareNs = `benchturnsbare${randomBytes(4).toString("hex")}`
    for (const s of SCENARIOS) {
      const bareFan = await startProcess(["--import", "tsx", "bench/servers/sse-bare.ts"], {
        PORT: "0",
        NATS_URL: natsUrl,
        BARE_SUBJECT: `${bareNs}.>`,
      })
      const subject = `${bareNs}.${s.clients}`
      const b = await fanout(
        pool,
        { port: bareFan.port, path: "/", headers: {} },
        s.clients,
        s.rate,
        (seq, text) =>
          nc.publish(
            subject,
            JSON.stringify({
              seq,
              run_id: 1,
              target_id: TARGET_ID,
              call_id: null,
              turn_index: seq,
              speaker: "agent",
              text,
              at: new Date().toISOString(),
            }),
          ),
        () => nc.flush(),
      )
      await bareFan.stop()
      const runId = await parley.newRun()
      const inflight = new Set<Promise<unknown>>()
      let failed = 0
      const reasons = new Map<string, number>()
      const p = await fanout(
        pool,
        {
          port: parley.process.port,
          path: `/api/runs/${runId}/turns/stream`,
          headers: { Authorization: `Bearer ${parley.token}` },
        },
        s.clients,
        s.rate,
        (seq, text) => {
          const req = fetch(`${parley.url}/internal/turns`, {
            method: "POST",
            headers: {
              "content-type": "application/json",
              "x-system-key": SYSTEM_KEY,
              "x-tenant-id": String(parley.tenantId),
            },
            body: JSON.stringify({ run_id: runId, target_id: TARGET_ID, seq, speaker: "agent", text }),
          })
            .then(async (r) => {
              if (r.status !== 201) {
                failed++
                reasons.set(`HTTP ${r.status}`, (reasons.get(`HTTP ${r.status}`) ?? 0) + 1)
              }
              await r.arrayBuffer()
            })
            .catch((e: unknown) => {
              failed++
              const why = String((e as { cause?: unknown })?.cause ?? e).slice(0, 80)
              reasons.set(why, (reasons.get(why) ?? 0) + 1)
            })
            .finally(() => inflight.delete(req))
          inflight.add(req)
        },
        async () => {
          await Promise.all(inflight)
        },
      )
      const show = (name: string, r: Fanout) =>
        out(
          `${name} ${s.clients}×${s.rate}/s: complete ${r.complete}/${r.clients}, received ${r.received}/` +
            `${r.expected}, ${r.gaps} gaps, ${r.dups} dups, p50 ${f2(r.p50)} ms, p99 ${f2(r.p99)} ms`,
        )
      show("bare", b)
      show(`parley (${failed} failed posts${failed > 0 ? `: ${JSON.stringify([...reasons])}` : ""})`, p)
      const sentTurns = Math.round((WARMUP_S + FANOUT_S) * s.rate)
      out(`parley stored: ${JSON.stringify(await parley.stored(runId))} of ${sentTurns} sent`)
      fanRows.push(
        `| ${int(s.clients)} × ${int(s.rate)}/s | ${f2(b.p50)} / ${f2(b.p99)} ms | ${f2(p.p50)} / ${f2(p.p99)} ms | ` +
          `**${f2(p.p99 / b.p99)}** | ${p.complete}/${p.clients} (${p.gaps} gaps, ${p.dups} dups) | ${failed} |`,
      )
    }
  } finally {
    pool.kill()
    await nc.close()
    await realServer?.stop()
  }

  lines.push(
    "One run, `POST /internal/turns` over HTTP (autocannon, keep-alive: 32 connections one turn per request, " +
      `8 connections ${BATCH} per request; ${INGEST_S} s each), against a bare uWS handler that parses the same ` +
      "bodies and answers from a counter in memory. Parley: one api process, `LOG_LEVEL=info` (a log line per " +
      "request), every turn stored (its seq taken in the same statement) and published before it is answered.",
    "",
    `| server | turns/s, 1 per request | ratio | turns/s, ${BATCH} per request | ratio |`,
    "|---|---|---|---|---|",
    ...ingestRows,
    "",
    "Watchers' end-to-end latency (send → client; p50 / p99) on PostgreSQL + NATS: Parley's turns POSTed one per " +
      "request at the rate (so through the writer, Postgres, NATS and the hub), the bare fan-out's published " +
      `straight on NATS by the same load generator; ${WARMUP_S} s warm-up, then a ${FANOUT_S} s window; goal ≤ 1.5×.`,
    "",
    "| watchers × turns/s | bare uWS fan-out | Parley | p99 ratio | Parley clients with every turn | POSTs failed |",
    "|---|---|---|---|---|---|",
    ...fanRows,
    "",
    `Machine: ${machine()}; load average ${loadBefore.toFixed(1)} before, ${loadavg()[0]!.toFixed(1)} after ` +
      "(shared with other work: the ratios are what count). Run: `npm run bench -- turns`.",
  )
  record("turns", lines.join("\n"))
}
