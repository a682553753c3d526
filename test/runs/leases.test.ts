// Run leases (runtime/actors/leases.ts): a run whose lease lapsed while its driver here went on (Postgres
// away longer than the lease, so no renewal) is claimed back by the same process without a second
// driver: two drivers of one run took each other's calls for gone and completed the run while a
// call was still talking (the fault suite's unfinished targets). A driver that lost the lease, or
// none at all, is replaced as before.
import pino from "pino"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runLeases } from "../../runtime/actors/leases.js"
import type { RunDriver } from "../../runtime/actors/run-driver.js"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

const ME = "leases-test-instance"

/** Leases of this "process" over `sql`, recording the runs it would drive in `driven`. */
function leasesOf(sql: TestServer["sql"], drivers: Map<number, RunDriver>, stopping: boolean, driven: number[]) {
  return runLeases({
    sql,
    log: pino({ level: "silent" }),
    me: ME,
    leaseMs: 15_000,
    drivers,
    stopping: () => stopping,
    drive: async (claimed) => void driven.push(claimed.id),
  })
}

describe("claiming a run back", () => {
  let srv: TestServer
  let owner: Session
  beforeAll(async () => {
    // The server's own runtime claims once a minute at most: the claims here are the test's.
    srv = await startTestServer({ env: { RUN_CLAIM_INTERVAL_MS: "60000" } })
    owner = await api(srv).signup()
  })
  afterAll(async () => srv?.stop())

  /** A running run of a new workflow whose lease, held by this "process", lapsed a second ago. */
  async function lapsedRun(): Promise<number> {
    const res = await api(srv).call("POST", "/api/workflows", {
      token: owner.token,
      body: { nl_prompt: "Check in with our customers." },
    })
    expect(res.status).toBe(201)
    const w = (await res.json()) as { id: number }
    const [run] = await srv.sql<[{ id: number }]>`
      insert into runs (tenant_id, workflow_id, status, owner_instance, lease_expires_at)
      values (${owner.tenantId}, ${w.id}, 'running', ${ME}, now() - interval '1 second') returning id`
    return run.id
  }

  async function claimWith(runId: number, driver: Partial<RunDriver> | undefined): Promise<number[]> {
    const driven: number[] = []
    const drivers = new Map<number, RunDriver>()
    if (driver !== undefined) drivers.set(runId, driver as RunDriver)
    const leases = leasesOf(srv.sql, drivers, false, driven)
    await leases.claim(runId)
    return driven
  }

  const lease = async (runId: number) =>
    (
      await srv.sql<[{ owner_instance: string | null; left_s: number }]>`
        select owner_instance, extract(epoch from lease_expires_at - now())::float8 as left_s from runs
        where id = ${runId}`
    )[0]

  it("keeps the driver that still runs it: the claim only renews the lease", async () => {
    const runId = await lapsedRun()
    expect(await claimWith(runId, { lost: false })).toEqual([])
    const l = await lease(runId)
    expect(l.owner_instance).toBe(ME)
    expect(l.left_s).toBeGreaterThan(10)
  })

  it("drives it anew when the driver here had lost the lease, or there is none", async () => {
    const lostOne = await lapsedRun()
    expect(await claimWith(lostOne, { lost: true })).toEqual([lostOne])
    const orphan = await lapsedRun()
    expect(await claimWith(orphan, undefined)).toEqual([orphan])
  })
})

describe("a process that is stopping", () => {
  it("claims nothing, and a claim for one run after a claim for any settles at once", async () => {
    const drivers = new Map<number, RunDriver>()
    const driven: number[] = []
    // The database is never reached: nothing is claimed while stopping.
    const leases = leasesOf({} as TestServer["sql"], drivers, true, driven)
    await leases.claim()
    // A wake for one run (or a call's end) asking for a claim: it spun in microtasks, forever.
    let settled = false
    void Promise.all([leases.claim(7), leases.claim(8)]).then(() => (settled = true))
    for (let i = 0; i < 100 && !settled; i++) await Promise.resolve()
    expect(settled).toBe(true)
    await leases.settled()
    expect(driven).toEqual([])
  })
})
