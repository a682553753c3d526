// bench/reads: the list endpoints a dashboard polls, with a read-scoped API key, through the full
// stack against a bare uWS server and a Fastify server answering the same bytes from memory; on
// real PostgreSQL + NATS and on the embedded defaults. Rounds alternate; ratios are what we report.
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import autocannon from "autocannon"
import type { Sql } from "../src/platform/Db.js"
import {
  cpuMicros,
  type LoadResult,
  machine,
  record,
  type ServerProcess,
  scratchDatabase,
  startProcess,
} from "./lib.js"

const ROUNDS = Number(process.env.BENCH_READS_ROUNDS ?? 3)
const SECONDS = Number(process.env.BENCH_READS_SECONDS ?? 5)
const CONNECTIONS = 64
const WORKFLOWS = 20
/** On Postgres: one finished run of this many targets on the listed workflow (see seedRun). */
const SEEDED_TARGETS = 1000
const LIVE_CALLS = 12
const MODES = (process.env.BENCH_READS_MODES ?? "real,embedded").split(",") as Mode[]
/** Which endpoints (by name below) to measure; the workflow list is the headline. */
const ONLY = process.env.BENCH_READS_ONLY?.split(",")
/** Writes a V8 CPU profile of the Parley process into this directory (node --cpu-prof). */
const PROFILE_DIR = process.env.BENCH_READS_PROFILE_DIR
const TARGET_BARE = 0.8
const TARGET_FASTIFY = 1.5

type Mode = "real" | "embedded"
type ServerName = "parley" | "bare" | "fastify"
type Round = LoadResult & { cpuPerReq: number }

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

