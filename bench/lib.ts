// Shared bench plumbing: start a server process and wait for its port, drive load with
// autocannon from this process, describe the machine, record results in RESULTS.md, and make a
// scratch database for a run.

import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { cpus, tmpdir, totalmem } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import autocannon from "autocannon"
import { connectPostgres, redact, type Sql, withDatabase } from "../src/platform/Db.js"
import { PROJECT_ROOT } from "../src/platform/paths.js"
import { readOutbox } from "../src/providers/mail/outbox.mail.js"

export interface ServerProcess {
  readonly port: number
  readonly child: ChildProcess
  stop(): Promise<void>
}

// Servers must not outlive the bench that started them, however it ends.
const children = new Set<ChildProcess>()
process.once("exit", () => {
  for (const c of children) c.kill("SIGKILL")
})
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => process.exit(130))

export async function startProcess(args: string[], env: Record<string, string>): Promise<ServerProcess> {
  const child = spawn(process.execPath, args, {
    cwd: PROJECT_ROOT,
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "inherit"],
  })
  children.add(child)
  child.once("exit", () => children.delete(child))
  const port = await new Promise<number>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! })
    lines.on("line", (line) => {
      if (!line.includes('"parley started"')) return
      resolve(JSON.parse(line).port as number)
      // Keep draining stdout (one log line per request) so the server never blocks on the pipe.
      child.stdout!.resume()
    })
    child.on("exit", (code) => reject(new Error(`${args.join(" ")} exited with ${code} before listening`)))
  })
  return {
    port,
    child,
    stop: () =>
      new Promise((resolve) => {
        child.once("exit", () => resolve())
        child.kill("SIGTERM")
      }),
  }
}

export interface LoadResult {
  readonly requests: number
  readonly rps: number
  readonly p50: number
  readonly p99: number
  readonly errors: number
  readonly non2xx: number
}

export async function load(url: string, opts: { connections: number; seconds: number }): Promise<LoadResult> {
  const r = await autocannon({ url, connections: opts.connections, duration: opts.seconds, pipelining: 1 })
  return {
    requests: r.requests.total,
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.errors + r.timeouts,
    non2xx: r.non2xx,
  }
}

/** CPU time (user + system) a process has used so far, in microseconds (Linux /proc). */
export function cpuMicros(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
  const ticks = Number(fields[11]) + Number(fields[12]) // utime, stime (fields 14 and 15 of stat)
  return (ticks * 1_000_000) / 100 // USER_HZ is 100 on Linux
}

export function machine(): string {
  const cpu = cpus()
  return (
    `${cpu.length} × ${cpu[0]?.model.trim() ?? "unknown CPU"}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ` +
    `${process.version}, ${process.platform}/${process.arch}`
  )
}

/** Replaces the section between `<!-- bench:NAME -->` markers in bench/RESULTS.md. */
export function record(name: string, markdown: string): void {
  const file = join(PROJECT_ROOT, "bench", "RESULTS.md")
  const start = `<!-- bench:${name} -->`
  const end = `<!-- /bench:${name} -->`
  const section = `${start}\n${markdown.trim()}\n${end}`
  let text = existsSync(file)
    ? readFileSync(file, "utf8")
    : "# Benchmark results\n\nWritten by `npm run bench`; each section is replaced by its bench's latest run.\n"
  const i = text.indexOf(start)
  const j = text.indexOf(end)
  text = i >= 0 && j > i ? text.slice(0, i) + section + text.slice(j + end.length) : `${text.trimEnd()}\n\n${section}\n`
  writeFileSync(file, text)
}

export interface ScratchDatabase {
  readonly url: string
  /** A client of the scratch database. */
  readonly sql: Sql
  /** The server's PostgreSQL version, for the report. */
  readonly pgVersion: string
  /** Closes the client and drops the database (with any connections still open to it). */
  drop(): Promise<void>
}

/** A database of its own for one bench run, on the server `baseUrl` names. */
export async function scratchDatabase(baseUrl: string, prefix: string, poolMax = 1): Promise<ScratchDatabase> {
  const name = `${prefix}_${randomBytes(5).toString("hex")}`
  const admin = connectPostgres(baseUrl, 1)
  await admin.unsafe(`create database ${name}`)
  const [pg] = await admin<[{ version: string }]>`select split_part(version(), ' ', 2) as version`
  const url = withDatabase(baseUrl, name)
  const sql = connectPostgres(url, poolMax)
  return {
    url,
    sql,
    pgVersion: pg.version,
    drop: async () => {
      await sql.end({ timeout: 5 })
      await admin.unsafe(`drop database if exists ${name} with (force)`)
      await admin.end({ timeout: 5 })
    },
  }
}

