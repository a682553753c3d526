// bench/footprint: resident memory of the built server on the embedded defaults, idle after start
// and idle after a small workload, beside (1) a bare Node process that opens PGlite with its default
// settings in a fresh directory, as `npm start` did before, and (2) the server with PGlite's previous
// memory settings (PGLITE_SHARED_BUFFERS=128MB PGLITE_WASM_TIER_UP=v8), and (3) the defaults but v8. The
// servers then take the same database-bound load in alternating rounds: the cost in speed is a ratio.
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import autocannon from "autocannon"
import { PROJECT_ROOT } from "../src/platform/paths.js"
import { type LoadResult, machine, record, type ServerProcess, startProcess } from "./lib.js"

const ROUNDS = Number(process.env.BENCH_FOOTPRINT_ROUNDS ?? 3)
const SECONDS = Number(process.env.BENCH_FOOTPRINT_SECONDS ?? 5)
/** How long a process is left alone before its idle memory is read. */
const SETTLE_MS = Number(process.env.BENCH_FOOTPRINT_SETTLE_MS ?? 10_000)
/** The server's entry point (another build's, to compare builds); `npm run bench` builds dist/ first. */
const ENTRY = process.env.BENCH_FOOTPRINT_ENTRY ?? "dist/src/main/main.js"
const CONNECTIONS = 32
const WORKFLOWS_PER_ROUND = 10
const GOAL_MB = 300
const MAX_SLOWDOWN = 0.1

type Name = "lean" | "previous" | "v8"
const SETTINGS: Record<Name, Record<string, string>> = {
  lean: {},
  previous: { PGLITE_SHARED_BUFFERS: "128MB", PGLITE_WASM_TIER_UP: "v8" },
  v8: { PGLITE_WASM_TIER_UP: "v8" },
}
const NAMES: Name[] = ["previous", "lean", "v8"]

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Resident set size of a process, in MB (Linux /proc). */
function rssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("VmRSS:"))
  return Math.round(Number(line?.split(/\s+/)[1] ?? Number.NaN) / 1024)
}

/** The median of five readings a second apart, after SETTLE_MS of quiet. */
async function idleRss(pid: number): Promise<number> {
  await sleep(SETTLE_MS)
  const xs: number[] = []
  for (let i = 0; i < 5; i++) {
    xs.push(rssMb(pid))
    await sleep(1000)
  }
  return median(xs)
}

/** A bare Node process that opens PGlite (default settings) in a fresh directory, then waits. */
async function barePglite(dir: string): Promise<{ child: ChildProcess; startMs: number }> {
  const script =
    `const { PGlite } = await import("@electric-sql/pglite");` +
    `const db = await PGlite.create(${JSON.stringify(dir)}); await db.query("select 1");` +
    `process.stdout.write("ready\\n"); setInterval(() => {}, 60000);`
  const t0 = performance.now()
  const child = spawn(process.execPath, ["--input-type=module", "--eval", script], {
    cwd: PROJECT_ROOT,
    stdio: ["ignore", "pipe", "inherit"],
  })
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once("data", () => resolve())
    child.once("exit", (code) => reject(new Error(`bare PGlite exited with ${code}`)))
  })
  return { child, startMs: performance.now() - t0 }
}

async function call(base: string, method: string, path: string, opts: { body?: unknown; bearer?: string } = {}) {
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
  return JSON.parse(text === "" ? "{}" : text) as Record<string, unknown>
}

/** A workspace over HTTP: its session token and a read-scoped API key. */
async function workspace(base: string): Promise<{ token: string; key: string }> {
  const email = `bench-${randomBytes(4).toString("hex")}@example.com`
  const password = "bench-password-1"
  await call(base, "POST", "/auth/signup", { body: { email, password, full_name: "Bench" } })
  const token = String((await call(base, "POST", "/auth/login", { body: { email, password } }))["token"])
  const key = await call(base, "POST", "/api-keys", { bearer: token, body: { name: "bench", scope: "read" } })
  return { token, key: String(key["secret"]) }
}

/** Creates WORKFLOWS_PER_ROUND workflows one after another; returns the mean ms per workflow. */
async function writes(base: string, token: string, round: number): Promise<number> {
  const t0 = performance.now()
  for (let i = 0; i < WORKFLOWS_PER_ROUND; i++)
    await call(base, "POST", "/api/workflows", {
      bearer: token,
      body: { nl_prompt: `Remind members of gym ${round}-${i} that their renewal is due; offer a free month.` },
    })
  return (performance.now() - t0) / WORKFLOWS_PER_ROUND
}

async function reads(base: string, key: string): Promise<LoadResult> {
  const r = await autocannon({
    url: `${base}/api/workflows`,
    headers: { authorization: `Bearer ${key}` },
    connections: CONNECTIONS,
    duration: SECONDS,
  })
  return {
    requests: r.requests.total,
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.errors + r.timeouts,
    non2xx: r.non2xx,
  }
}

interface Measured {
  startMs: number
  idle: number
  afterLoad: number
  rps: number[]
  p99: number[]
  writeMs: number[]
}