async function call(
  base: string,
  method: string,
  path: string,
  opts: { body?: unknown; bearer?: string } = {},
): Promise<{ status: number; text: string; body: Record<string, unknown> }> {
  const headers: Record<string, string> = {}
  if (opts.body !== undefined) headers["content-type"] = "application/json"
  if (opts.bearer !== undefined) headers["authorization"] = `Bearer ${opts.bearer}`
  const res = await fetch(base + path, {
    method,
    headers,
    ...(opts.body !== undefined && { body: JSON.stringify(opts.body) }),
  })
  const text = await res.text()
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`)
  return { status: res.status, text, body: text === "" ? {} : (JSON.parse(text) as Record<string, unknown>) }
}

/** A workspace with WORKFLOWS workflows and a read-scoped API key, made over HTTP. */
async function workspace(base: string): Promise<{ key: string; workflowId: number }> {
  const email = `bench-${randomBytes(4).toString("hex")}@example.com`
  const password = "bench-password-1"
  await call(base, "POST", "/auth/signup", { body: { email, password, full_name: "Bench" } })
  const token = String((await call(base, "POST", "/auth/login", { body: { email, password } })).body["token"])
  let workflowId = 0
  for (let i = 0; i < WORKFLOWS; i++) {
    const w = await call(base, "POST", "/api/workflows", {
      bearer: token,
      body: { nl_prompt: `Remind members of gym ${i} that their annual renewal is due; offer a free month.` },
    })
    workflowId = Number(w.body["id"])
  }
  const key = await call(base, "POST", "/api-keys", { bearer: token, body: { name: "bench", scope: "read" } })
  return { key: String(key.body["secret"]), workflowId }
}

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

interface EndpointResult {
  readonly name: string
  readonly path: string
  readonly rounds: Record<ServerName, Round[]>
}

async function benchMode(mode: Mode): Promise<{ results: EndpointResult[]; detail: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-bench-reads-"))
  const bodiesFile = join(dataDir, "bodies.json")
  const db = mode === "real" ? await scratchDatabase(realDatabaseUrl(), "parley_bench_reads") : undefined
  const env: Record<string, string> = {
    HOST: "127.0.0.1",
    PORT: "0",
    DATA_DIR: dataDir,
    LOG_LEVEL: "info",
    PAYMENTS: "stub",
    ...(db && { DATABASE_URL: db.url, NATS_URL: process.env.NATS_URL ?? "nats://127.0.0.1:4222" }),
    BUS_NAMESPACE: `bench${randomBytes(4).toString("hex")}`,
  }
  const prof = PROFILE_DIR === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${PROFILE_DIR}`]
  const servers: Partial<Record<ServerName, ServerProcess>> = {}
  const results: EndpointResult[] = []
  try {
    servers.parley = await startProcess([...prof, "--import", "tsx", "src/main/main.ts", "serve", "--role", "all"], env)
    const base = `http://127.0.0.1:${servers.parley.port}`
    const { key, workflowId } = await workspace(base)
    // On Postgres the bench can write the database too: give the lists something to count.
    if (db) await seedRun(db.sql, workflowId)
    const endpoints = [
      { name: "workflows", path: "/api/workflows" },
      { name: "runs", path: `/api/workflows/${workflowId}/runs` },
      { name: "approvals", path: "/api/approvals?status=pending" },
      { name: "balance", path: "/billing/balance" },
      { name: "live", path: "/api/runs/live" },
      // The pipeline's floor: a public constant (no auth, no database) through the same stack.
      { name: "floor", path: "/pricing" },
    ].filter((e) => ONLY === undefined || ONLY.includes(e.name))
    // The baselines answer exactly the bytes Parley answers.
    const bodies: Record<string, string> = {}
    for (const e of endpoints) bodies[e.path] = (await call(base, "GET", e.path, { bearer: key })).text
    writeFileSync(bodiesFile, JSON.stringify(bodies))
    servers.bare = await startProcess(["--import", "tsx", "bench/servers/reads-bare.ts"], {
      PORT: "0",
      READS_BODIES: bodiesFile,
    })
    servers.fastify = await startProcess(["--import", "tsx", "bench/servers/reads-fastify.ts"], {
      PORT: "0",
      READS_BODIES: bodiesFile,
    })
    const auth = { authorization: `Bearer ${key}` }
    for (const e of endpoints) {
      const rounds: Record<ServerName, Round[]> = { parley: [], bare: [], fastify: [] }
      const order: ServerName[] = ["parley", "bare", "fastify"]
      for (const name of order) await loadWith(`http://127.0.0.1:${servers[name]!.port}${e.path}`, auth, 1) // warm-up
      const n = e.name === "workflows" ? ROUNDS : Math.max(1, ROUNDS - 1)
      for (let round = 0; round < n; round++) {
        for (const name of round % 2 === 0 ? order : [...order].reverse()) {
          const p = servers[name]!
          const cpu0 = cpuMicros(p.child.pid!)
          const r = await loadWith(`http://127.0.0.1:${p.port}${e.path}`, auth, SECONDS)
          const cpuPerReq = (cpuMicros(p.child.pid!) - cpu0) / r.requests
          if (r.errors > 0 || r.non2xx > 0)
            throw new Error(`${mode} ${e.name} ${name}: ${r.errors} errors, ${r.non2xx} non-2xx`)
          rounds[name].push({ ...r, cpuPerReq })
          process.stdout.write(
            `${mode} ${e.name} round ${round + 1} ${name}: ${Math.round(r.rps)} req/s, p50 ${r.p50} ms, ` +
              `p99 ${r.p99} ms, ${cpuPerReq.toFixed(1)} µs CPU/req\n`,
          )
        }
      }
      results.push({ name: e.name, path: e.path, rounds })
    }
  } finally {
    await Promise.all(Object.values(servers).map((s) => s.stop()))
    await db?.drop()
    rmSync(dataDir, { recursive: true, force: true })
  }
  const detail =
    mode === "real"
      ? `PostgreSQL ${db?.pgVersion} (scratch database) and NATS on the same machine; the listed workflow also ` +
        `has one finished run of ${SEEDED_TARGETS} targets written straight to the database (two calls per ` +
        `dialed target, half answered; ${LIVE_CALLS} calls still up; 60 approvals, 10 pending)`
      : "embedded defaults (PGlite in the server process, in-process bus); no run, approvals or calls (the " +
        "bench cannot write PGlite beside the server)"
  return { results, detail }
}

/**
 * One finished run of SEEDED_TARGETS targets on the workflow, written straight to the database: two
 * attempts per dialed target (half of them answered), LIVE_CALLS calls still up, approvals pending
 * and decided. What the runs list counts, the live list shows and the approvals list filters.
 */
async function seedRun(sql: Sql, workflowId: number): Promise<void> {
  await sql.begin(async (tx) => {
    const [w] = await tx<[{ tenant_id: number }]>`select tenant_id from workflows where id = ${workflowId}`
    const t = w.tenant_id
    await tx`insert into audience_targets (tenant_id, workflow_id, phone_e164)
      select ${t}, ${workflowId}, '+1555' || lpad(g::text, 7, '0') from generate_series(1, ${SEEDED_TARGETS}) g`
    const [run] = await tx<[{ id: number }]>`insert into runs (tenant_id, workflow_id, status, ended_at)
      values (${t}, ${workflowId}, 'completed', now()) returning id`
    await tx`insert into run_targets (tenant_id, run_id, target_id, phone_e164, status)
      select ${t}, ${run.id}, a.id, a.phone_e164, case when a.id % 3 = 0 then 'queued' else 'done' end
      from audience_targets a where a.workflow_id = ${workflowId}`
    await tx`insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164,
        provider, owner_instance, status, answered_at, outcome)
      select ${t}, ${run.id}, ${workflowId}, rt.id, rt.target_id, k, rt.phone_e164, 'sim', 'bench', 'ended',
        case when rt.id % 2 = 0 then now() end, 'no_answer'
      from run_targets rt, generate_series(1, 2) k where rt.run_id = ${run.id} and rt.status = 'done'`
    await tx`insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164,
        provider, owner_instance, status, answered_at)
      select ${t}, ${run.id}, ${workflowId}, rt.id, rt.target_id, 3, rt.phone_e164, 'sim', 'bench', 'connected', now()
      from run_targets rt where rt.run_id = ${run.id} and rt.status = 'done' order by rt.id limit ${LIVE_CALLS}`
    await tx`insert into approvals (tenant_id, workflow_id, run_id, proposed_action, currency, expires_at, status)
      select ${t}, ${workflowId}, ${run.id}, 'concession', 'USD', now() + interval '1 day',
        case when g <= 10 then 'pending' else 'approved' end
      from generate_series(1, 60) g`
  })
  await sql`analyze`
}

