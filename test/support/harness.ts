// Boots the real server for a suite: in this process on an ephemeral port (so tests can also read
// the database the server uses), or as a child process speaking only HTTP. Embedded PGlite and the
// in-process bus by default; real Postgres and NATS when DATABASE_URL / NATS_URL are set. Each
// server gets its own database (a copy of the migrated template) and its own bus namespace.
// A suite that needs only a workspace of its own takes the worker's shared server for its settings
// (sharedTestServer); one that reads or changes what is the server's as a whole boots its own.
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { cpSync, mkdtempSync, rmSync } from "node:fs"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { Effect } from "effect"
import { inject } from "vitest"
import type { AnyRoute } from "../../api/route.js"
import { type Running, serve } from "../../src/main/serve.js"
import { type Config, loadConfig } from "../../src/platform/config.js"
import { connectPostgres, Db, type Sql, startEmbeddedPostgres, withDatabase } from "../../src/platform/Db.js"
import type { Role } from "../../src/platform/Instance.js"
import { makeLogger } from "../../src/platform/Log.js"
import { PROJECT_ROOT } from "../../src/platform/paths.js"
import { copyPrefix, type Template } from "./template.js"

export const realServices = process.env.DATABASE_URL !== undefined

/** A fresh database for one server: environment to point at it, and a cleanup. */
export async function freshDatabase(): Promise<{ env: Record<string, string>; drop(): Promise<void> }> {
  const template = inject("template")
  const dataDir = mkdtempSync(join(inject("scratch"), "db-"))
  if (template.kind === "pglite") {
    cpSync(join(template.dataDir, "pglite"), join(dataDir, "pglite"), { recursive: true })
    return { env: { DATA_DIR: dataDir }, drop: async () => rmSync(dataDir, { recursive: true, force: true }) }
  }
  const db = await postgresDatabase(template, "migrated")
  return {
    env: { DATA_DIR: dataDir, DATABASE_URL: db.url },
    drop: async () => {
      await db.drop()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

/** A database of its own on the template's Postgres server: a copy of the template, or empty. */
async function postgresDatabase(
  template: Extract<Template, { kind: "postgres" }>,
  contents: "migrated" | "empty",
): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${copyPrefix(template.database)}${randomBytes(5).toString("hex")}`
  const admin = connectPostgres(template.url, 1)
  await admin.unsafe(`create database ${name}${contents === "migrated" ? ` template ${template.database}` : ""}`)
  return {
    url: withDatabase(template.url, name),
    drop: async () => {
      await admin.unsafe(`drop database if exists ${name} with (force)`)
      await admin.end()
    },
  }
}

/** An empty database of its own, not migrated (on DATABASE_URL's server when one is given). */
export async function emptyDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const template = inject("template")
  if (template.kind === "postgres") return postgresDatabase(template, "empty")
  const dir = mkdtempSync(join(inject("scratch"), "empty-"))
  cpSync(template.empty, dir, { recursive: true })
  const pg = await startEmbeddedPostgres(join(dir, "pglite"))
  return {
    url: pg.url,
    drop: async () => {
      await pg.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {
    HOST: "127.0.0.1",
    PORT: "0",
    LOG_LEVEL: process.env.LOG_LEVEL ?? "silent",
    BUS_NAMESPACE: `t${randomBytes(5).toString("hex")}`,
    // Every suite's clients come from 127.0.0.1: the per-IP limits are tested where they are set.
    PAYMENTS: "stub",
    SIGNUPS_PER_IP_HOUR: "100000",
    OTP_GUESSES_PER_IP_HOUR: "100000",
    PREVIEWS_ANON_PER_IP_HOUR: "100000",
    // Calls are heard as audio, the simulator's too (the product's default); suites of telco_a's
    // turn-by-turn <Say>/<Gather> ask for MEDIA_STREAMS=none.
    MEDIA_STREAMS: "all",
  }
  if (process.env.NATS_URL !== undefined) env.NATS_URL = process.env.NATS_URL
  return env
}

export interface TestServer {
  readonly url: string
  readonly port: number
  readonly config: Config
  readonly running: Running
  /** The server's own database client: assert on the state it wrote. */
  readonly sql: Sql
  stop(): Promise<void>
}

export interface TestServerOptions {
  /** Settings over the harness defaults, as environment variables. */
  env?: Record<string, string>
  extraRoutes?: AnyRoute[]
  /** Collects every log line the server writes (at LOG_LEVEL, "silent" unless set) instead of printing. */
  logLines?: Array<Record<string, unknown>>
}

export async function startTestServer(opts: TestServerOptions = {}): Promise<TestServer> {
  const db = await freshDatabase()
  const config = loadConfig({ ...baseEnv(), ...db.env, ...opts.env })
  const lines = opts.logLines
  const logger = makeLogger(config, {}, lines && { destination: { write: (l) => void lines.push(JSON.parse(l)) } })
  const running = await serve({
    role: "all",
    config,
    logger,
    ...(opts.extraRoutes && { extraRoutes: opts.extraRoutes }),
  })
  const sql = await running.runtime.runPromise(Effect.map(Db, (d) => d.sql))
  const port = running.port!
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    config,
    running,
    sql,
    stop: async () => {
      await running.stop()
      await db.drop()
    },
  }
}

// One server per worker and settings, shared by the suites that take it. Kept by the module, which
// a worker loads once for all its files (isolate: false in vitest.config.ts). At most
// SHARED_SERVERS live at once, each with a small pool: on real Postgres every live server holds
// connections, and two workers' worth must stay well inside max_connections (100 by default).
const shared = new Map<string, Promise<TestServer>>()
const SHARED_SERVERS = 3
const SHARED_POOL = { DB_POOL_MAX: "4" }

/**
 * The worker's server for these settings, booted by the first suite that asks. For suites that
 * need only isolation by workspace: each signs up its own, and reads and asserts only on what is
 * that workspace's (never a whole table, a server-wide count or the server's settings). Its `stop`
 * does nothing; the server lives until the worker exits, stopSharedServers is called, or it is the
 * least recently asked for of more than SHARED_SERVERS. What it leaves is removed with the template
 * at the end (global-setup.ts).
 */
export async function sharedTestServer(opts: { env?: Record<string, string> } = {}): Promise<TestServer> {
  const env = { ...SHARED_POOL, ...opts.env }
  const key = JSON.stringify(Object.entries(env).sort())
  let server = shared.get(key)
  if (server !== undefined)
    shared.delete(key) // re-inserted below: the Map's order is the asking order
  else {
    for (const [oldest, old] of shared) {
      if (shared.size < SHARED_SERVERS) break
      shared.delete(oldest)
      await (await old.catch(() => undefined))?.stop()
    }
    server = startTestServer({ env })
    // A boot that failed is tried again by the next suite rather than failing every one after it.
    server.catch(() => shared.delete(key))
  }
  shared.set(key, server)
  return { ...(await server), stop: async () => {} }
}

/**
 * Stops the worker's shared servers; the next suite that asks boots them again. For a suite that
 * reads what is the process's as a whole (the metrics registry) or fakes its timers (which would
 * fake the shared servers' timers too).
 */
export async function stopSharedServers(): Promise<void> {
  const servers = [...shared.values()]
  shared.clear()
  for (const server of servers) await (await server.catch(() => undefined))?.stop()
}

// Spawned servers must not outlive the test worker, even when a test fails before stopping them.
const spawned = new Set<ChildProcess>()
process.once("exit", () => {
  for (const c of spawned) c.kill("SIGKILL")
})

export interface SpawnedServer {
  readonly url: string | undefined
  readonly child: ChildProcess
  /** Every JSON log line the process printed so far. */
  readonly lines: Array<Record<string, unknown>>
  /** Resolves with the exit code (or signal name) when the process ends. */
  readonly exited: Promise<number | string>
  /** Everything the process wrote to stderr so far. */
  stderr(): string
}

/**
 * Runs `parley serve` as its own process (TypeScript through tsx) and waits for "parley started".
 * `env` replaces the harness defaults key by key; pass `database` to reuse one across processes.
 */
export async function spawnServer(opts: {
  role?: Role
  env?: Record<string, string>
  args?: string[]
  waitFor?: "started" | "exit"
}): Promise<SpawnedServer> {
  const args = opts.args ?? ["serve", "--role", opts.role ?? "all"]
  const child = spawn(process.execPath, ["--import", "tsx", join(PROJECT_ROOT, "src/main/main.ts"), ...args], {
    cwd: PROJECT_ROOT,
    env: { PATH: process.env.PATH ?? "", ...baseEnv(), LOG_LEVEL: "info", ...opts.env },
    stdio: ["ignore", "pipe", "pipe"],
  })
  spawned.add(child)
  child.once("exit", () => spawned.delete(child))
  const lines: Array<Record<string, unknown>> = []
  const exited = new Promise<number | string>((resolve) =>
    child.on("exit", (code, signal) => resolve(code ?? signal ?? -1)),
  )
  let stderr = ""
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()))
  const started = new Promise<number | undefined>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (line) => {
      let parsed: Record<string, unknown>
      try {
        parsed = JSON.parse(line) as Record<string, unknown>
      } catch {
        return
      }
      lines.push(parsed)
      if (parsed["msg"] === "parley started") resolve(parsed["port"] as number | undefined)
    })
    void exited.then((code) => reject(new Error(`server exited (${code}) before starting: ${stderr}`)))
  })
  const server = (url: string | undefined): SpawnedServer => ({ url, child, lines, exited, stderr: () => stderr })
  if (opts.waitFor === "exit") {
    started.catch(() => {})
    await exited
    return server(undefined)
  }
  const port = await started
  return server(port === undefined ? undefined : `http://127.0.0.1:${port}`)
}
