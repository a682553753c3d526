// An approval's expiry survives a runtime restart: its actor's snapshot is in Postgres, the next
// runtime process to own the run restores it, re-arms the timer with what is left, and expires it.
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "vitest"
import { spawnServer } from "../support/harness.js"
import { call, type Json, real, sharedDatabase, until, verifyEmail } from "../support/processes.js"

// Declared only with a real Postgres and NATS for separate processes to share; skipped otherwise.
describe.skipIf(!real)("approval expiry across a runtime restart (real Postgres and NATS)", () => {
  const suite = sharedDatabase()

  it("is expired by the restored actor on the next runtime process", async () => {
    const { db, sql, processes } = suite
    const env = {
      ...db.env,
      NATS_URL: process.env.NATS_URL!,
      BUS_NAMESPACE: `expiry${randomBytes(5).toString("hex")}`,
      SIM_TIME_SCALE: "0.01",
      CALLING_HOURS: "any",
      DIALER_CPS_PER_CARRIER: "100",
      DIALER_CPS_PER_TENANT: "100",
      RUN_CLAIM_INTERVAL_MS: "200",
      // The call stops holding at once; the approval stays decidable for 8 s.
      APPROVAL_HOLD_MS: "10",
      APPROVAL_TTL_MS: "8000",
      // The unanswered target's retry keeps the run going across the restart.
      DIALER_RETRY_BACKOFF_MS: "6000000",
    }
    const apiProc = await spawnServer({ role: "api", env })
    const first = await spawnServer({ role: "runtime", env })
    processes.push(apiProc, first)
    const base = apiProc.url!

    const email = `expiry-${randomBytes(4).toString("hex")}@example.com`
    await call(base, "POST", "/auth/signup", { body: { email, password: "correct horse battery", country: "US" } })
    await verifyEmail(base, db.env.DATA_DIR!, email)
    const token = (await call(base, "POST", "/auth/login", { body: { email, password: "correct horse battery" } })).body
      .token as string
    const intent = (await call(base, "POST", "/billing/topup", { token, body: { amount_minor: 1_000_000 } })).body
    await call(base, "POST", "/billing/webhooks/stub", {
      body: { external_id: intent.external_id, status: "succeeded" },
    })
    const w = (
      await call(base, "POST", "/api/workflows", {
        token,
        body: { nl_prompt: "Win back members with a discount of up to $20." },
      })
    ).body
    await call(base, "POST", `/api/workflows/${w.id}/audience`, {
      token,
      body: { rows: [{ phone: "+12025550307" }, { phone: "+12025550310" }] },
    })
    await call(base, "PUT", `/api/workflows/${w.id}/compliance`, {
      token,
      body: { consent_attestation_text: "Opted in." },
    })
    const run = (await call(base, "POST", `/api/workflows/${w.id}/run`, { token })).body

    // The concession call ends owing its decision; its approval's actor persisted a pending snapshot.
    const approval = await until(
      "a pending approval with a persisted snapshot",
      async () => {
        const [a] = await sql<
          [{ id: number; expires_at: Date; snapshot: Json | null }?]
        >`select id, expires_at, snapshot from approvals where run_id = ${run.run_id}`
        return a?.snapshot?.value === "pending" ? a : undefined
      },
      20_000,
    )
    await until(
      "the concession call to end and the other target to wait for its retry",
      async () => {
        const [r] = await sql<[{ open: number; waiting: number }]>`
        select (select count(*)::int from calls where run_id = ${run.run_id} and status <> 'ended') as open,
               (select count(*)::int from run_targets where run_id = ${run.run_id} and status = 'waiting') as waiting`
        return r.open === 0 && r.waiting === 1 ? true : undefined
      },
      20_000,
    )
    expect(approval.expires_at.getTime()).toBeGreaterThan(Date.now() + 1000)

    // Restart: the first runtime stops (handing the run back), a new one takes the run.
    first.child.kill("SIGTERM")
    await first.exited
    const [released] = await sql<
      [{ owner_instance: string | null; status: string }]
    >`select owner_instance, status from runs where id = ${run.run_id}`
    expect(released).toEqual({ owner_instance: null, status: "running" })
    const second = await spawnServer({ role: "runtime", env })
    processes.push(second)
    await until(
      "the new runtime to own the run",
      async () => {
        const [r] = await sql<
          [{ owner_instance: string | null }]
        >`select owner_instance from runs where id = ${run.run_id}`
        return r.owner_instance !== null ? true : undefined
      },
      10_000,
    )

    const expired = await until(
      "the restored actor to expire the approval",
      async () => {
        const [a] = await sql<
          [{ status: string; snapshot: Json }]
        >`select status, snapshot from approvals where id = ${approval.id}`
        return a.status === "expired" && a.snapshot?.value === "expired" ? a : undefined
      },
      20_000,
    )
    expect(expired.status).toBe("expired")
    // Not before its time.
    expect(Date.now()).toBeGreaterThanOrEqual(approval.expires_at.getTime())
    const decide = await call(base, "POST", `/api/approvals/${approval.id}/decide`, {
      token,
      body: { decision: "approve" },
    })
    expect(decide).toMatchObject({ status: 409, body: { code: "APPROVAL_EXPIRED" } })
  }, 90_000)
})
