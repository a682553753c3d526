// Idempotency-Key across api processes: duplicates of one top-up sent at once to two api processes
// sharing a real Postgres make one payment intent, and every answer is that intent (first or
// replayed) or 409 IDEMPOTENCY_IN_PROGRESS; a retry on either process replays it afterwards.
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "vitest"
import { spawnServer } from "../support/harness.js"
import { type Json, real, sharedDatabase } from "../support/processes.js"

async function post(base: string, path: string, token: string, body: unknown, key: string) {
  const res = await fetch(base + path, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify(body),
  })
  return { status: res.status, body: (await res.json()) as Json, replayed: res.headers.get("idempotent-replayed") }
}

describe.skipIf(!real)("Idempotency-Key across two api processes (real Postgres and NATS)", () => {
  const suite = sharedDatabase()

  it("concurrent duplicate top-ups on both processes: one intent", async () => {
    const env = { ...suite.db.env, PAYMENTS: "stub" }
    const [a, b] = await Promise.all([spawnServer({ role: "api", env }), spawnServer({ role: "api", env })])
    suite.processes.push(a!, b!)
    const email = `idem-${randomBytes(4).toString("hex")}@example.com`
    const password = "correct horse battery staple"
    const signup = await fetch(`${a!.url}/auth/signup`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email, password }),
    })
    expect(signup.status).toBe(201)
    const login = await fetch(`${b!.url}/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email, password }),
    })
    const { token, tenant } = (await login.json()) as { token: string; tenant: { id: number } }

    for (let round = 0; round < 3; round++) {
      const key = `topup-${round}-${randomBytes(4).toString("hex")}`
      const body = { amount_minor: 5000 + round }
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) => post(i % 2 === 0 ? a!.url! : b!.url!, "/billing/topup", token, body, key)),
      )
      const made = answers.filter((r) => r.status === 201)
      expect(made.filter((r) => r.replayed === null)).toHaveLength(1)
      for (const r of made) expect(r.body.intent_id).toBe(made[0]!.body.intent_id)
      for (const r of answers.filter((x) => x.status !== 201)) expect(r.body.code).toBe("IDEMPOTENCY_IN_PROGRESS")
      for (const base of [a!.url!, b!.url!]) {
        const retry = await post(base, "/billing/topup", token, body, key)
        expect(retry).toMatchObject({ status: 201, replayed: "true" })
        expect(retry.body.intent_id).toBe(made[0]!.body.intent_id)
      }
    }
    const [{ n }] = await suite.sql<[{ n: number }]>`
      select count(*)::int as n from payment_intents where tenant_id = ${tenant.id}`
    expect(n).toBe(3)
  }, 90_000)
})
