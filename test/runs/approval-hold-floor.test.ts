// A held callee waits for a person in real time: the hold is scaled like the rest of the call, but
// never under APPROVAL_HOLD_FLOOR_MS (20 s by default), so the README's SIM_TIME_SCALE=0.1 leaves a
// supervisor 20 s, not 3 s. Through the real server with the product's default hold and floor.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { realHoldMs } from "../../runtime/actors/run-scope.js"
import { loadConfig } from "../../src/platform/config.js"
import { api } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

describe("realHoldMs", () => {
  const at = (approvalHoldMs: number, timeScale: number, approvalHoldFloorMs = 20_000) =>
    realHoldMs({ approvalHoldMs, timeScale, approvalHoldFloorMs } as Parameters<typeof realHoldMs>[0])
  it("scales the hold but not under the floor, nor under a hold shorter than the floor", () => {
    expect(at(30_000, 1)).toBe(30_000)
    expect(at(30_000, 0.1)).toBe(20_000)
    expect(at(30_000, 0.01)).toBe(20_000)
    expect(at(1_000_000, 0.1)).toBe(100_000)
    expect(at(5_000, 0.1)).toBe(5_000)
    expect(at(30_000, 0.1, 0)).toBe(3_000)
  })
  it("has a 20 s floor unless set", () => {
    expect(loadConfig({}).approvalHoldFloorMs).toBe(20_000)
    expect(loadConfig({ APPROVAL_HOLD_FLOOR_MS: "0" }).approvalHoldFloorMs).toBe(0)
  })
})

describe("at the README's SIM_TIME_SCALE=0.1", () => {
  let srv: TestServer
  beforeAll(async () => {
    srv = await startTestServer({ env: { SIM_TIME_SCALE: "0.1", CALLING_HOURS: "any", RUN_CLAIM_INTERVAL_MS: "200" } })
  })
  afterAll(async () => srv?.stop())

  it("a held callee waits 20 s of real time for the decision", { timeout: 90_000 }, async () => {
    const a = api(srv)
    const s = await a.signup({ country: "US" })
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
      return { status: res.status, body: (await res.json()) as Json }
    }
    const intent = (await call("POST", "/billing/topup", { amount_minor: 1_000_000 })).body
    await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
    const w = (
      await call("POST", "/api/workflows", {
        nl_prompt: "Win back lapsed members with a discount of up to $20; book callbacks; escalate when asked.",
      })
    ).body
    await call("POST", `/api/workflows/${w.id}/audience`, { rows: [{ phone: "+12025550107" }] })
    await call("PUT", `/api/workflows/${w.id}/compliance`, { consent_attestation_text: "Opted in." })
    expect((await call("POST", `/api/workflows/${w.id}/run`)).status).toBe(201)
    let ap: Json | undefined
    for (let i = 0; i < 600 && ap === undefined; i++) {
      ap = (await call("GET", `/api/approvals?workflow_id=${w.id}&status=pending`)).body.approvals[0]
      if (ap === undefined) await new Promise((r) => setTimeout(r, 100))
    }
    expect(ap).toBeDefined()
    const held = Date.parse(ap!.context.hold_until) - Date.parse(ap!.created_at)
    expect(held).toBeGreaterThanOrEqual(19_000)
    expect(held).toBeLessThanOrEqual(21_000)
    // Still decidable well past what the scaled hold (3 s) would have allowed; the agent goes on.
    await new Promise((r) => setTimeout(r, 4_000))
    const decided = await call("POST", `/api/approvals/${ap!.id}/decide`, { decision: "approve" })
    expect(decided.status).toBe(200)
    const [c] = await srv.sql<[{ status: string }]>`select status from calls where id = ${ap!.call_id}`
    expect(c.status).not.toBe("ended")
  })
})
