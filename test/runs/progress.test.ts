// What a campaign overview reads, through the real server and its in-process runtime: the live view
// marks a call whose callee holds for a human (with the approval and when the hold ends) and names
// callee and campaign; a run shows its progress (targets done of the total, final outcomes), its
// spend so far and whether it has finished; a workflow says whether it may run and why not, by the
// same predicate POST run answers with, and its latest run's state.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, HELD_RUNTIME_ENV, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

// A call holds for a decision 1000 s × 0.01 = 10 s: it is on hold while the test looks.
const ENV = HELD_RUNTIME_ENV
const PROMPT = "Win back lapsed members with a discount of up to $20; book callbacks; escalate when asked."

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

async function funded(opts: { verify?: boolean } = {}): Promise<Session> {
  const s = await a.signup({ country: "US", ...opts })
  const intent = (await call("POST", "/billing/topup", s, { amount_minor: 1_000_000 })).body
  await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
  return s
}

describe("GET /api/runs/live", () => {
  it("marks a callee held for a decision (approval, hold end); names callee and campaign", async () => {
    const s = await funded()
    const w = (await call("POST", "/api/workflows", s, { nl_prompt: PROMPT })).body
    await call("POST", `/api/workflows/${w.id}/audience`, s, { rows: [{ phone: "+12025550107", name: "Ann Archer" }] })
    await call("PUT", `/api/workflows/${w.id}/compliance`, s, { consent_attestation_text: "Opted in." })
    const run = (await call("POST", `/api/workflows/${w.id}/run`, s)).body
    let held: Json | undefined
    for (let i = 0; i < 150 && held === undefined; i++) {
      held = ((await call("GET", "/api/runs/live", s)).body.calls as Json[]).find((c) => c.on_hold !== null)
      if (held === undefined) await new Promise((r) => setTimeout(r, 100))
    }
    expect(held).toBeDefined()
    const [ap] = (await call("GET", `/api/approvals?workflow_id=${w.id}&status=pending`, s)).body.approvals as Json[]
    expect(held).toMatchObject({
      run_id: run.run_id,
      workflow_id: w.id,
      workflow_name: w.name,
      target_name: "Ann Archer",
      status: "connected",
      on_hold: { approval_id: ap!.id, hold_until: ap!.context.hold_until },
    })
    expect(new Date(held!.on_hold.hold_until).toISOString()).toBe(held!.on_hold.hold_until)
    // Decided: the callee is no longer held (the call may still be talking).
    await call("POST", `/api/approvals/${ap!.id}/decide`, s, { decision: "approve" })
    const after = ((await call("GET", "/api/runs/live", s)).body.calls as Json[]).find(
      (c) => c.call_id === held!.call_id,
    )
    if (after !== undefined) expect(after.on_hold).toBeNull()
    // Another workspace sees none of it.
    const other = await funded()
    expect((await call("GET", "/api/runs/live", other)).body).toEqual({ count: 0, calls: [] })
  }, 30_000)
})

