// Patch-in through the real server, its in-process runtime and the sim carrier: a live call's
// callee is moved into a conference with the operator and the agent's call ends as handed_off;
// unknown, finished and another workspace's calls are 404; a second patch-in is 409 CALL_HANDED_OFF.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, HELD_RUNTIME_ENV, type Session, SYSTEM_KEY } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

// A callee asking for a human holds for a decision 1000 s × 0.01 = 10 s: time enough to patch them in.
const ENV = HELD_RUNTIME_ENV

let srv: TestServer
let a: ReturnType<typeof api>

beforeAll(async () => {
  srv = await sharedTestServer({ env: ENV })
  a = api(srv)
})
afterAll(async () => srv?.stop())

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const call = async (method: string, path: string, s: { token: string }, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

const patchIn = async (tenantId: number, body: Json, key = SYSTEM_KEY) => {
  const res = await fetch(`${srv.url}/api/internal/outreach/patch-in`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-system-key": key, "x-tenant-id": String(tenantId) },
    body: JSON.stringify(body),
  })
  return { status: res.status, body: (await res.json()) as Json }
}

async function funded(): Promise<Session> {
  const s = await a.signup({ country: "US" })
  const intent = (await call("POST", "/billing/topup", s, { amount_minor: 1_000_000 })).body
  await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
  return s
}

async function runCalling(s: Session, phones: string[]): Promise<number> {
  const w = (
    await call("POST", "/api/workflows", s, {
      nl_prompt: "Win back lapsed members with a discount of up to $20; book callbacks; escalate when asked.",
    })
  ).body
  await call("POST", `/api/workflows/${w.id}/audience`, s, { rows: phones.map((phone) => ({ phone })) })
  await call("PUT", `/api/workflows/${w.id}/compliance`, s, { consent_attestation_text: "Opted in." })
  const run = (await call("POST", `/api/workflows/${w.id}/run`, s)).body
  expect(run.status).toBe("running")
  return run.run_id as number
}

/** The run's call once a person answered it, as GET /api/runs/live shows it. */
async function answeredLiveCall(s: Session, runId: number): Promise<Json> {
  for (let i = 0; i < 150; i++) {
    const { body } = await call("GET", `/api/runs/live?run_id=${runId}`, s)
    const c = (body.calls as Json[]).find((x) => x.answered_at !== null && x.turns > 0)
    if (c) return c
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error("no answered live call")
}

async function callRow(callId: number): Promise<{ status: string; outcome: string | null }> {
  for (let i = 0; i < 100; i++) {
    const [c] = await srv.sql<[{ status: string; outcome: string | null }]>`
      select status, outcome from calls where id = ${callId}`
    if (c.status === "ended") return c
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`call ${callId} did not end`)
}

describe("patch-in on the sim carrier", () => {
  it("moves the callee into a recorded conference with the default operator; the call ends handed_off", async () => {
    const s = await funded()
    const runId = await runCalling(s, ["+12025550109"])
    const live = await answeredLiveCall(s, runId)
    const r = await patchIn(s.tenantId, { call_uuid: live.call_id })
    expect(r.status).toBe(200)
    expect(r.body).toMatchObject({
      call_id: live.call_id,
      run_id: runId,
      status: "handed_off",
      conference_id: expect.stringMatching(/^sim-conf-/),
      operator_number: "+12025550189",
      recorded: true,
    })
    const row = await callRow(live.call_id)
    expect(row).toEqual({ status: "ended", outcome: "handed_off" })
    // Billed like any call: connected time up to the handoff.
    const [billed] = await srv.sql<[{ connected_seconds: number }]>`
      select connected_seconds from calls where id = ${live.call_id}`
    expect(billed.connected_seconds).toBeGreaterThan(0)

    const again = await patchIn(s.tenantId, { call_uuid: live.call_id })
    expect(again.status).toBe(409)
    expect(again.body.code).toBe("CALL_HANDED_OFF")
  })

  it("dials the operator_number given instead of the default", async () => {
    const s = await funded()
    const runId = await runCalling(s, ["+12025550119"])
    const live = await answeredLiveCall(s, runId)
    const r = await patchIn(s.tenantId, { call_uuid: String(live.call_id), operator_number: "+12025550177" })
    expect(r.status).toBe(200)
    expect(r.body.operator_number).toBe("+12025550177")
    expect((await callRow(live.call_id)).outcome).toBe("handed_off")
  })

  it("an operator who does not answer: 502, and the call ends handoff_failed (the callee is released)", async () => {
    const s = await funded()
    const runId = await runCalling(s, ["+12025550139"])
    const live = await answeredLiveCall(s, runId)
    const r = await patchIn(s.tenantId, { call_uuid: live.call_id, operator_number: "+12025550170" })
    expect(r.status).toBe(502)
    expect(r.body.code).toBe("GATEWAY_UNAVAILABLE")
    expect(await callRow(live.call_id)).toEqual({ status: "ended", outcome: "handoff_failed" })
  })

  it("404 for an unknown call, another workspace's live call and a finished one", async () => {
    const s = await funded()
    const other = await funded()
    const runId = await runCalling(s, ["+12025550129"])
    const live = await answeredLiveCall(s, runId)
    expect((await patchIn(s.tenantId, { call_uuid: 987_654_321 })).status).toBe(404)
    const foreign = await patchIn(other.tenantId, { call_uuid: live.call_id })
    expect(foreign.status).toBe(404)
    expect(foreign.body.code).toBe("NOT_FOUND")

    // A call that ended without a handoff (the callee declined: digit 6).
    const run2 = await runCalling(s, ["+12025550136"])
    const [ended] = await (async () => {
      for (let i = 0; i < 150; i++) {
        const rows = await srv.sql<[{ id: number }]>`
          select id from calls where run_id = ${run2} and status = 'ended'`
        if (rows.length > 0) return rows
        await new Promise((r) => setTimeout(r, 100))
      }
      throw new Error("the call did not end")
    })()
    expect((await patchIn(s.tenantId, { call_uuid: ended.id })).status).toBe(404)
    // The first call is still patchable by its own workspace.
    expect((await patchIn(s.tenantId, { call_uuid: live.call_id })).status).toBe(200)
  })

  it("validates: call_uuid required, operator_number E.164, system key", async () => {
    const s = await funded()
    const bad = await patchIn(s.tenantId, {})
    expect(bad.status).toBe(422)
    expect(bad.body.code).toBe("VALIDATION_FAILED")
    expect((await patchIn(s.tenantId, { call_uuid: 1, operator_number: "call me" })).status).toBe(422)
    expect((await patchIn(s.tenantId, { call_uuid: 1 }, "wrong-key")).status).toBe(401)
  })
})
