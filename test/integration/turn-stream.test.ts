// Live monitoring across processes: a runtime process dials a run while two api processes stream
// its turns over real NATS; both see every stored turn, in order, once.
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "vitest"
import type { TurnMessage } from "../../src/turns/turn.message.js"
import { spawnServer } from "../support/harness.js"
import { call, type Json, real, sharedDatabase, verifyEmail } from "../support/processes.js"
import { sse } from "../support/sse-client.js"

// Declared only with a real Postgres and NATS for separate processes to share; skipped otherwise.
describe.skipIf(!real)("turn streams from a runtime process to two api processes (real Postgres and NATS)", () => {
  const suite = sharedDatabase()

  it("delivers every turn of the run to watchers on both api processes", async () => {
    const { db, sql, processes } = suite
    const env = {
      ...db.env,
      NATS_URL: process.env.NATS_URL!,
      BUS_NAMESPACE: `stream${randomBytes(5).toString("hex")}`,
      SIM_TIME_SCALE: "0.02",
      CALLING_HOURS: "any",
      DIALER_CPS_PER_CARRIER: "100",
      DIALER_CPS_PER_TENANT: "100",
      RUN_CLAIM_INTERVAL_MS: "250",
    }
    const [apiA, apiB, runtime] = await Promise.all([
      spawnServer({ role: "api", env }),
      spawnServer({ role: "api", env }),
      spawnServer({ role: "runtime", env }),
    ])
    processes.push(apiA!, apiB!, runtime!)
    const a = apiA!.url!
    const b = apiB!.url!

    const email = `stream-${randomBytes(4).toString("hex")}@example.com`
    await call(a, "POST", "/auth/signup", { body: { email, password: "correct horse battery", country: "US" } })
    await verifyEmail(a, db.env.DATA_DIR!, email)
    const token = (await call(a, "POST", "/auth/login", { body: { email, password: "correct horse battery" } })).body
      .token as string
    const intent = (await call(a, "POST", "/billing/topup", { token, body: { amount_minor: 1_000_000 } })).body
    await call(a, "POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
    const w = (
      await call(a, "POST", "/api/workflows", { token, body: { nl_prompt: "Call customers about their renewal." } })
    ).body
    const rows = Array.from({ length: 10 }, (_, i) => ({
      phone: `+1202555${String(2000 + i * 10 + 3 + (i % 5)).padStart(4, "0")}`,
    }))
    await call(a, "POST", `/api/workflows/${w.id}/audience`, { token, body: { rows } })
    await call(a, "PUT", `/api/workflows/${w.id}/compliance`, {
      token,
      body: { consent_attestation_text: "Opted in." },
    })
    const run = (await call(a, "POST", `/api/workflows/${w.id}/run`, { token })).body
    expect(run.status).toBe("running")

    // Watchers join on both api processes while the run is under way.
    const url = (base: string) => `${base}/api/runs/${run.run_id}/turns/stream`
    const watchers = [
      sse(url(a), { authorization: `Bearer ${token}` }),
      sse(url(b), { authorization: `Bearer ${token}` }),
    ]
    await new Promise((r) => setTimeout(r, 300))
    watchers.push(sse(url(b), { authorization: `Bearer ${token}` }))

    const deadline = Date.now() + 60_000
    for (;;) {
      const { body } = await call(a, "GET", `/api/workflows/${w.id}/runs`, { token })
      if ((body.runs as Json[])[0]?.status === "completed") break
      if (Date.now() > deadline) throw new Error("run did not complete")
      await new Promise((r) => setTimeout(r, 200))
    }
    const stored = await sql<{ seq: number }[]>`select seq from turns where run_id = ${run.run_id} order by seq`
    expect(stored.length).toBeGreaterThan(30)
    const expected = stored.map((t) => t.seq)
    for (const watcher of watchers) {
      await watcher.waitFor(expected.length, 10_000)
      expect(watcher.json<TurnMessage>().map((t) => t.seq)).toEqual(expected)
      watcher.close()
    }
  }, 120_000)
})
