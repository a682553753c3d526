// A simulation campaign's states through the API, reconciled with what its run does: the run is
// held by "another process" and SQL plays the runtime's part (dial, ask, settle), so each
// transition is deterministic. Refused commands are 409 SIM_CAMPAIGN_STATE with the state; answer
// decides the approval as /api/approvals would; stop holds back what was not dialed and pauses
// the run; the forecast and outcomes follow the settled callees; the wallet never moves.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Session } from "../support/clients.js"
import { campaign, type Json, type SimServer, simServer, workflow } from "./sim.support.js"

let h: SimServer
beforeAll(async () => {
  h = await simServer()
})
afterAll(async () => h?.srv.stop())

const get = async (s: Session, id: number) => (await h.call("GET", `/api/sim/campaigns/${id}`, s)).body
const command = (s: Session, id: number, action: string, body?: unknown) =>
  h.call("POST", `/api/sim/campaigns/${id}/${action}`, s, body)

async function refused(s: Session, id: number, action: string, state: string, body?: unknown) {
  const res = await command(s, id, action, body)
  expect(res.status, `${action} in ${state}`).toBe(409)
  expect(res.body, `${action} in ${state}`).toMatchObject({ code: "SIM_CAMPAIGN_STATE", state })
}

const runStatus = async (runId: number) =>
  (await h.srv.sql<[{ status: string }]>`select status from runs where id = ${runId}`)[0].status

describe("a campaign from ready to completed", () => {
  it("run-batch, a question, answer, batch done, the last batch, completed; refused commands on the way", async () => {
    const s = await h.a.signup({ country: "US" })
    const w = await workflow(h, s)
    const c = await campaign(h, s, { workflow_id: w.id, size: 15, batch_size: 10, seed: 7 })

    // ready: resume and answer are refused.
    await refused(s, c.id, "resume", "ready")
    await refused(s, c.id, "answer", "ready", { question_id: 1, decision: "approve" })

    const batch = await command(s, c.id, "run-batch")
    expect(batch.status).toBe(202)
    expect(batch.body).toMatchObject({ state: "running", progress: { released: 10, in_flight: 10, done: 0 } })
    const targets = await h.runTargets(c.run_id)
    expect(targets.filter((t) => !t.held).map((t) => t.id)).toEqual(targets.slice(0, 10).map((t) => t.id))

    // running: another batch, an answer and resume are refused.
    await refused(s, c.id, "run-batch", "running")
    await refused(s, c.id, "answer", "running", { question_id: 1, decision: "approve" })
    await refused(s, c.id, "resume", "running")

    // A simulated callee asks for a discount: the conversation is held on an approval.
    const [first, second] = await h.dial(c.run_id, 2)
    const question = await h.ask(c.run_id, first!.callId, "concession", 1_500)
    const asking = await get(s, c.id)
    expect(asking.state).toBe("awaiting_answer")
    expect(asking.pending_question).toMatchObject({
      question_id: question,
      action: "concession",
      value_minor: 1_500,
      currency: "USD",
      target_phone: first!.phone,
    })
    expect(asking.outcomes).toMatchObject({ approvals_asked: 1, approvals_pending: 1 })
    await refused(s, c.id, "run-batch", "awaiting_answer")
    await refused(s, c.id, "resume", "awaiting_answer")

    // A question of another campaign is not this one's; bad bodies are 422.
    const elsewhere = await campaign(h, s, { workflow_id: w.id, size: 2 })
    await command(s, elsewhere.id, "run-batch")
    const [foreignCall] = await h.dial(elsewhere.run_id, 1)
    const foreign = await h.ask(elsewhere.run_id, foreignCall!.callId)
    expect((await command(s, c.id, "answer", { question_id: foreign, decision: "approve" })).status).toBe(404)
    expect((await command(s, c.id, "answer", { question_id: question, decision: "maybe" })).status).toBe(422)
    expect((await command(s, c.id, "answer", { decision: "approve" })).status).toBe(422)

    const answered = await command(s, c.id, "answer", { question_id: question, decision: "approve", note: "ok" })
    expect(answered.status).toBe(200)
    expect(answered.body).toMatchObject({
      state: "running",
      pending_question: null,
      answered: { question_id: question, status: "approved" },
    })
    const [decided] = await h.srv.sql<[Json]>`select status, decided_by, note from approvals where id = ${question}`
    expect(decided).toEqual({ status: "approved", decided_by: s.userId, note: "ok" })
    // Answered already: the approvals' own 409.
    const again = await command(s, c.id, "answer", { question_id: question, decision: "deny" })
    expect(again.status).toBe(409)
    expect(again.body.code).toBe("SIM_CAMPAIGN_STATE")

    // A second question answered on /api/approvals instead: the campaign follows.
    const other = await h.ask(c.run_id, second!.callId, "escalate", null)
    expect((await get(s, c.id)).state).toBe("awaiting_answer")
    expect((await h.call("POST", `/api/approvals/${other}/decide`, s, { decision: "deny" })).status).toBe(200)
    expect((await get(s, c.id)).state).toBe("running")

    // The batch's conversations end: ready, with outcomes.
    await h.settle(c.run_id, "agreed_with_concession", 90)
    await h.settleReleased(c.run_id, "declined", 30)
    const between = await get(s, c.id)
    expect(between).toMatchObject({
      state: "ready",
      progress: { done: 10, released: 10, in_flight: 0, size: 15 },
      outcomes: { agreed: 2, declined: 8, approvals_asked: 2, approvals_approved: 1, approvals_denied: 1 },
    })
    expect(between.outcomes.by_outcome).toEqual({ agreed_with_concession: 2, declined: 8 })
    expect(between.avg_talk_seconds).toBe(42)
    expect(between.forecast).toMatchObject({ basis: "per_1000_targets", sample_size: 10 })

    // The last batch releases only the 5 left; then completed, and nothing is accepted.
    const last = await command(s, c.id, "run-batch")
    expect(last.body).toMatchObject({ state: "running", progress: { released: 15, in_flight: 5 } })
    await h.settleReleased(c.run_id, "no_answer", 0)
    const done = await get(s, c.id)
    expect(done).toMatchObject({ state: "completed", progress: { done: 15, released: 15 }, outcomes: { no_answer: 5 } })
    expect(done.ended_at).not.toBeNull()
    for (const action of ["run-batch", "resume", "stop"]) await refused(s, c.id, action, "completed")
    await refused(s, c.id, "answer", "completed", { question_id: question, decision: "approve" })
  })
})