export async function benchFootprint(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), "parley-bench-footprint-"))
  const servers: Partial<Record<Name, ServerProcess>> = {}
  const fresh = (): Measured => ({ startMs: 0, idle: 0, afterLoad: 0, rps: [], p99: [], writeMs: [] })
  const m: Record<Name, Measured> = { lean: fresh(), previous: fresh(), v8: fresh() }
  let bare = { idle: 0, startMs: 0 }
  try {
    // One process at a time while idle memory is read, so none of them starts under another's load.
    const b = await barePglite(join(root, "bare"))
    bare = { idle: await idleRss(b.child.pid!), startMs: b.startMs }
    b.child.kill("SIGKILL")
    process.stdout.write(`bare PGlite (defaults, fresh dir): ${bare.idle} MB idle\n`)
    for (const name of NAMES) {
      const t0 = performance.now()
      const s = await startProcess([ENTRY, "serve", "--role", "all"], {
        HOST: "127.0.0.1",
        PORT: "0",
        DATA_DIR: join(root, name),
        LOG_LEVEL: "info",
        ...SETTINGS[name],
      })
      servers[name] = s
      const health = await fetch(`http://127.0.0.1:${s.port}/healthz`)
      if (health.status !== 200) throw new Error(`${name}: /healthz ${health.status}`)
      m[name].startMs = performance.now() - t0
      m[name].idle = await idleRss(s.child.pid!)
      process.stdout.write(`${name}: started in ${Math.round(m[name].startMs)} ms, ${m[name].idle} MB idle\n`)
    }
    const ws = {} as Record<Name, { token: string; key: string }>
    for (const name of NAMES) ws[name] = await workspace(`http://127.0.0.1:${servers[name]!.port}`)
    for (let round = 0; round < ROUNDS; round++) {
      for (const name of round % 2 === 0 ? NAMES : [...NAMES].reverse()) {
        const base = `http://127.0.0.1:${servers[name]!.port}`
        const w = await writes(base, ws[name].token, round)
        const r = await reads(base, ws[name].key)
        if (r.errors > 0 || r.non2xx > 0) throw new Error(`${name}: ${r.errors} errors, ${r.non2xx} non-2xx`)
        m[name].writeMs.push(w)
        m[name].rps.push(r.rps)
        m[name].p99.push(r.p99)
        process.stdout.write(
          `round ${round + 1} ${name}: create workflow ${w.toFixed(1)} ms; GET /api/workflows ` +
            `${Math.round(r.rps)} req/s, p99 ${r.p99} ms\n`,
        )
      }
    }
    for (const name of NAMES) m[name].afterLoad = await idleRss(servers[name]!.child.pid!)
  } finally {
    await Promise.all(Object.values(servers).map((s) => s.stop()))
    rmSync(root, { recursive: true, force: true })
  }

  const L = m.lean
  const P = m.previous
  const H = m.v8
  // Paired by round: each round's runs were back to back on the same machine.
  const speed = (x: Measured) => ({
    read: median(x.rps.map((r, i) => r / P.rps[i]!)),
    write: median(x.writeMs.map((w, i) => P.writeMs[i]! / w)),
  })
  const { read: readRatio, write: writeRatio } = speed(L)
  const v8 = speed(H)
  const slowest = Math.min(readRatio, writeRatio)
  const row = (what: string, x: Measured) =>
    `| ${what} | ${x.idle} | ${x.afterLoad} | ${(x.startMs / 1000).toFixed(1)} | ${Math.round(median(x.rps))} | ` +
    `${median(x.p99)} | ${median(x.writeMs).toFixed(1)} |`
  const md =
    `## footprint — resident memory on the embedded defaults\n\n` +
    `Machine: ${machine()}. Run ${new Date().toISOString().slice(0, 10)}; RSS from /proc, the median of five ` +
    `readings after ${SETTLE_MS / 1000} s of quiet; each process started on a fresh DATA_DIR (first start, ` +
    `initdb included). Load: ${ROUNDS} alternating rounds, each ${WORKFLOWS_PER_ROUND} sequential ` +
    `\`POST /api/workflows\` then ${SECONDS} s of \`GET /api/workflows\` with a read key (${CONNECTIONS} ` +
    `connections, autocannon in the bench process); both servers run side by side on the shared 2 cores.\n\n` +
    `| process | idle MB | idle after load MB | start s | GET req/s | GET p99 ms | POST ms |\n` +
    `|---|---:|---:|---:|---:|---:|---:|\n` +
    `| bare Node + PGlite, default settings | ${bare.idle} | | ${(bare.startMs / 1000).toFixed(1)} | | | |\n` +
    `${row("Parley, previous PGlite settings (PGLITE_SHARED_BUFFERS=128MB PGLITE_WASM_TIER_UP=v8)", P)}\n` +
    `${row("Parley, defaults (PGLITE_SHARED_BUFFERS=16MB PGLITE_WASM_TIER_UP=hot)", L)}\n` +
    `${row("Parley, defaults but PGLITE_WASM_TIER_UP=v8", H)}\n\n` +
    `**Idle: ${L.idle} MB (${L.idle < GOAL_MB ? "under" : "over"} the ${GOAL_MB} MB goal), ` +
    `${(L.idle / bare.idle).toFixed(2)}× the bare PGlite process and ${(L.idle / P.idle).toFixed(2)}× the ` +
    `previous settings.** Speed against the previous settings (paired rounds, >1 is faster): reads ` +
    `${readRatio.toFixed(2)}×, writes ${writeRatio.toFixed(2)}× — ` +
    `${slowest >= 1 - MAX_SLOWDOWN ? "within" : "outside"} the ${MAX_SLOWDOWN * 100}% allowance. ` +
    `With PGLITE_WASM_TIER_UP=v8: ${H.idle} MB idle, reads ${v8.read.toFixed(2)}×, writes ` +
    `${v8.write.toFixed(2)}×.\n` +
    `The previous row still has initdb in a child process (not a setting); the bare row is what the first ` +
    `\`npm start\` held before it.`
  process.stdout.write(`\n${md}\n`)
  record("footprint", md)
}