/** Opens the verification link the server mailed to `email` (runs need a verified owner). */
export async function verifyEmail(base: string, outboxFile: string, email: string): Promise<void> {
  const link = readOutbox(outboxFile)
    .filter((m) => m.kind === "verify_email" && m.to === email)
    .at(-1)?.links[0]
  if (link === undefined) throw new Error(`no verification mail to ${email} in ${outboxFile}`)
  const token = new URL(link, base).searchParams.get("token") ?? ""
  const res = await fetch(`${base}/auth/verify-email?token=${encodeURIComponent(token)}`)
  if (res.status !== 200) throw new Error(`verify email ${res.status}: ${await res.text()}`)
}

/** What a bench run against a server process on real PostgreSQL gets (withBenchServer). */
export interface BenchServer {
  readonly url: string
  /** The scratch database's URL, for a connection of the bench's own. */
  readonly dbUrl: string
  /** A client of the scratch database: seed and assert straight in SQL. */
  readonly sql: Sql
  readonly pgVersion: string
  /** The workspace signed up (and logged in) for the run. */
  readonly tenantId: number
  readonly token: string
}

/**
 * Runs `body` against a server process (all roles, from source) on a scratch database of the
 * PostgreSQL that DATABASE_URL names, with one workspace signed up and logged in; the server stops and
 * the database is dropped however it ends. Without DATABASE_URL the bench says so and is skipped.
 */
export async function withBenchServer(
  name: string,
  opts: { readonly country: "IN" | "US"; readonly env?: Record<string, string> },
  body: (b: BenchServer) => Promise<void>,
): Promise<void> {
  const base = process.env.DATABASE_URL
  if (base === undefined || base === "") {
    process.stdout.write(`bench ${name} needs real PostgreSQL: set DATABASE_URL; skipped.\n`)
    return
  }
  const scratch = await scratchDatabase(base, `parley_bench_${name}`, 2)
  process.stdout.write(`scratch database ${redact(scratch.url)}\n`)
  const dir = mkdtempSync(join(tmpdir(), `parley-bench-${name}-`))
  let server: ServerProcess | undefined
  try {
    server = await startProcess(["--import", "tsx", "src/main/main.ts", "serve", "--role", "all"], {
      HOST: "127.0.0.1",
      PORT: "0",
      DATA_DIR: join(dir, "data"),
      LOG_LEVEL: "info",
      DATABASE_URL: scratch.url,
      ...opts.env,
    })
    const url = `http://127.0.0.1:${server.port}`
    const email = `bench-${randomBytes(4).toString("hex")}@example.com`
    const password = "bench-password-1"
    const post = (path: string, b: unknown) =>
      fetch(url + path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(b) })
    const signup = await post("/auth/signup", { email, password, country: opts.country })
    if (signup.status !== 201) throw new Error(`signup ${signup.status} ${await signup.text()}`)
    const login = await post("/auth/login", { email, password })
    if (login.status !== 200) throw new Error(`login ${login.status} ${await login.text()}`)
    const { token, tenant } = (await login.json()) as { token: string; tenant: { id: number } }
    await body({ url, dbUrl: scratch.url, sql: scratch.sql, pgVersion: scratch.pgVersion, tenantId: tenant.id, token })
  } finally {
    await server?.stop()
    await scratch.drop()
  }
}

/** Latencies of requests made one after another, in ms, and how many failed. */
export interface Latencies {
  readonly p50: number
  readonly p99: number
  readonly max: number
  readonly n: number
  readonly failed: number
}

/** `GET /healthz` one after another (a pause of `pauseMs` between) until stopped. */
export function healthProbe(base: string, pauseMs: number): { stop(): Promise<Latencies> } {
  const ms: number[] = []
  let failed = 0
  let on = true
  const done = (async () => {
    while (on) {
      const t = performance.now()
      try {
        const r = await fetch(`${base}/healthz`)
        await r.arrayBuffer()
        if (r.status !== 200) failed++
      } catch {
        failed++
      }
      ms.push(performance.now() - t)
      await new Promise((r) => setTimeout(r, pauseMs))
    }
  })()
  return {
    stop: async () => {
      on = false
      await done
      const sorted = [...ms].sort((a, b) => a - b)
      const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN
      return { p50: at(0.5), p99: at(0.99), max: sorted.at(-1) ?? Number.NaN, n: sorted.length, failed }
    },
  }
}