describe("stop and resume", () => {
  it("stop mid-batch holds back the undialed callees and pauses the run; idempotent; resume continues", async () => {
    const s = await h.a.signup({ country: "US" })
    const c = await campaign(h, s, { workflow_id: (await workflow(h, s)).id, size: 30, batch_size: 10 })
    await command(s, c.id, "run-batch")
    const inFlight = await h.dial(c.run_id, 3)

    const stopped = await command(s, c.id, "stop")
    expect(stopped.status).toBe(200)
    expect(stopped.body).toMatchObject({ state: "stopped", progress: { released: 3, in_flight: 3, done: 0 } })
    const targets = await h.runTargets(c.run_id)
    expect(targets.filter((t) => !t.held).map((t) => t.status)).toEqual(["dialing", "dialing", "dialing"])
    expect(await runStatus(c.run_id)).toBe("paused")

    const twice = await command(s, c.id, "stop")
    expect(twice.status).toBe(200)
    expect(twice.body).toMatchObject({ state: "stopped", updated_at: stopped.body.updated_at })
    await refused(s, c.id, "run-batch", "stopped")

    // A conversation in flight may still be held on a question, and answered while stopped.
    const q = await h.ask(c.run_id, inFlight[0]!.callId, "callback", null)
    expect((await get(s, c.id)).pending_question).toMatchObject({ question_id: q, action: "callback" })
    const answer = await command(s, c.id, "answer", { question_id: q, decision: "approve" })
    expect(answer.status).toBe(200)
    expect(answer.body).toMatchObject({ state: "stopped", answered: { status: "approved" } })

    // Resumed while its conversations are in flight: running; they end: ready.
    const resumed = await command(s, c.id, "resume")
    expect(resumed.status).toBe(200)
    expect(resumed.body.state).toBe("running")
    await refused(s, c.id, "resume", "running")
    await h.settle(c.run_id, "callback_scheduled", 45)
    expect((await get(s, c.id)).state).toBe("ready")

    // The next batch is the next 10 held callees, and the run runs again.
    const next = await command(s, c.id, "run-batch")
    expect(next.body).toMatchObject({ state: "running", progress: { released: 13, in_flight: 10, done: 3 } })
    expect(await runStatus(c.run_id)).toBe("running")
  })

  it("stopped, nothing in flight: resume → ready; stopped with every callee done → completed", async () => {
    const s = await h.a.signup({ country: "US" })
    const w = await workflow(h, s)
    const idle = await campaign(h, s, { workflow_id: w.id, size: 4 })
    expect((await command(s, idle.id, "stop")).body.state).toBe("stopped")
    expect((await command(s, idle.id, "resume")).body.state).toBe("ready")

    const c = await campaign(h, s, { workflow_id: w.id, size: 2, batch_size: 2 })
    await command(s, c.id, "run-batch")
    await h.dial(c.run_id, 2)
    await command(s, c.id, "stop")
    await h.settle(c.run_id, "agreed", 20)
    expect((await get(s, c.id)).state).toBe("completed")
  })

  it("a run that fails fails the campaign", async () => {
    const s = await h.a.signup({ country: "US" })
    const c = await campaign(h, s, { workflow_id: (await workflow(h, s)).id, size: 4 })
    await command(s, c.id, "run-batch")
    await h.srv.sql`update runs set status = 'failed', end_reason = 'dialer_error' where id = ${c.run_id}`
    const failed = await get(s, c.id)
    expect(failed).toMatchObject({ state: "failed", failure: "run failed: dialer_error" })
    await refused(s, c.id, "stop", "failed")
  })
})

