// Faults (docs/operations.md): PostgreSQL and NATS go away and come back while a run is under way.
// The api reports 503 on /healthz while a dependency is down and 200 again after, without a
// restart; the run goes on and completes; no target is dialed twice, no call charged twice, no
// turn stored twice or lost (a watcher that resumes by Last-Event-ID has every stored turn once),
// and a payment webhook retried across the outage credits the wallet once.
//
// Skipped unless FAULTS=1 (with a real Postgres and NATS for the harness): it stops and starts
// servers. By default it makes its own PostgreSQL cluster (pg_createcluster, on a free port) and
// runs its own nats-server (a child process on a free port), so nothing else using the shared
// services is disturbed. To fault other servers instead, set FAULTS_PG_URL (an admin URL),
// FAULTS_PG_STOP and FAULTS_PG_START (shell commands), and FAULTS_NATS_URL, FAULTS_NATS_STOP and
// FAULTS_NATS_START. `.ci/run` runs it last, on its own.
import { type ChildProcess, execSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { createServer, Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { connectPostgres, type Sql, withDatabase } from "../../src/platform/Db.js"
import { migrate } from "../../src/platform/Migrator.js"
import type { TurnMessage } from "../../src/turns/turn.message.js"
import { type SpawnedServer, spawnServer } from "../support/harness.js"
import { call, real, until } from "../support/processes.js"
import { type SseClient, sse } from "../support/sse-client.js"
import { expectExactlyOnce, health, runCompleted, startCampaign } from "./ops.support.js"

const enabled = real && process.env.FAULTS === "1"

interface Faultable {
  readonly url: string
  stop(): Promise<void>
  start(): Promise<void>
  dispose(): Promise<void>
}

const sh = (cmd: string): void => void execSync(cmd, { stdio: "pipe", timeout: 60_000 })

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })
}

const accepts = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const s = new Socket()
    s.once("connect", () => (s.destroy(), resolve(true)))
    s.once("error", () => resolve(false))
    s.connect(port, "127.0.0.1")
  })

const waitPort = (port: number, up: boolean) =>
  until(`port ${port} ${up ? "open" : "closed"}`, async () => ((await accepts(port)) === up ? true : undefined), 30_000)

/** A PostgreSQL cluster of our own (or the one FAULTS_PG_* name). */
async function postgresUnderTest(): Promise<Faultable> {
  const e = process.env
  if (e.FAULTS_PG_URL !== undefined) {
    if (e.FAULTS_PG_STOP === undefined || e.FAULTS_PG_START === undefined)
      throw new Error("FAULTS_PG_URL needs FAULTS_PG_STOP and FAULTS_PG_START")
    const [stop, start] = [e.FAULTS_PG_STOP, e.FAULTS_PG_START]
    return { url: e.FAULTS_PG_URL, stop: async () => sh(stop), start: async () => sh(start), dispose: async () => {} }
  }
  const version = e.FAULTS_PG_VERSION ?? readdirSync("/etc/postgresql").sort().at(-1)!
  const name = `faults_${randomBytes(4).toString("hex")}`
  const port = await freePort()
  sh(`pg_createcluster ${version} ${name} -p ${port} -- --auth=trust`)
  const ctl = (action: string) => sh(`pg_ctlcluster --skip-systemctl-redirect ${version} ${name} ${action}`)
  ctl("start")
  await waitPort(port, true)
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop: async () => ctl("stop"),
    start: async () => {
      ctl("start")
      await waitPort(port, true)
    },
    dispose: async () => sh(`pg_dropcluster --stop ${version} ${name}`),
  }
}