describe("a run's progress, spend and finish", () => {
  it("counts final outcomes and targets done, sums the spend, and says when it has finished", async () => {
    const s = await funded()
    const w = (await call("POST", "/api/workflows", s, { nl_prompt: PROMPT })).body
    // agrees, never answers (three attempts), declines, asks for a discount (approved while held)
    const phones = ["+12025550113", "+12025550120", "+12025550136", "+12025550147"]
    await call("POST", `/api/workflows/${w.id}/audience`, s, { rows: phones.map((phone) => ({ phone })) })
    await call("PUT", `/api/workflows/${w.id}/compliance`, s, { consent_attestation_text: "Opted in." })
    const { run_id: runId } = (await call("POST", `/api/workflows/${w.id}/run`, s)).body
    const runNow = async () => ((await call("GET", `/api/workflows/${w.id}/runs`, s)).body.runs as Json[])[0]!
    const early = await runNow()
    expect(early).toMatchObject({ id: runId, workflow_name: w.name, finished: false, targets_total: 4 })
    expect(early.spend).toMatchObject({ currency: "USD" })
    let ap: Json | undefined
    for (let i = 0; i < 150 && ap === undefined; i++) {
      ap = ((await call("GET", `/api/approvals?workflow_id=${w.id}&status=pending`, s)).body.approvals as Json[])[0]
      if (ap === undefined) await new Promise((r) => setTimeout(r, 100))
    }
    await call("POST", `/api/approvals/${ap!.id}/decide`, s, { decision: "approve" })
    await expect.poll(async () => (await runNow()).status, { timeout: 30_000 }).toBe("completed")
    // Analyses charge the wallet after the calls end: the spend settles once every one is stored.
    await expect
      .poll(
        async () =>
          ((await call("GET", `/api/runs/${runId}/results`, s)).body.results as Json[]).every(
            (r) => r.analysis_status !== "pending",
          ),
        { timeout: 20_000 },
      )
      .toBe(true)
    const run = await runNow()
    expect(run).toMatchObject({
      status: "completed",
      finished: true,
      targets_total: 4,
      targets_done: 4,
      targets_queued: 0,
      targets_dialing: 0,
      targets_dialed: 4,
      targets_connected: 3,
    })
    expect(run.outcomes).toEqual({ agreed: 1, no_answer: 1, declined: 1, agreed_with_concession: 1 })
    const results = (await call("GET", `/api/runs/${runId}/results`, s)).body.results as Json[]
    const total = results.reduce((n, r) => n + r.cost_minor, 0)
    const [{ calls }] = await srv.sql<[{ calls: number }]>`
      select coalesce(sum(cost_minor), 0)::int as calls from calls where run_id = ${runId}`
    expect(calls).toBeGreaterThan(0)
    expect(run.spend).toEqual({
      calls_minor: calls,
      analyses_minor: total - calls,
      total_minor: total,
      currency: "USD",
    })
  }, 60_000)
})

describe("a workflow's readiness and latest run", () => {
  it("says what is missing as POST run's 409 does, what else blocks a run, and when it finished", async () => {
    const s = await funded()
    const w = (await call("POST", "/api/workflows", s, { nl_prompt: PROMPT })).body
    const get = async () => (await call("GET", `/api/workflows/${w.id}`, s)).body
    const fresh = await get()
    expect(fresh.readiness).toEqual({
      ready: false,
      missing: ["audience", "compliance"],
      blocked_by: null,
      can_run: false,
    })
    expect(fresh.latest_run).toBeNull()
    const refused = await call("POST", `/api/workflows/${w.id}/run`, s)
    expect(refused).toMatchObject({ status: 409, body: { code: "WORKFLOW_NOT_READY" } })
    expect(refused.body.missing ?? refused.body.details?.missing).toEqual(fresh.readiness.missing)

    await call("POST", `/api/workflows/${w.id}/audience`, s, { rows: [{ phone: "+12025550113" }] })
    await call("PUT", `/api/workflows/${w.id}/compliance`, s, { consent_attestation_text: "Opted in." })
    expect((await get()).readiness).toEqual({ ready: true, missing: [], blocked_by: null, can_run: true })

    const { run_id: runId } = (await call("POST", `/api/workflows/${w.id}/run`, s)).body
    const running = await get()
    if (running.latest_run.status === "running") {
      expect(running.readiness).toMatchObject({ ready: true, blocked_by: "run_in_progress", can_run: false })
      expect(running.latest_run).toMatchObject({ id: runId, finished: false, ended_at: null })
    }
    await expect.poll(async () => (await get()).latest_run.status, { timeout: 30_000 }).toBe("completed")
    const done = await get()
    expect(done.status).toBe("live")
    expect(done.latest_run).toMatchObject({ id: runId, run_id: runId, status: "completed", finished: true })
    expect(Date.parse(done.latest_run.ended_at)).not.toBeNaN()
    // Finished, a live workflow may run again: nothing blocks it.
    expect(done.readiness).toEqual({ ready: true, missing: [], blocked_by: null, can_run: true })

    expect((await call("POST", `/api/workflows/${w.id}/retire`, s)).status).toBe(200)
    expect((await get()).readiness).toMatchObject({ ready: true, blocked_by: "retired", can_run: false })
  }, 60_000)

  it("names an unverified owner's address as missing", async () => {
    const s = await funded({ verify: false })
    const w = (await call("POST", "/api/workflows", s, { nl_prompt: PROMPT })).body
    expect((await call("GET", `/api/workflows/${w.id}`, s)).body.readiness).toEqual({
      ready: false,
      missing: ["audience", "compliance", "email_verified"],
      blocked_by: null,
      can_run: false,
    })
  })
})
