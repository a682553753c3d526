// A run survives the death of its runtime process: two runtime processes share a real Postgres and
// NATS, the run's owner is killed with SIGKILL mid-run, and the other takes the run over from
// Postgres, finishes it, dials every target exactly once, and charges every call exactly once.
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "vitest"
import { type SpawnedServer, spawnServer } from "../support/harness.js"
import { call, type Json, real, sharedDatabase, until, verifyEmail } from "../support/processes.js"

// Declared only with a real Postgres and NATS for separate processes to share; skipped otherwise.
describe.skipIf(!real)("run takeover across runtime processes (real Postgres and NATS)", () => {
  const suite = sharedDatabase()

  it("finishes the run on the survivor: every target dialed once, every call charged once", async () => {
    const { db, sql, processes } = suite
    const env = {
      ...db.env,
      NATS_URL: process.env.NATS_URL!,
      BUS_NAMESPACE: `takeover${randomBytes(5).toString("hex")}`,
      // Calls last a few seconds, so the kill lands while many are connected.
      SIM_TIME_SCALE: "0.05",
      CALLING_HOURS: "any",
      DIALER_CPS_PER_CARRIER: "100",
      DIALER_CPS_PER_TENANT: "100",
      RUN_LEASE_MS: "1500",
      RUN_CLAIM_INTERVAL_MS: "250",
      APPROVAL_HOLD_MS: "5000",
      APPROVAL_HOLD_FLOOR_MS: "0",
    }
    const apiProc = await spawnServer({ role: "api", env })
    processes.push(apiProc)
    const base = apiProc.url!
    // Both runtime processes are up before the run starts; whichever claims it is the one killed.
    const runtimes = await Promise.all([spawnServer({ role: "runtime", env }), spawnServer({ role: "runtime", env })])
    processes.push(...runtimes)
    const instanceOf = (p: SpawnedServer) => p.lines.find((l) => l["msg"] === "runtime host started")?.["instance"]

    const email = `takeover-${randomBytes(4).toString("hex")}@example.com`
    expect(
      (await call(base, "POST", "/auth/signup", { body: { email, password: "correct horse battery", country: "US" } }))
        .status,
    ).toBe(201)
    await verifyEmail(base, db.env.DATA_DIR!, email)
    const token = (await call(base, "POST", "/auth/login", { body: { email, password: "correct horse battery" } })).body
      .token as string
    const intent = (await call(base, "POST", "/billing/topup", { token, body: { amount_minor: 5_000_000 } })).body
    expect(
      (
        await call(base, "POST", "/billing/webhooks/stub", {
          body: { external_id: intent.external_id, status: "succeeded" },
        })
      ).status,
    ).toBe(200)

    // Digits 3–6 end in a final outcome on the first attempt, so "once" is exact.
    const rows = Array.from({ length: 40 }, (_, i) => ({
      phone: `+1202555${String(1000 + i * 10 + 3 + (i % 4)).padStart(4, "0")}`,
      name: `Callee ${i}`,
    }))
    const w = (
      await call(base, "POST", "/api/workflows", {
        token,
        body: { nl_prompt: "Call our members and invite them to renew their plan." },
      })
    ).body
    expect((await call(base, "POST", `/api/workflows/${w.id}/audience`, { token, body: { rows } })).body.accepted).toBe(
      40,
    )
    expect(
      (
        await call(base, "PUT", `/api/workflows/${w.id}/compliance`, {
          token,
          body: { consent_attestation_text: "Opted in." },
        })
      ).status,
    ).toBe(200)
    const started = await call(base, "POST", `/api/workflows/${w.id}/run`, { token })
    expect(started.status).toBe(201)
    const runId = started.body.run_id as number

    // Let one runtime own the run and get calls connected; then kill it.
    const owner = await until(
      "a runtime to own the run with calls connected",
      async () => {
        const [r] = await sql<[{ owner_instance: string | null; connected: number }?]>`
        select r.owner_instance,
          (select count(*)::int from calls c where c.run_id = r.id and c.status = 'connected') as connected
        from runs r where r.id = ${runId}`
        return r?.owner_instance && r.connected >= 3 ? r.owner_instance : undefined
      },
      20_000,
    )
    const first = runtimes.find((p) => instanceOf(p) === owner)!
    expect(first).toBeDefined()
    first.child.kill("SIGKILL")
    await first.exited
    const [{ in_flight }] = await sql<
      [{ in_flight: number }]
    >`select count(*)::int as in_flight from calls where run_id = ${runId} and status <> 'ended'`
    expect(in_flight).toBeGreaterThan(0)

    const run = await until(
      "the run to complete on the survivor",
      async () => {
        const { body } = await call(base, "GET", `/api/workflows/${w.id}/runs`, { token })
        const r = (body.runs as Json[]).find((x) => x.id === runId)
        return r?.status === "completed" ? r : undefined
      },
      60_000,
    )
    expect(run).toMatchObject({ targets_total: 40, targets_dialed: 40, targets_queued: 0 })

    const [{ owner_instance }] = await sql<
      [{ owner_instance: string | null }]
    >`select owner_instance from runs where id = ${runId}`
    expect(owner_instance).toBeNull()
    const moved = await sql`select 1 from dial_decisions where run_id = ${runId} and reason = 'owner_lost'`
    expect(moved.length).toBeGreaterThan(0)
    expect(moved.length).toBe(in_flight)
    // The survivor, not the dead owner, finished those calls.
    const finishers = await sql<
      { owner_instance: string }[]
    >`select distinct owner_instance from calls where run_id = ${runId} and outcome = 'interrupted'`
    expect(finishers.map((f) => f.owner_instance)).not.toContain(owner)

    // Every target dialed exactly once.
    const perTarget = await sql<
      { run_target_id: number; n: number }[]
    >`select run_target_id, count(*)::int as n from calls where run_id = ${runId} group by run_target_id`
    expect(perTarget).toHaveLength(40)
    for (const t of perTarget) expect(t.n).toBe(1)
    const unfinished = await sql`select 1 from run_targets where run_id = ${runId} and status <> 'done'`
    expect(unfinished).toHaveLength(0)

    // Every call charged exactly once: at most one reservation (exactly one once it was answered;
    // a call cut off before its reservation was made holds none), at most one release, settled.
    const calls = await sql<
      { id: number; status: string; answered_at: Date | null }[]
    >`select id, status, answered_at from calls where run_id = ${runId}`
    for (const c of calls) {
      expect(c.status).toBe("ended")
      const entries = await sql<{ kind: string }[]>`select kind from ledger_entries where reference = ${`call:${c.id}`}`
      const reservations = entries.filter((e) => e.kind === "call_reservation").length
      expect(reservations, `call ${c.id}`).toBe(c.answered_at === null ? Math.min(reservations, 1) : 1)
      expect(entries.filter((e) => e.kind === "call_release").length, `call ${c.id}`).toBeLessThanOrEqual(reservations)
      const [res] = await sql<
        [{ status: string }?]
      >`select status from usage_reservations where call_ref = ${`call:${c.id}`}`
      expect(res?.status, `call ${c.id}`).not.toBe("reserved")
    }
    // Every slot given back to the row it was counted in, the dead owner's included.
    const [slots] = await sql<[{ n: number }]>`select coalesce(sum(in_use), 0)::int as n from dial_slot_counts`
    expect(slots.n).toBe(0)
    const [wallet] = await sql<[{ balance_minor: number; sum: number }]>`
      select w.balance_minor,
        (select sum(amount_minor) from ledger_entries l where l.tenant_id = w.tenant_id)::bigint as sum
      from wallets w join users u on u.tenant_id = w.tenant_id where u.email = ${email}`
    expect(wallet.balance_minor).toBe(wallet.sum)
  }, 120_000)
})
