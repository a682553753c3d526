// Graceful hand-over (docs/operations.md): SIGTERM on a runtime process lets its calls finish (or,
// past SHUTDOWN_TIMEOUT_MS, ends them itself, billed once), releases its runs and wakes another
// runtime process, which takes each within a second; SIGTERM on an api process ends its turn
// streams with a reconnect event, and the watchers resume on the other api process by
// Last-Event-ID without losing or repeating a turn. Two processes of each kind, real services.
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "vitest"
import type { TurnMessage } from "../../src/turns/turn.message.js"
import { type SpawnedServer, spawnServer } from "../support/harness.js"
import { real, sharedDatabase, until } from "../support/processes.js"
import { type SseClient, sse } from "../support/sse-client.js"
import { expectExactlyOnce, instanceOf, runCompleted, startCampaign } from "./ops.support.js"

const TARGETS = 24

const baseEnv = (db: Record<string, string>, extra: Record<string, string>) => ({
  ...db,
  NATS_URL: process.env.NATS_URL!,
  BUS_NAMESPACE: `handover${randomBytes(5).toString("hex")}`,
  CALLING_HOURS: "any",
  DIALER_CPS_PER_CARRIER: "100",
  DIALER_CPS_PER_TENANT: "100",
  APPROVAL_HOLD_MS: "5000",
  APPROVAL_HOLD_FLOOR_MS: "0",
  ...extra,
})

const timeOf = (p: SpawnedServer, msg: string, runId: number): number | undefined => {
  const line = p.lines.find((l) => l["msg"] === msg && l["run_id"] === runId)
  return line === undefined ? undefined : Date.parse(String(line["time"]))
}

/** Runs until one runtime owns the run with `connected` calls live; answers the owner and the other. */
async function ownerWithCalls(
  sql: ReturnType<typeof sharedDatabase>["sql"],
  runtimes: SpawnedServer[],
  runId: number,
  connected: number,
): Promise<[SpawnedServer, SpawnedServer]> {
  await until(
    "calls connected",
    async () => {
      const [r] = await sql<[{ n: number }]>`
        select count(*)::int as n from calls where run_id = ${runId} and status = 'connected'`
      return r.n >= connected ? true : undefined
    },
    30_000,
  )
  // Log lines are buffered: the claim's line may come a moment later.
  const owner = await until(
    "the owner's claim in its log",
    async () => runtimes.find((p) => timeOf(p, "run claimed", runId) !== undefined),
    5_000,
  )
  return [owner, runtimes.find((p) => p !== owner)!]
}