/** A nats-server of our own (a child process), or the one FAULTS_NATS_* name. */
async function natsUnderTest(): Promise<Faultable> {
  const e = process.env
  if (e.FAULTS_NATS_URL !== undefined) {
    if (e.FAULTS_NATS_STOP === undefined || e.FAULTS_NATS_START === undefined)
      throw new Error("FAULTS_NATS_URL needs FAULTS_NATS_STOP and FAULTS_NATS_START")
    const [stop, start] = [e.FAULTS_NATS_STOP, e.FAULTS_NATS_START]
    return { url: e.FAULTS_NATS_URL, stop: async () => sh(stop), start: async () => sh(start), dispose: async () => {} }
  }
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), "parley-faults-nats-"))
  let child: ChildProcess | undefined
  const start = async () => {
    child = spawn("/usr/sbin/nats-server", ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", dir], {
      stdio: "ignore",
    })
    await waitPort(port, true)
  }
  const stop = async () => {
    const c = child
    if (c === undefined || c.exitCode !== null) return
    const exited = new Promise((r) => c.once("exit", r))
    c.kill("SIGTERM")
    await exited
    await waitPort(port, false)
  }
  await start()
  return {
    url: `nats://127.0.0.1:${port}`,
    stop,
    start,
    dispose: async () => {
      await stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

describe.skipIf(!enabled)("faults: PostgreSQL and NATS restarted mid-run (FAULTS=1)", () => {
  let pg: Faultable
  let nats: Faultable
  let admin: Sql
  let sql: Sql
  let database: string
  let dataDir: string
  const processes: SpawnedServer[] = []

  beforeAll(async () => {
    pg = await postgresUnderTest()
    nats = await natsUnderTest()
    database = `parley_faults_${randomBytes(4).toString("hex")}`
    admin = connectPostgres(pg.url, 1)
    await admin.unsafe(`create database ${database}`)
    sql = connectPostgres(withDatabase(pg.url, database), 2)
    await migrate(sql)
    dataDir = mkdtempSync(join(tmpdir(), "parley-faults-"))
  }, 120_000)

  afterAll(async () => {
    for (const p of processes) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL")
    await Promise.all(processes.map((p) => p.exited))
    await sql?.end()
    await admin?.unsafe(`drop database if exists ${database} with (force)`).catch(() => {})
    await admin?.end()
    await nats?.dispose()
    await pg?.dispose()
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true })
  }, 120_000)

  it("reports 503 while a dependency is down, recovers by itself, and the run completes exactly once", async () => {
    const env = {
      DATA_DIR: dataDir,
      DATABASE_URL: withDatabase(pg.url, database),
      NATS_URL: nats.url,
      BUS_NAMESPACE: `faults${randomBytes(5).toString("hex")}`,
      SIM_TIME_SCALE: "0.1",
      CALLING_HOURS: "any",
      DIALER_CPS_PER_CARRIER: "100",
      DIALER_CPS_PER_TENANT: "100",
      DIALER_MAX_CONCURRENT_PER_WORKFLOW: "5",
      RUN_CLAIM_INTERVAL_MS: "500",
      RUN_LEASE_MS: "15000",
      APPROVAL_HOLD_MS: "5000",
      APPROVAL_HOLD_FLOOR_MS: "0",
    }
    const [api, runtime] = await Promise.all([spawnServer({ role: "api", env }), spawnServer({ role: "runtime", env })])
    processes.push(api, runtime)
    const base = api.url!
    expect((await health(base)).status).toBe(200)
    const targets = 30
    const c = await startCampaign(base, dataDir, targets)
    const auth = { authorization: `Bearer ${c.token}` }
    const stream = `${base}/api/runs/${c.runId}/turns/stream`
    // A watcher for the whole run; whenever its stream ends it resumes from its last seq.
    const watched: SseClient[] = [sse(stream, auth)]
    let watching = true
    const seen = (): TurnMessage[] =>
      watched.flatMap((w) =>
        w.events.filter((e) => e.event === undefined).map((e) => JSON.parse(e.data) as TurnMessage),
      )
    void (async () => {
      while (watching) {
        await watched.at(-1)!.ended
        if (!watching) break
        await new Promise((r) => setTimeout(r, 300))
        const last = seen().at(-1)?.seq
        watched.push(sse(stream, { ...auth, ...(last !== undefined && { "last-event-id": String(last) }) }))
      }
    })()

    const connected = async () => {
      const [r] = await sql<[{ n: number }]>`select count(*)::int as n from calls where run_id = ${c.runId}`
      return r.n
    }
    await until("calls under way", async () => ((await connected()) >= 5 ? true : undefined), 30_000)

    // A top-up paid while the database is away: its webhook fails, is retried after, credits once.
    const intent = (await call(base, "POST", "/billing/topup", { token: c.token, body: { amount_minor: 12_345 } })).body

    // --- PostgreSQL goes away ---
    await pg.stop()
    const down = await until(
      "/healthz to report the database down",
      async () => {
        const h = await health(base)
        return h.status === 503 ? h : undefined
      },
      20_000,
    )
    expect(down.body.checks.database).toMatchObject({ ok: false })
    expect(down.body.status).toBe("unavailable")
    const during = await call(base, "POST", "/billing/webhooks/stub", {
      body: { external_id: intent.external_id, status: "succeeded" },
    })
    // Not a 500: the contract's 503 with a code, to be retried.
    expect(during.status).toBe(503)
    expect(during.body).toMatchObject({ code: "DATABASE_UNAVAILABLE", error: expect.any(String) })
    await new Promise((r) => setTimeout(r, 2_000))
    await pg.start()
    await until(
      "/healthz to recover from the database outage",
      async () => ((await health(base)).status === 200 ? true : undefined),
      30_000,
    )
    for (let i = 0; i < 2; i++) {
      const paid = await call(base, "POST", "/billing/webhooks/stub", {
        body: { external_id: intent.external_id, status: "succeeded" },
      })
      expect(paid.status).toBe(200)
    }
    const afterPg = await connected()
    await until("the run to dial again", async () => ((await connected()) > afterPg ? true : undefined), 30_000)

    // --- NATS goes away ---
    await nats.stop()
    const busDown = await until(
      "/healthz to report the bus down",
      async () => {
        const h = await health(base)
        return h.status === 503 ? h : undefined
      },
      20_000,
    )
    expect(busDown.body.checks.bus).toMatchObject({ ok: false, code: "BUS_DISCONNECTED" })
    await new Promise((r) => setTimeout(r, 2_000))
    await nats.start()
    const back = await until(
      "/healthz to recover from the bus outage, a runtime answering",
      async () => {
        const h = await health(base)
        return h.status === 200 && h.body.checks.runtime?.ok === true ? h : undefined
      },
      30_000,
    )
    expect(back.body.status).toBe("ok")
    // The api told its watcher to reconnect once the bus was back (turns may have passed it by).
    await until(
      "the watcher to be told to reconnect",
      async () =>
        watched.some((w) => w.events.some((e) => e.event === "reconnect" && e.data.includes("bus_reconnected")))
          ? true
          : undefined,
      10_000,
    )

    const run = await runCompleted(() => base, c, 180_000)
    expect(run).toMatchObject({ targets_total: targets, targets_dialed: targets, targets_queued: 0 })
    await expectExactlyOnce(sql, c.runId, targets)

    // The top-up credited once.
    const credits = await sql`select 1 from ledger_entries e join payment_intents i on e.reference = 'intent:' || i.id
      where i.external_id = ${intent.external_id}`
    expect(credits).toHaveLength(1)

    // Every stored turn reached the watcher once, in order, across its reconnections.
    const stored = (await sql<{ seq: number }[]>`select seq from turns where run_id = ${c.runId} order by seq`).map(
      (t) => t.seq,
    )
    await until(
      "the watcher to have every turn",
      async () => (seen().length >= stored.length ? true : undefined),
      30_000,
    )
    watching = false
    for (const w of watched) w.close()
    expect(seen().map((t) => t.seq)).toEqual(stored)
  }, 400_000)
})
