// What the multi-process suites share: whether a real Postgres and NATS are there to share, the
// database their processes share, a JSON call against one process's HTTP API, and waiting for a
// condition across processes.
import { join } from "node:path"
import { afterAll, beforeAll } from "vitest"
import { connectPostgres, type Sql } from "../../src/platform/Db.js"
import { readOutbox } from "../../src/providers/mail/outbox.mail.js"
import { freshDatabase, type SpawnedServer } from "./harness.js"

/** Several processes only share state through a real Postgres and NATS. */
export const real = Boolean(process.env.DATABASE_URL && process.env.NATS_URL)

export type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

export async function call(
  base: string,
  method: string,
  path: string,
  opts: { token?: string; body?: unknown } = {},
): Promise<{ status: number; body: Json }> {
  const headers: Record<string, string> = {}
  if (opts.token !== undefined) headers["authorization"] = `Bearer ${opts.token}`
  if (opts.body !== undefined) headers["content-type"] = "application/json"
  const res = await fetch(base + path, {
    method,
    headers,
    ...(opts.body !== undefined && { body: JSON.stringify(opts.body) }),
  })
  return { status: res.status, body: (await res.json()) as Json }
}

/**
 * Opens the verification link mailed to `email` (runs need a verified owner). The processes write
 * mail to the outbox under the DATA_DIR they were given.
 */
export async function verifyEmail(base: string, dataDir: string, email: string): Promise<void> {
  const link = readOutbox(join(dataDir, "outbox.jsonl"))
    .filter((m) => m.kind === "verify_email" && m.to === email)
    .at(-1)?.links[0]
  if (link === undefined) throw new Error(`no verification mail to ${email}`)
  const token = new URL(link, base).searchParams.get("token") ?? ""
  const r = await call(base, "GET", `/auth/verify-email?token=${encodeURIComponent(token)}`)
  if (r.status !== 200) throw new Error(`verify email ${r.status}: ${JSON.stringify(r.body)}`)
}

/** Polls `probe` every 100 ms until it answers something other than undefined. */
export async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const v = await probe()
    if (v !== undefined) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

export interface SharedDatabase {
  readonly db: Awaited<ReturnType<typeof freshDatabase>>
  /** A client of the database the processes share, for asserting on what they wrote. */
  readonly sql: Sql
  /** Processes the suite started; whatever still runs is killed after the suite. */
  readonly processes: SpawnedServer[]
}

/** A fresh database for the suite's processes to share, made before its tests and dropped after. */
export function sharedDatabase(): SharedDatabase {
  const state = { processes: [] as SpawnedServer[] } as {
    db: SharedDatabase["db"]
    sql: Sql
    processes: SpawnedServer[]
  }
  beforeAll(async () => {
    state.db = await freshDatabase()
    state.sql = connectPostgres(state.db.env.DATABASE_URL!, 2)
  })
  afterAll(async () => {
    for (const p of state.processes)
      if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL")
    await Promise.all(state.processes.map((p) => p.exited))
    await state.sql?.end()
    await state.db?.drop()
  })
  return state
}