describe.skipIf(!real)("graceful hand-over (real Postgres and NATS)", () => {
  const suite = sharedDatabase()

  it("SIGTERM on a runtime: calls finish, the run moves within a second, none interrupted or redialed", async () => {
    const { db, sql, processes } = suite
    // Claim ticks far apart: only the hand-over's wake can make the survivor take the run in time.
    const env = baseEnv(db.env, {
      SIM_TIME_SCALE: "0.05",
      RUN_CLAIM_INTERVAL_MS: "10000",
      RUN_LEASE_MS: "3000",
      SHUTDOWN_TIMEOUT_MS: "30000",
      // A few calls at a time, so the survivor has targets left to dial.
      DIALER_MAX_CONCURRENT_PER_WORKFLOW: "6",
    })
    const api = await spawnServer({ role: "api", env })
    processes.push(api)
    const runtimes = await Promise.all([spawnServer({ role: "runtime", env }), spawnServer({ role: "runtime", env })])
    processes.push(...runtimes)
    const c = await startCampaign(api.url!, db.env.DATA_DIR!, TARGETS)
    const [owner, survivor] = await ownerWithCalls(sql, runtimes, c.runId, 3)

    owner.child.kill("SIGTERM")
    expect(await owner.exited).toBe(0)
    const handedAt = timeOf(owner, "run handed over", c.runId)
    expect(handedAt, "the owner released the run").toBeDefined()
    const claimedAt = await until(
      "the survivor to claim the run",
      async () => timeOf(survivor, "run claimed", c.runId),
      5_000,
    )
    expect(claimedAt - handedAt!).toBeLessThan(1_000)
    expect(instanceOf(survivor)).not.toBe(instanceOf(owner))

    const run = await runCompleted(() => api.url!, c, 90_000)
    expect(run).toMatchObject({ targets_total: TARGETS, targets_dialed: TARGETS, targets_queued: 0 })
    // The deadline sufficed: every call the owner held finished there, none was interrupted.
    const interrupted = await sql`select 1 from calls where run_id = ${c.runId} and outcome = 'interrupted'`
    expect(interrupted).toHaveLength(0)
    const moved = await sql`select 1 from dial_decisions where run_id = ${c.runId}
      and reason in ('owner_lost', 'shutdown')`
    expect(moved).toHaveLength(0)
    const byOwner = await sql<{ owner_instance: string }[]>`
      select distinct owner_instance from calls where run_id = ${c.runId}`
    expect(byOwner.map((r) => r.owner_instance).sort()).toEqual([instanceOf(owner), instanceOf(survivor)].sort())
    await expectExactlyOnce(sql, c.runId, TARGETS)
    survivor.child.kill("SIGTERM")
    expect(await survivor.exited).toBe(0)
  }, 150_000)

  it("past SHUTDOWN_TIMEOUT_MS the runtime ends its calls itself: interrupted, billed once, not redialed", async () => {
    const { db, sql, processes } = suite
    // Calls last far longer than the shutdown budget.
    const env = baseEnv(db.env, {
      SIM_TIME_SCALE: "0.2",
      RUN_CLAIM_INTERVAL_MS: "10000",
      RUN_LEASE_MS: "3000",
      SHUTDOWN_TIMEOUT_MS: "500",
      DIALER_MAX_CONCURRENT_PER_WORKFLOW: "3",
    })
    const api = await spawnServer({ role: "api", env })
    processes.push(api)
    const runtimes = await Promise.all([spawnServer({ role: "runtime", env }), spawnServer({ role: "runtime", env })])
    processes.push(...runtimes)
    const c = await startCampaign(api.url!, db.env.DATA_DIR!, 6)
    const [owner, survivor] = await ownerWithCalls(sql, runtimes, c.runId, 2)

    owner.child.kill("SIGTERM")
    expect(await owner.exited).toBe(0)
    const cut = await sql<
      { id: number; owner_instance: string; answered_at: Date | null; connected_seconds: number; cost_minor: number }[]
    >`
      select c.id, c.owner_instance, c.answered_at, c.connected_seconds, c.cost_minor from calls c
      join dial_decisions d on d.call_id = c.id and d.reason = 'shutdown'
      where c.run_id = ${c.runId} and c.outcome = 'interrupted' and c.status = 'ended'`
    // At least the calls that were connected; one still ringing is ended too, at no charge.
    expect(cut.filter((x) => x.answered_at !== null).length).toBeGreaterThanOrEqual(2)
    for (const x of cut) {
      // Ended by the process that held it, charged for the time it was connected.
      expect(x.owner_instance).toBe(instanceOf(owner))
      if (x.answered_at === null) expect(x.connected_seconds).toBe(0)
      else {
        expect(x.connected_seconds).toBeGreaterThan(0)
        expect(x.cost_minor).toBeGreaterThan(0)
      }
    }
    const [{ live }] = await sql<[{ live: number }]>`
      select count(*)::int as live from calls where run_id = ${c.runId} and status <> 'ended'
        and owner_instance = ${String(instanceOf(owner))}`
    expect(live).toBe(0)
    await until("the survivor to claim the run", async () => timeOf(survivor, "run claimed", c.runId), 5_000)

    await runCompleted(() => api.url!, c, 120_000)
    const lost = await sql`select 1 from dial_decisions where run_id = ${c.runId} and reason = 'owner_lost'`
    expect(lost).toHaveLength(0)
    await expectExactlyOnce(sql, c.runId, 6)
  }, 180_000)

  it("SIGTERM on an api: watchers are told to reconnect and resume on the other api, losing no turn", async () => {
    const { db, sql, processes } = suite
    const env = baseEnv(db.env, { SIM_TIME_SCALE: "0.05", RUN_CLAIM_INTERVAL_MS: "250" })
    const [apiA, apiB, runtime] = await Promise.all([
      spawnServer({ role: "api", env }),
      spawnServer({ role: "api", env }),
      spawnServer({ role: "runtime", env }),
    ])
    processes.push(apiA, apiB, runtime)
    const c = await startCampaign(apiA.url!, db.env.DATA_DIR!, 16)
    const auth = { authorization: `Bearer ${c.token}` }
    const path = `/api/runs/${c.runId}/turns/stream`
    const first = [sse(apiA.url! + path, auth), sse(apiA.url! + path, auth)]
    await Promise.all(first.map((w) => w.waitFor(5, 30_000)))

    apiA.child.kill("SIGTERM")
    await Promise.all(first.map((w) => w.ended))
    expect(await apiA.exited).toBe(0)
    const turnsOf = (w: SseClient) => w.events.filter((e) => e.event === undefined)
    const second: SseClient[] = []
    for (const w of first) {
      const last = w.events.at(-1)!
      // The stream's last frame told the client to reconnect soon; it carries no id.
      expect(last.event).toBe("reconnect")
      expect(last.id).toBeUndefined()
      expect(JSON.parse(last.data)).toMatchObject({ reason: "server_shutting_down" })
      const lastId = turnsOf(w).at(-1)!.id!
      second.push(sse(apiB.url! + path, { ...auth, "last-event-id": lastId }))
    }

    await runCompleted(() => apiB.url!, c, 90_000)
    const stored = await sql<{ seq: number }[]>`select seq from turns where run_id = ${c.runId} order by seq`
    const seqs = stored.map((t) => t.seq)
    for (const [i, w] of first.entries()) {
      const next = second[i]!
      await until(
        "the watcher to catch up",
        async () => (turnsOf(w).length + turnsOf(next).length >= seqs.length ? true : undefined),
        20_000,
      )
      const got = [...turnsOf(w), ...turnsOf(next)].map((e) => (JSON.parse(e.data) as TurnMessage).seq)
      // Every stored turn, once, in order, across the two processes.
      expect(got).toEqual(seqs)
      next.close()
    }
  }, 150_000)
})
