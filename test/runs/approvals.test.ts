// Approvals through the real server and its in-process runtime: proposals from live calls become
// pending approvals with context; approve and deny resume the conversation at once; a callback
// approved after the call ended is dialed again; every row of the approval state table; concurrent
// decisions (exactly one wins); filters for polling clients; tenant isolation.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, HELD_RUNTIME_ENV, type Session } from "../support/clients.js"
import { sharedTestServer, startTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
let a: ReturnType<typeof api>

// A call holds for a decision APPROVAL_HOLD_MS × SIM_TIME_SCALE: 1000 s × 0.01 = 10 s, time enough
// for a test to decide while the call is live.
const ENV = HELD_RUNTIME_ENV

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

async function funded(): Promise<Session> {
  const s = await a.signup({ country: "US" })
  const intent = (await call("POST", "/billing/topup", s, { amount_minor: 1_000_000 })).body
  await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
  return s
}

/** Starts a run calling `phones` and resolves with the ids needed to follow it. */
async function runCalling(s: Session, phones: string[]): Promise<{ workflowId: number; runId: number }> {
  const w = (
    await call("POST", "/api/workflows", s, {
      nl_prompt: "Win back lapsed members with a discount of up to $20; book callbacks; escalate when asked.",
    })
  ).body
  await call("POST", `/api/workflows/${w.id}/audience`, s, { rows: phones.map((phone) => ({ phone })) })
  await call("PUT", `/api/workflows/${w.id}/compliance`, s, { consent_attestation_text: "Opted in." })
  const run = (await call("POST", `/api/workflows/${w.id}/run`, s)).body
  expect(run.status).toBe("running")
  return { workflowId: w.id, runId: run.run_id }
}

async function pendingApproval(s: Session, workflowId: number, action: string): Promise<Json> {
  for (let i = 0; i < 150; i++) {
    const { body } = await call("GET", `/api/approvals?workflow_id=${workflowId}&status=pending`, s)
    const found = (body.approvals as Json[]).find((x) => x.proposed_action === action)
    if (found) return found
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`no pending ${action} approval`)
}

async function targetOutcome(
  runId: number,
  phone: string,
  until: (o: string | null) => boolean,
): Promise<string | null> {
  for (let i = 0; i < 200; i++) {
    const [t] = await srv.sql<
      [{ outcome: string | null; status: string }?]
    >`select outcome, status from run_targets where run_id = ${runId} and phone_e164 = ${phone}`
    if (t && until(t.outcome) && t.status !== "dialing") return t.outcome
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`target ${phone} did not reach its outcome`)
}

describe("a proposal on a live call", () => {
  it("becomes a pending approval with the proposal, its context and an expiry", async () => {
    const s = await funded()
    const { workflowId, runId } = await runCalling(s, ["+12025550107"])
    const ap = await pendingApproval(s, workflowId, "concession")
    expect(ap).toMatchObject({
      workflow_id: workflowId,
      run_id: runId,
      target_phone: "+12025550107",
      currency: "USD",
      status: "pending",
      decided_at: null,
      decided_by: null,
    })
    expect(ap.proposed_value_minor).toBeGreaterThan(0)
    expect(ap.proposed_value_minor).toBeLessThanOrEqual(2000)
    expect(ap.rationale.length).toBeGreaterThan(0)
    expect(ap.context.transcript.length).toBeGreaterThan(0)
    expect(Date.parse(ap.expires_at)).toBeGreaterThan(Date.now())
    // The caller heard a holding line before the approval was raised.
    const turns = await srv.sql<
      { speaker: string; text: string }[]
    >`select speaker, text from turns where call_id = ${ap.call_id} order by turn_index`
    expect(turns.at(-1)).toMatchObject({ speaker: "agent" })
    expect(turns.at(-1)!.text).toMatch(/check|moment/i)
    await call("POST", `/api/approvals/${ap.id}/decide`, s, { decision: "deny" })
  })

  it("resumes at once after approve: the agent offers the concession and the callee agrees", async () => {
    const s = await funded()
    const { workflowId, runId } = await runCalling(s, ["+12025550117"])
    const ap = await pendingApproval(s, workflowId, "concession")
    const decided = await call("POST", `/api/approvals/${ap.id}/decide`, s, {
      decision: "approve",
      note: "Fine for loyal members.",
    })
    expect(decided.status).toBe(200)
    expect(decided.body).toMatchObject({ id: ap.id, status: "approved", decided_by: s.userId })
    expect(Date.parse(decided.body.decided_at)).not.toBeNaN()
    expect(await targetOutcome(runId, "+12025550117", (o) => o === "agreed_with_concession")).toBe(
      "agreed_with_concession",
    )
    const [row] = await srv.sql<
      [{ status: string; decided_by: number; note: string }]
    >`select status, decided_by, note from approvals where id = ${ap.id}`
    expect(row).toEqual({ status: "approved", decided_by: s.userId, note: "Fine for loyal members." })
  })

  it("resumes after deny: the agent declines politely and the call ends without the concession", async () => {
    const s = await funded()
    const { workflowId, runId } = await runCalling(s, ["+12025550127"])
    const ap = await pendingApproval(s, workflowId, "concession")
    expect((await call("POST", `/api/approvals/${ap.id}/decide`, s, { decision: "deny" })).body.status).toBe("denied")
    const outcome = await targetOutcome(runId, "+12025550127", (o) => o !== null && o !== "pending_approval")
    expect(outcome).toBe("declined")
    const agentLines = await srv.sql<
      { text: string }[]
    >`select text from turns where call_id = ${ap.call_id} and speaker = 'agent' order by turn_index`
    expect(agentLines.some((l) => /can't|cannot|unable|not able/i.test(l.text))).toBe(true)
  })

  it("escalates when a human hand-off is approved", async () => {
    const s = await funded()
    const { workflowId, runId } = await runCalling(s, ["+12025550139"])
    const ap = await pendingApproval(s, workflowId, "escalate")
    await call("POST", `/api/approvals/${ap.id}/decide`, s, { decision: "approve" })
    expect(await targetOutcome(runId, "+12025550139", (o) => o === "escalated")).toBe("escalated")
  })
})

describe("deciding", () => {
  it("lets exactly one of many concurrent decisions win; the rest get 409", async () => {
    const s = await funded()
    const { workflowId } = await runCalling(s, ["+12025550147"])
    const ap = await pendingApproval(s, workflowId, "concession")
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        call("POST", `/api/approvals/${ap.id}/decide`, s, { decision: i % 2 ? "approve" : "deny" }),
      ),
    )
    const won = answers.filter((r) => r.status === 200)
    expect(won).toHaveLength(1)
    for (const r of answers.filter((x) => x.status !== 200))
      expect(r).toMatchObject({ status: 409, body: { code: "APPROVAL_ALREADY_DECIDED" } })
    const [row] = await srv.sql<[{ status: string }]>`select status from approvals where id = ${ap.id}`
    expect(row.status).toBe(won[0]!.body.status)
  })

  it("answers 409 for an expired approval, 404 outside the workspace, 422 for bad input", async () => {
    const s = await funded()
    const other = await funded()
    const { workflowId } = await runCalling(s, ["+12025550157"])
    const ap = await pendingApproval(s, workflowId, "concession")
    expect((await call("POST", `/api/approvals/${ap.id}/decide`, other, { decision: "approve" })).status).toBe(404)
    expect((await call("POST", `/api/approvals/999999999/decide`, s, { decision: "approve" })).status).toBe(404)
    expect((await call("POST", `/api/approvals/${ap.id}/decide`, s, { decision: "maybe" })).status).toBe(422)
    expect(
      (await call("POST", `/api/approvals/${ap.id}/decide`, s, { decision: "approve", note: "x".repeat(501) })).status,
    ).toBe(422)
    await srv.sql`update approvals set expires_at = now() - interval '1 second' where id = ${ap.id}`
    const late = await call("POST", `/api/approvals/${ap.id}/decide`, s, { decision: "approve" })
    expect(late).toMatchObject({ status: 409, body: { code: "APPROVAL_EXPIRED" } })
    const listed = await call("GET", `/api/approvals?workflow_id=${workflowId}`, s)
    expect((listed.body.approvals as Json[]).find((x) => x.id === ap.id)!.status).toBe("expired")
    const [row] = await srv.sql<[{ decided_at: Date | null }]>`select decided_at from approvals where id = ${ap.id}`
    expect(row.decided_at).toBeNull()
  })

  it("books a callback approved during the call as a new attempt", async () => {
    const s = await funded()
    const { workflowId, runId } = await runCalling(s, ["+12025550168"])
    const ap = await pendingApproval(s, workflowId, "callback")
    expect((await call("POST", `/api/approvals/${ap.id}/decide`, s, { decision: "approve" })).status).toBe(200)
    await targetOutcome(runId, "+12025550168", (o) => o === "callback_scheduled")
    const [t] = await srv.sql<
      [{ status: string; next_attempt_at: Date }]
    >`select status, next_attempt_at from run_targets where run_id = ${runId}`
    expect(t.status).toBe("waiting")
    expect(t.next_attempt_at.getTime()).toBeGreaterThan(Date.now())
    const [d] = await srv.sql<
      [{ reason: string }]
    >`select reason from dial_decisions where run_id = ${runId} and decision = 'retry'`
    expect(d.reason).toBe("callback_scheduled")
  })

  it("schedules a callback approved after its call ended, reopening the finished run", async () => {
    // Calls here give up waiting almost at once, so they end owing the decision.
    const quick = await startTestServer({ env: { ...ENV, APPROVAL_HOLD_MS: "10" } })
    try {
      const b = api(quick)
      const s = await b.signup({ country: "US" })
      const req = async (method: string, path: string, body?: unknown) =>
        (await b.call(method, path, { token: s.token, ...(body !== undefined && { body }) })).json() as Promise<Json>
      const intent = await req("POST", "/billing/topup", { amount_minor: 1_000_000 })
      await b.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
      const w = await req("POST", "/api/workflows", { nl_prompt: "Offer callbacks to members who are busy." })
      await req("POST", `/api/workflows/${w.id}/audience`, { rows: [{ phone: "+12025550178" }] })
      await req("PUT", `/api/workflows/${w.id}/compliance`, { consent_attestation_text: "Opted in." })
      const run = await req("POST", `/api/workflows/${w.id}/run`)
      let completed = false
      for (let i = 0; i < 200 && !completed; i++) {
        const [r] = await quick.sql<[{ status: string }]>`select status from runs where id = ${run.run_id}`
        completed = r.status === "completed"
        if (!completed) await new Promise((r) => setTimeout(r, 100))
      }
      expect(completed).toBe(true)
      const [t0] = await quick.sql<[{ outcome: string }]>`select outcome from run_targets where run_id = ${run.run_id}`
      expect(t0.outcome).toBe("pending_approval")
      // The call's analysis is stored before the decision: no callback was scheduled yet.
      const analysis = () =>
        quick.sql<{ status: string; callback_at: Date | null }[]>`
          select a.status, a.callback_at from call_analyses a join calls c on c.id = a.call_id
          where c.run_id = ${run.run_id}`
      await expect.poll(async () => (await analysis())[0]?.status, { timeout: 20_000 }).toBe("done")
      expect((await analysis())[0]!.callback_at).toBeNull()
      const { approvals } = await req("GET", `/api/approvals?workflow_id=${w.id}&status=pending`)
      expect(approvals).toHaveLength(1)
      const decided = await b.call("POST", `/api/approvals/${approvals[0].id}/decide`, {
        token: s.token,
        body: { decision: "approve" },
      })
      expect(decided.status).toBe(200)
      const [t] = await quick.sql<
        [{ status: string; outcome: string }]
      >`select status, outcome from run_targets where run_id = ${run.run_id}`
      expect(t).toEqual({ status: "waiting", outcome: "callback_scheduled" })
      // The stored analysis now says when the callee will be called back.
      const [next] = await quick.sql<[{ next_attempt_at: Date }]>`
        select next_attempt_at from run_targets where run_id = ${run.run_id}`
      expect((await analysis())[0]!.callback_at).toEqual(next.next_attempt_at)
      const [r] = await quick.sql<
        [{ status: string; ended_at: Date | null }]
      >`select status, ended_at from runs where id = ${run.run_id}`
      expect(r).toEqual({ status: "running", ended_at: null })
    } finally {
      await quick.stop()
    }
  })
})

describe("listing for polling clients", () => {
  it("filters by workflow, status and decision time, newest first, within the workspace", async () => {
    const s = await funded()
    const other = await funded()
    const { workflowId } = await runCalling(s, ["+12025550177", "+12025550187"])
    const first = await pendingApproval(s, workflowId, "concession")
    const since = new Date().toISOString()
    await new Promise((r) => setTimeout(r, 20))
    await call("POST", `/api/approvals/${first.id}/decide`, s, { decision: "approve" })
    const resolved = await call("GET", `/api/approvals?decided_after=${encodeURIComponent(since)}`, s)
    expect((resolved.body.approvals as Json[]).map((x) => x.id)).toContain(first.id)
    const approved = await call("GET", `/api/approvals?status=approved&workflow_id=${workflowId}`, s)
    expect((approved.body.approvals as Json[]).every((x) => x.status === "approved")).toBe(true)
    const theirs = await call("GET", "/api/approvals", other)
    expect((theirs.body.approvals as Json[]).some((x) => x.workflow_id === workflowId)).toBe(false)
    expect((await call("GET", "/api/approvals?status=maybe", s)).status).toBe(422)
    expect((await call("GET", "/api/approvals?decided_after=yesterday", s)).status).toBe(422)
    const all = (await call("GET", `/api/approvals?workflow_id=${workflowId}`, s)).body.approvals as Json[]
    expect(all.map((x) => x.id)).toEqual([...all.map((x) => x.id)].sort((x, y) => y - x))
  })
})
