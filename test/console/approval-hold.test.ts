// What the console's approval cards count down to: a pending approval carries context.hold_until,
// when the held callee stops waiting (APPROVAL_HOLD_MS, scaled like the call), well before
// expires_at, when it stops being decidable.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

const HOLD_MS = 600_000
const SCALE = 0.05

let srv: TestServer
let a: ReturnType<typeof api>
beforeAll(async () => {
  srv = await startTestServer({
    env: { ...FAST_RUNTIME_ENV, APPROVAL_HOLD_MS: String(HOLD_MS), SIM_TIME_SCALE: String(SCALE) },
  })
  a = api(srv)
})
afterAll(async () => srv?.stop())

type Json = Record<string, any>

const call = async (method: string, path: string, s: Session, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

describe("a pending approval's hold", () => {
  it("is in context.hold_until: created_at plus the scaled hold, before expires_at", async () => {
    const s = await a.signup({ country: "US" })
    const intent = (await call("POST", "/billing/topup", s, { amount_minor: 1_000_000 })).body
    await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
    const w = (
      await call("POST", "/api/workflows", s, {
        nl_prompt: "Win back lapsed members with a discount of up to $20; book callbacks; escalate when asked.",
      })
    ).body
    await call("POST", `/api/workflows/${w.id}/audience`, s, { rows: [{ phone: "+12025550107" }] })
    await call("PUT", `/api/workflows/${w.id}/compliance`, s, { consent_attestation_text: "Opted in." })
    expect((await call("POST", `/api/workflows/${w.id}/run`, s)).status).toBe(201)

    let ap: Json | undefined
    for (let i = 0; i < 300 && ap === undefined; i++) {
      const { body } = await call("GET", `/api/approvals?workflow_id=${w.id}&status=pending`, s)
      ap = (body.approvals as Json[])[0]
      if (ap === undefined) await new Promise((r) => setTimeout(r, 100))
    }
    expect(ap).toBeDefined()
    const holdUntil = Date.parse(ap!.context.hold_until)
    const created = Date.parse(ap!.created_at)
    // Stamped by the runtime a moment apart from the row's created_at (database clock).
    expect(Math.abs(holdUntil - created - HOLD_MS * SCALE)).toBeLessThan(2_000)
    expect(holdUntil).toBeLessThan(Date.parse(ap!.expires_at))
    expect(ap!.context.transcript.length).toBeGreaterThan(0)
    await call("POST", `/api/approvals/${ap!.id}/decide`, s, { decision: "deny" })
  })

  it("is documented on GET /api/approvals", async () => {
    const doc = (await (await fetch(`${srv.url}/openapi.json`)).json()) as Json
    expect(doc.paths["/api/approvals"].get.responses["200"].description).toContain("hold_until")
    expect(doc.paths["/console"].get).toBeDefined()
  })
})
