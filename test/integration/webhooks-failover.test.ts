// A webhook delivery survives the death of the runtime process posting it: two runtime processes
// share a real Postgres and NATS, the receiver holds the first request open, the process holding
// it is killed with SIGKILL, and the other posts the event again once the lease runs out (at least
// once, same event id), recording one delivered attempt.
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "vitest"
import { loadConfig } from "../../src/platform/config.js"
import { emitEvent } from "../../src/webhooks/outbox.repo.js"
import { type SpawnedServer, spawnServer } from "../support/harness.js"
import { call, real, sharedDatabase, until } from "../support/processes.js"
import { createEndpoint, deliveryOf, signatureValid, startReceiver } from "../webhooks/delivery.support.js"

// Declared only with a real Postgres and NATS for separate processes to share; skipped otherwise.
describe.skipIf(!real)("webhook delivery across runtime processes (real Postgres and NATS)", () => {
  const suite = sharedDatabase()

  it("delivers an event another runtime process was killed while posting", async () => {
    const { db, sql, processes } = suite
    const env = {
      ...db.env,
      NATS_URL: process.env.NATS_URL!,
      BUS_NAMESPACE: `whfailover${randomBytes(5).toString("hex")}`,
      ALLOW_PRIVATE_PROVIDER_URLS: "true",
      // The lease is the timeout plus 5 s: the survivor may post 7 s after the claim.
      WEBHOOK_TIMEOUT_MS: "2000",
      WEBHOOK_RETRY_SCALE: "0.001",
    }
    // The first request is held open (the process posting it is about to die); later ones succeed.
    const receiver = await startReceiver((n) => (n === 1 ? "hang" : 200))
    try {
      const apiProc = await spawnServer({ role: "api", env })
      processes.push(apiProc)
      const runtimes = await Promise.all([spawnServer({ role: "runtime", env }), spawnServer({ role: "runtime", env })])
      processes.push(...runtimes)
      const instanceOf = (p: SpawnedServer) => p.lines.find((l) => l["msg"] === "runtime host started")?.["instance"]

      const email = `whfailover-${randomBytes(4).toString("hex")}@example.com`
      const password = "correct horse battery"
      expect(
        (await call(apiProc.url!, "POST", "/auth/signup", { body: { email, password, country: "US" } })).status,
      ).toBe(201)
      const tenantId = (await call(apiProc.url!, "POST", "/auth/login", { body: { email, password } })).body.tenant
        .id as number
      // The processes seal secrets under the key kept in the shared database (no master key set).
      const ep = await createEndpoint(sql, loadConfig({ DATA_DIR: db.env.DATA_DIR! }), tenantId, receiver.url)
      const eventId = await emitEvent(sql, { tenantId, type: "call.completed", data: { call_id: 1 } })

      const holder = await until(
        "a runtime process to post the event",
        async () => {
          const d = await deliveryOf(sql, eventId, ep.id)
          return receiver.received.length === 1 && d?.locked_by ? d.locked_by : undefined
        },
        20_000,
      )
      const victim = runtimes.find((p) => instanceOf(p) === holder)!
      const survivor = runtimes.find((p) => p !== victim)!
      expect(victim).toBeDefined()
      victim.child.kill("SIGKILL")
      await victim.exited

      const delivered = await until(
        "the survivor to deliver the event",
        async () => {
          const d = await deliveryOf(sql, eventId, ep.id)
          return d?.status === "delivered" ? d : undefined
        },
        30_000,
      )
      // The dead process recorded nothing; the survivor's attempt is the one on record.
      expect(delivered).toMatchObject({ attempts: 1, locked_by: null, last_status_code: 200 })
      const attempts = await sql`select attempt, outcome, status_code from webhook_attempts where event_id = ${eventId}`
      expect(attempts).toEqual([{ attempt: 1, outcome: "delivered", status_code: 200 }])
      // At least once: the same event, under the same id, signed afresh both times.
      expect(receiver.received).toHaveLength(2)
      for (const got of receiver.received) {
        expect(got.headers["x-svc-event-id"]).toBe(eventId)
        expect(signatureValid(got.body, got.headers["x-svc-signature"] as string, ep.secret)).toBe(true)
      }
      expect(receiver.received[1]!.body.equals(receiver.received[0]!.body)).toBe(true)
      // Only the survivor was alive to post the second time.
      expect(survivor.child.exitCode).toBeNull()
      // Not before the dead process's lease ran out.
      expect(receiver.received[1]!.at - receiver.received[0]!.at).toBeGreaterThanOrEqual(6_000)
    } finally {
      await receiver.close()
    }
  }, 90_000)
})