describe("forecast and money", () => {
  it("the forecast rests on the settled callees, for the workflow's audience, in the workspace currency", async () => {
    const s = await h.a.signup({ country: "US" })
    const w = await workflow(h, s)
    const rows = Array.from({ length: 200 }, (_, i) => ({ phone: `+1415${String(2_000_000 + i)}` }))
    expect((await h.call("POST", `/api/workflows/${w.id}/audience`, s, { rows })).status).toBe(200)
    const c = await campaign(h, s, { workflow_id: w.id, size: 10, batch_size: 10 })
    await command(s, c.id, "run-batch")
    const calls = await h.dial(c.run_id, 10)
    // 4 agree after 120 s each, one of them after a question; 6 ring out.
    await h.ask(c.run_id, calls[0]!.callId)
    await h.srv.sql`update approvals set status = 'approved', decided_at = now() where run_id = ${c.run_id}`
    await h.srv.sql`update calls set status = 'ended', outcome = 'agreed', connected_seconds = 120, ended_at = now()
      where id = any(${calls.slice(0, 4).map((x) => x.callId)}::bigint[])`
    await h.srv.sql`update run_targets set status = 'done', outcome = 'agreed'
      where id = any(${calls.slice(0, 4).map((x) => x.runTargetId)}::bigint[])`
    await h.settle(c.run_id, "no_answer", 0)
    const f = (await get(s, c.id)).forecast as Json
    expect(f).toMatchObject({
      basis: "audience",
      targets: 200,
      sample_size: 10,
      rates: {
        connect: { successes: 4, value: 0.4 },
        agreement: { successes: 4, value: 0.4 },
        approval: { successes: 1, value: 0.1 },
      },
      expected: { connects: { value: 80 }, agreements: { value: 80 }, approvals: { value: 20 } },
      // 200 × 480 s / 10 / 60 = 160 minutes at $0.10.
      minutes: { value: 160 },
      cost: { currency: "USD", rate_per_minute_minor: 10, minor: { value: 1_600 }, display: "$16.00" },
    })
    for (const r of Object.values(f.rates as Record<string, Json>)) {
      expect(r.low).toBeLessThan(r.value)
      expect(r.high).toBeGreaterThan(r.value)
    }
  })

  it("the wallet is unchanged by a whole campaign: charged_minor 0, no ledger entry", async () => {
    const s = await h.a.signup({ country: "US" })
    const before = (await h.call("GET", "/billing/balance", s)).body
    const [{ n: entries }] = await h.srv.sql<[{ n: number }]>`
      select count(*)::int as n from ledger_entries where tenant_id = ${s.tenantId}`
    const c = await campaign(h, s, { workflow_id: (await workflow(h, s)).id, size: 5, batch_size: 5 })
    await command(s, c.id, "run-batch")
    await h.settleReleased(c.run_id, "agreed", 300)
    const done = await get(s, c.id)
    expect(done).toMatchObject({ state: "completed", charged_minor: 0, free: true })
    expect((await h.call("GET", "/billing/balance", s)).body.balance_minor).toBe(before.balance_minor)
    const [{ n: after }] = await h.srv.sql<[{ n: number }]>`
      select count(*)::int as n from ledger_entries where tenant_id = ${s.tenantId}`
    expect(after).toBe(entries)
  })
})