function realDatabaseUrl(): string {
  return process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
}

function table(mode: Mode, detail: string, results: EndpointResult[]): string {
  const rows = results.map((e) => {
    const s = (name: ServerName) => ({
      rps: median(e.rounds[name].map((r) => r.rps)),
      p50: median(e.rounds[name].map((r) => r.p50)),
      p99: median(e.rounds[name].map((r) => r.p99)),
      cpu: median(e.rounds[name].map((r) => r.cpuPerReq)),
    })
    // Paired: each Parley round against the baseline rounds beside it.
    const vsBare = median(e.rounds.parley.map((r, i) => r.rps / e.rounds.bare[i]!.rps))
    const vsFastify = median(e.rounds.parley.map((r, i) => r.rps / e.rounds.fastify[i]!.rps))
    const p = s("parley")
    const b = s("bare")
    const f = s("fastify")
    const floor = e.name === "floor"
    const ok = floor ? "reference" : vsBare >= TARGET_BARE && vsFastify >= TARGET_FASTIFY ? "met" : "not met"
    const what = floor ? "`GET /pricing` (public constant, no auth or database: the stack's floor)" : undefined
    const name = what ?? `\`GET ${e.path.replace(/\/\d+\//, "/{id}/")}\``
    return (
      `| ${name} | ${Math.round(p.rps)} (p50 ${p.p50} / p99 ${p.p99} ms, ` +
      `${p.cpu.toFixed(0)} µs) | ${Math.round(b.rps)} (${b.cpu.toFixed(0)} µs) | ${Math.round(f.rps)} ` +
      `(${f.cpu.toFixed(0)} µs) | **${vsBare.toFixed(2)}×** | **${vsFastify.toFixed(2)}×** | ${ok} |`
    )
  })
  return (
    `### ${mode === "real" ? "Real PostgreSQL + NATS" : "Embedded defaults"}\n\n${detail}.\n\n` +
    `| endpoint | Parley req/s (latency, server CPU/req) | bare uWS req/s | Fastify req/s | Parley / bare | ` +
    `Parley / Fastify | goal (≥ ${TARGET_BARE}× bare, ≥ ${TARGET_FASTIFY}× Fastify) |\n` +
    `|---|---:|---:|---:|---:|---:|---|\n${rows.join("\n")}\n`
  )
}

export async function benchReads(): Promise<void> {
  const load0 = loadavg()[0]!.toFixed(1)
  const sections: string[] = []
  for (const mode of MODES) {
    const { results, detail } = await benchMode(mode)
    sections.push(table(mode, detail, results))
  }
  const md =
    `## reads — the dashboard's list endpoints with an API key vs bare uWS and Fastify from memory\n\n` +
    `Machine: ${machine()}. Run ${new Date().toISOString().slice(0, 10)}; a workspace with ${WORKFLOWS} ` +
    `workflows and a read-scoped API key made over HTTP; each endpoint loaded by autocannon (${CONNECTIONS} ` +
    `keep-alive connections, in the bench process) against the Parley process (\`serve --role all\`, ` +
    `LOG_LEVEL=info), a bare uWS server and a Fastify ${"5"} server, both answering the bytes Parley answered ` +
    `for that path from memory (bench/servers/reads-*.ts), the three in alternating order; ${ROUNDS} rounds ` +
    `of ${SECONDS} s for the workflow list, ${Math.max(1, ROUNDS - 1)} for the others. Medians; ratios paired ` +
    `per round. 1-minute load average ${load0} before and ${loadavg()[0]!.toFixed(1)} after (shared machine).\n\n` +
    sections.join("\n")
  process.stdout.write(`\n${md}\n`)
  record("reads", md)
}
