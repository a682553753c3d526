// Issue 23, events: each type is written where its fact becomes true, in the same transaction — it
// exists when the change commits and not when the transaction rolls back — with the object as its
// read endpoint shows it, and one delivery per enabled, subscribed endpoint of the workspace only.
// A whole simulated run; approvals requested, decided and expired; outreach email sent, delivered,
// replied; the wallet crossing its threshold and zero once per crossing; a workspace suspended.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { decide, expireApproval, expireDueApprovals, insertApproval } from "../../src/approvals/approvals.repo.js"
import { postEntry } from "../../src/billing/ledger.repo.js"
import { postReservations } from "../../src/billing/usage.repo.js"
import { finishAttempt, finishAttempts } from "../../src/calls/calls.repo.js"
import * as email from "../../src/email/email.repo.js"
import { connectPostgres, type Sql } from "../../src/platform/Db.js"
import { insertHeldRun, insertRun, setRunStatus } from "../../src/runs/runs.repo.js"
import { callEndType } from "../../src/webhooks/event-data.js"
import { WEBHOOKS_DUE_CHANNEL } from "../../src/webhooks/outbox.repo.js"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { freshDatabase, realServices, sharedTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
let a: ReturnType<typeof api>
let owner: Session
let other: Session
/** The owner's endpoints: every type; call.completed only; disabled; deleted. And one of `other`'s. */
const ep = { all: 0, completedOnly: 0, disabled: 0, deleted: 0, foreign: 0 }

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

beforeAll(async () => {
  srv = await sharedTestServer({ env: FAST_RUNTIME_ENV })
  a = api(srv)
  owner = await a.signup({ country: "US" })
  other = await a.signup({ country: "US" })
  // Straight into the table: what is tested is the fan-out, not the endpoints API. The URLs lead
  // nowhere (delivery may try and fail; these tests read only which deliveries exist).
  const add = async (tenantId: number, events: string[], enabled = true, deleted = false) => {
    const [row] = await srv.sql<[{ id: number }]>`
      insert into webhook_endpoints (tenant_id, url, events, enabled, secret_ciphertext, deleted_at)
      values (${tenantId}, 'https://hooks.example.invalid/x', ${events}, ${enabled}, 'not-a-secret',
        ${deleted ? new Date() : null})
      returning id`
    return row.id
  }
  ep.all = await add(owner.tenantId, ["*"])
  ep.completedOnly = await add(owner.tenantId, ["call.completed"])
  ep.disabled = await add(owner.tenantId, ["*"], false)
  ep.deleted = await add(owner.tenantId, ["*"], true, true)
  ep.foreign = await add(other.tenantId, ["*"])
})
afterAll(async () => srv?.stop())

const call = async (method: string, path: string, s: { token: string }, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

interface EventRow {
  id: string
  tenant_id: number
  type: string
  body: Json
}

const events = (tenantId: number, type?: string) =>
  srv.sql<EventRow[]>`select id, tenant_id, type, body from webhook_events where tenant_id = ${tenantId}
    ${type === undefined ? srv.sql`` : srv.sql`and type = ${type}`} order by created_at, id`

/** The endpoints an event has deliveries for, sorted. */
const deliveredTo = async (eventId: string) =>
  (
    await srv.sql<{ endpoint_id: number }[]>`select endpoint_id from webhook_deliveries where event_id = ${eventId}
      order by endpoint_id`
  ).map((r) => r.endpoint_id)

/** Every event is the envelope {id, type, created_at, tenant_id, data}, sent to the owner's live subscribers only. */
async function expectEnvelopeAndFanOut(e: EventRow) {
  expect(e.body).toMatchObject({ id: e.id, type: e.type, tenant_id: e.tenant_id })
  expect(Object.keys(e.body).sort()).toEqual(["created_at", "data", "id", "tenant_id", "type"])
  expect(e.id).toMatch(/^evt_[0-9a-f]{32}$/)
  expect(new Date(e.body.created_at).toISOString()).toBe(e.body.created_at)
  const want = e.type === "call.completed" ? [ep.all, ep.completedOnly] : [ep.all]
  expect(await deliveredTo(e.id)).toEqual(want.sort((x, y) => x - y))
}

async function waitFor<T>(what: string, f: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const v = await f()
    if (v !== undefined) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

/**
 * Makes every transaction that writes an event of the workspace fail at its commit (a deferred
 * constraint trigger): whatever the change, it must roll back with its event. Returns the undo.
 */
async function failCommitsOf(tenantId: number): Promise<() => Promise<void>> {
  const fn = `test_fail_commit_${tenantId}`
  await srv.sql.unsafe(`create or replace function ${fn}() returns trigger language plpgsql as $$
    begin
      if new.tenant_id = ${tenantId} then raise exception 'commit refused by the test'; end if;
      return null;
    end $$`)
  await srv.sql.unsafe(`create constraint trigger ${fn} after insert on webhook_events deferrable initially deferred
    for each row execute function ${fn}()`)
  return async () => {
    await srv.sql.unsafe(`drop trigger ${fn} on webhook_events`)
    await srv.sql.unsafe(`drop function ${fn}()`)
  }
}

/** US numbers ending in each digit: the sim callee behaves by the last digit. */
const numbers = (digits: number[], base = 2025550100) => digits.map((d, i) => `+1${base + i * 10 + d}`)

async function fund(s: Session, amountMinor = 1_000_000) {
  const intent = (await call("POST", "/billing/topup", s, { amount_minor: amountMinor })).body
  const res = await a.call("POST", "/billing/webhooks/stub", {
    body: { external_id: intent.external_id, status: "succeeded" },
  })
  expect(res.status).toBe(200)
}

async function readyWorkflow(s: Session, phones: string[]) {
  const w = (
    await call("POST", "/api/workflows", s, {
      nl_prompt: "Call members whose membership lapsed and offer a discount of up to $20 to rejoin.",
    })
  ).body
  expect(
    (await call("POST", `/api/workflows/${w.id}/audience`, s, { rows: phones.map((phone) => ({ phone })) })).status,
  ).toBe(200)
  const att = await call("PUT", `/api/workflows/${w.id}/compliance`, s, {
    consent_attestation_text: "All numbers opted in on our website.",
  })
  expect(att.status).toBe(200)
  return w as Json
}

describe("a simulated run", () => {
  let workflowId = 0
  let runId = 0

  /** A question on the run's first call, written as the runtime writes one (with its event). */
  async function askOnFirstCall(action: "callback" | "escalate", rationale: string, ttlMs: number) {
    const [c] = await srv.sql<[{ id: number; phone_e164: string }]>`select id, phone_e164 from calls
      where run_id = ${runId} order by id limit 1`
    return insertApproval(srv.sql, {
      tenantId: owner.tenantId,
      workflowId,
      runId,
      callId: c.id,
      phone: c.phone_e164,
      action,
      valueMinor: null,
      currency: "USD",
      rationale,
      context: {},
      ttlMs,
    })
  }

  beforeAll(async () => {
    await fund(owner)
    // agrees, no answer, declines, asks for a discount (an approval)
    const w = await readyWorkflow(owner, numbers([3, 0, 6, 7]))
    workflowId = w.id
    const started = await call("POST", `/api/workflows/${w.id}/run`, owner)
    expect(started.status, JSON.stringify(started.body)).toBe(201)
    runId = started.body.run_id
    await waitFor("the run's end", async () => {
      const [r] = await srv.sql<[{ status: string }]>`select status from runs where id = ${runId}`
      return r.status === "completed" ? r : undefined
    })
  }, 60_000)

  it("sends workflow.run.started once, as GET /api/workflows/{id}/runs shows the run, not resumed", async () => {
    const started = (await events(owner.tenantId, "workflow.run.started")).filter((e) => e.body.data.id === runId)
    expect(started).toHaveLength(1)
    const data = started[0]!.body.data
    expect(data).toMatchObject({ id: runId, run_id: runId, workflow_id: workflowId, status: "running", resumed: false })
    expect(data.targets_total).toBe(4)
    expect(typeof data.version).toBe("number")
    await expectEnvelopeAndFanOut(started[0]!)
  })

  it("sends call.completed or call.failed once per attempt, with the call as GET /api/calls/{id} has it", async () => {
    const calls = await srv.sql<
      { id: number; outcome: string; answered_at: Date | null; cost_minor: number | null; phone_e164: string }[]
    >`select id, outcome, answered_at, cost_minor, phone_e164 from calls where run_id = ${runId} order by id`
    expect(calls.length).toBeGreaterThanOrEqual(4)
    const ended = (await events(owner.tenantId)).filter(
      (e) => (e.type === "call.completed" || e.type === "call.failed") && e.body.data.run_id === runId,
    )
    expect(ended.map((e) => e.body.data.id).sort((x, y) => x - y)).toEqual(calls.map((c) => c.id))
    for (const c of calls) {
      const e = ended.find((x) => x.body.data.id === c.id)!
      expect(e.type).toBe(callEndType(c.outcome, c.answered_at !== null))
      expect(e.body.data).toMatchObject({
        call_id: c.id,
        run_id: runId,
        workflow_id: workflowId,
        status: "ended",
        outcome: c.outcome,
        cost_minor: c.cost_minor,
        currency: "USD",
        phone: c.phone_e164,
      })
      expect(e.body.data).not.toHaveProperty("transcript")
      await expectEnvelopeAndFanOut(e)
    }
    // The object GET /api/calls/{id} returns, without the transcript, the analysis and the recording
    // (the last two come after the call ends), plus connected_seconds.
    const first = ended.find((e) => e.type === "call.completed")!
    const got = await call("GET", `/api/calls/${first.body.data.id}`, owner)
    expect(got.status).toBe(200)
    const { transcript: _t, transcript_truncated: _tt, analysis: _a, recording: _r, ...polled } = got.body
    const { version: _v, connected_seconds, ...sent } = first.body.data
    expect(sent).toEqual(polled)
    expect(connected_seconds).toBe(polled.talk_seconds)
    // The digits promise: 3 agrees (completed), 0 never answers (failed).
    const byDigit = (d: string) => ended.filter((e) => String(e.body.data.phone).endsWith(d))
    expect(byDigit("3").map((e) => e.type)).toEqual(["call.completed"])
    expect(byDigit("0").every((e) => e.type === "call.failed" && e.body.data.outcome === "no_answer")).toBe(true)
  })

  it("sends workflow.run.ended once, after the last call, with the run completed", async () => {
    const ended = (await events(owner.tenantId, "workflow.run.ended")).filter((e) => e.body.data.id === runId)
    expect(ended).toHaveLength(1)
    expect(ended[0]!.body.data).toMatchObject({ id: runId, status: "completed", targets_total: 4 })
    expect(ended[0]!.body.data.ended_at).not.toBeNull()
    // The fields of GET /api/workflows/{id}/runs, and version.
    const listed = (await call("GET", `/api/workflows/${workflowId}/runs`, owner)).body.runs as Json[]
    const polled = listed.find((r) => r.id === runId)!
    expect(Object.keys(ended[0]!.body.data).sort()).toEqual([...Object.keys(polled), "version"].sort())
    expect(ended[0]!.body.data).toMatchObject({ status: polled.status, ended_at: polled.ended_at })
    await expectEnvelopeAndFanOut(ended[0]!)
    // In commit order: the start, every call, then the end.
    const all = (await events(owner.tenantId)).filter((e) => e.body.data.run_id === runId || e.body.data.id === runId)
    // (call.analyzed and approvals follow their own clocks.)
    const mine = ["workflow.run.started", "call.completed", "call.failed", "workflow.run.ended"]
    const types = all.filter((e) => mine.includes(e.type)).map((e) => e.type)
    expect(types[0]).toBe("workflow.run.started")
    expect(types.at(-1)).toBe("workflow.run.ended")
  })

  it("sends approval.requested for the discount asked, then approval.resolved once when it is decided", async () => {
    const requested = await waitFor("approval.requested", async () => {
      const r = (await events(owner.tenantId, "approval.requested")).filter((e) => e.body.data.run_id === runId)
      return r.length > 0 ? r : undefined
    })
    expect(requested).toHaveLength(1)
    const approval = requested[0]!.body.data
    expect(approval).toMatchObject({
      status: "pending",
      proposed_action: "concession",
      workflow_id: workflowId,
      version: 1,
    })
    await expectEnvelopeAndFanOut(requested[0]!)
    // The same object GET /api/approvals returns (plus version), but for its phase: the event's is the
    // one it was written in (the callee held), the list's is read now (the call is over).
    const listed = (await call("GET", "/api/approvals?status=pending", owner)).body as Json
    const { phase: phaseNow, ...mine } = (listed.approvals ?? listed).find((x: Json) => x.id === approval.id)
    const { version: _v, phase, ...withoutVersion } = approval
    expect(withoutVersion).toEqual(mine)
    expect(phase).toBe("on_hold")
    expect(phaseNow).toBe("after_call")

    const decided = await call("POST", `/api/approvals/${approval.id}/decide`, owner, { decision: "approve" })
    expect(decided.status, JSON.stringify(decided.body)).toBe(200)
    const again = await call("POST", `/api/approvals/${approval.id}/decide`, owner, { decision: "deny" })
    expect(again.status).toBe(409)
    const resolved = (await events(owner.tenantId, "approval.resolved")).filter((e) => e.body.data.id === approval.id)
    expect(resolved).toHaveLength(1)
    expect(resolved[0]!.body.data).toMatchObject({
      id: approval.id,
      status: "approved",
      decided_by: owner.userId,
      version: 2,
    })
    await expectEnvelopeAndFanOut(resolved[0]!)
  })

  it("sends approval.resolved with status expired once, whichever of the sweeps writes the expiry", async () => {
    const row = await askOnFirstCall("callback", "asked to be called tomorrow", 1)
    const requested = (await events(owner.tenantId, "approval.requested")).filter((e) => e.body.data.id === row.id)
    expect(requested).toHaveLength(1)
    await new Promise((r) => setTimeout(r, 20))
    await Promise.all([expireDueApprovals(srv.sql), expireDueApprovals(srv.sql), expireDueApprovals(srv.sql)])
    const resolved = await waitFor("approval.resolved", async () => {
      const r = (await events(owner.tenantId, "approval.resolved")).filter((e) => e.body.data.id === row.id)
      return r.length > 0 ? r : undefined
    })
    expect(resolved).toHaveLength(1)
    expect(resolved[0]!.body.data).toMatchObject({ id: row.id, status: "expired", decided_at: null })
    // Its actor's own timer expires one approval (expireApproval): the same, once.
    const timed = await askOnFirstCall("escalate", "asked for a human", 1)
    await new Promise((r) => setTimeout(r, 20))
    // (The runtime's own sweep may come first: then neither call expires it, and the count is still one.)
    const n = (await expireApproval(srv.sql, timed.id)) + (await expireApproval(srv.sql, timed.id))
    expect(n).toBeLessThanOrEqual(1)
    await expireDueApprovals(srv.sql)
    const timedOut = (await events(owner.tenantId, "approval.resolved")).filter((e) => e.body.data.id === timed.id)
    expect(timedOut.map((e) => e.body.data.status)).toEqual(["expired"])
    const late = await call("POST", `/api/approvals/${row.id}/decide`, owner, { decision: "approve" })
    expect(late.status).toBe(409)
    expect((await events(owner.tenantId, "approval.resolved")).filter((e) => e.body.data.id === row.id)).toHaveLength(1)
  })

  it("writes nothing when the approval's transaction does not commit", async () => {
    const before = await events(owner.tenantId)
    const undo = await failCommitsOf(owner.tenantId)
    try {
      await expect(askOnFirstCall("escalate", "rolled back", 60_000)).rejects.toThrow(/commit refused/)
    } finally {
      await undo()
    }
    expect(await events(owner.tenantId)).toHaveLength(before.length)
    const [{ n }] = await srv.sql<
      [{ n: number }]
    >`select count(*)::int as n from approvals where rationale = 'rolled back'`
    expect(n).toBe(0)
  })

  it("writes no approval.resolved when the decision's transaction does not commit; one when it does", async () => {
    const row = await askOnFirstCall("escalate", "decided twice, committed once", 60_000)
    const resolved = async () =>
      (await events(owner.tenantId, "approval.resolved")).filter((e) => e.body.data.id === row.id)
    const undo = await failCommitsOf(owner.tenantId)
    try {
      await expect(
        decide(srv.sql, {
          tenantId: owner.tenantId,
          approvalId: row.id,
          status: "denied",
          userId: owner.userId,
          apiKeyId: null,
          note: null,
        }),
      ).rejects.toThrow(/commit refused/)
    } finally {
      await undo()
    }
    expect(await resolved()).toHaveLength(0)
    const [still] = await srv.sql<[{ status: string }]>`select status from approvals where id = ${row.id}`
    expect(still.status).toBe("pending")

    const decided = await call("POST", `/api/approvals/${row.id}/decide`, owner, { decision: "deny" })
    expect(decided.status, JSON.stringify(decided.body)).toBe(200)
    const after = await resolved()
    expect(after).toHaveLength(1)
    expect(after[0]!.body.data).toMatchObject({ id: row.id, status: "denied" })
  })

  it("ends a call and its event together: a failed commit leaves neither, a second end sends nothing", async () => {
    const [c] = await srv.sql<[{ id: number; run_target_id: number; target_id: number; phone_e164: string }]>`
      select id, run_target_id, target_id, phone_e164 from calls where run_id = ${runId} order by id limit 1`
    // Open the call again as if this test's process held it live.
    await srv.sql`update calls set status = 'connected', owner_instance = 'events-test' where id = ${c.id}`
    const end = {
      me: "events-test",
      runId,
      tenantId: owner.tenantId,
      callId: c.id,
      runTargetId: c.run_target_id,
      outcome: "agreed",
      connectedSeconds: 30,
      costMinor: 5,
      reservedMinor: 30,
      endedAt: new Date(),
      next: { kind: "done" as const, outcome: "agreed" },
      decision: { targetId: c.target_id, at: Date.now(), decision: "stop", reason: "test", detail: {}, costMinor: 5 },
      addToDnc: false,
      phone: c.phone_e164,
    }
    const count = async () =>
      (await events(owner.tenantId)).filter((e) => e.type.startsWith("call.") && e.body.data.id === c.id).length
    const before = await count()
    const undo = await failCommitsOf(owner.tenantId)
    try {
      await expect(finishAttempts(srv.sql, [end])).rejects.toThrow(/commit refused/)
    } finally {
      await undo()
    }
    expect(await count()).toBe(before)
    const [still] = await srv.sql<[{ status: string }]>`select status from calls where id = ${c.id}`
    expect(still.status).toBe("connected")

    expect(await finishAttempts(srv.sql, [end, end])).toEqual([true, false])
    expect(await count()).toBe(before + 1)
    expect(await finishAttempts(srv.sql, [end])).toEqual([false])
    expect(await count()).toBe(before + 1)

    // The one-at-a-time end (a takeover's) likewise: once, as call.failed for an interrupted call.
    await srv.sql`update calls set status = 'connected', owner_instance = 'events-test' where id = ${c.id}`
    const interrupted = { ...end, outcome: "interrupted", next: { kind: "done" as const, outcome: "interrupted" } }
    expect(await finishAttempt(srv.sql, interrupted)).toBe(true)
    expect(await finishAttempt(srv.sql, interrupted)).toBe(false)
    const last = (await events(owner.tenantId)).filter((e) => e.type.startsWith("call.") && e.body.data.id === c.id)
    expect(last).toHaveLength(before + 2)
    expect(last.at(-1)).toMatchObject({ type: "call.failed", body: { data: { outcome: "interrupted" } } })
  })

  it("does not end or announce a run whose transaction fails; a run that did not change sends nothing", async () => {
    const w = await readyWorkflow(owner, numbers([3], 2025551100))
    let newRun = 0
    // Rolled back by the caller: the run and its started event go together.
    await expect(
      srv.sql.begin(async (tx) => {
        newRun = (await insertRun(tx, owner.tenantId, w.id, w.rule_book_id)).id
        throw new Error("caller gives up")
      }),
    ).rejects.toThrow("caller gives up")
    expect(
      (await events(owner.tenantId, "workflow.run.started")).filter((e) => e.body.data.id === newRun),
    ).toHaveLength(0)
    const [{ n }] = await srv.sql<[{ n: number }]>`select count(*)::int as n from runs where id = ${newRun}`
    expect(n).toBe(0)

    // A run this process owns: its end fails at commit, then succeeds once.
    // Owned from its first commit, so no runtime process claims and dials it.
    const run = await srv.sql.begin(async (tx) => {
      const r = await insertRun(tx, owner.tenantId, w.id, w.rule_book_id)
      await tx`update runs set owner_instance = 'events-test', lease_expires_at = now() + interval '1 hour'
        where id = ${r.id}`
      return r
    })
    const undo = await failCommitsOf(owner.tenantId)
    try {
      await expect(setRunStatus(srv.sql, run.id, "events-test", "cancelled", "test")).rejects.toThrow(/commit refused/)
    } finally {
      await undo()
    }
    const [r] = await srv.sql<[{ status: string }]>`select status from runs where id = ${run.id}`
    expect(r.status).toBe("running")
    await setRunStatus(srv.sql, run.id, "events-test", "cancelled", "test")
    await setRunStatus(srv.sql, run.id, "events-test", "failed", "test")
    const ended = (await events(owner.tenantId, "workflow.run.ended")).filter((e) => e.body.data.id === run.id)
    expect(ended).toHaveLength(1)
    expect(ended[0]!.body.data).toMatchObject({ status: "cancelled", end_reason: "test" })
  })

  it("sends nothing for a simulation campaign's rehearsal: its run, calls and approvals are hidden", async () => {
    const w = await readyWorkflow(owner, numbers([3], 2025553100))
    // The analyses of the runs above (call.analyzed) come on their own clock: not counted. The
    // rehearsal's own call is analysed too (stored, never announced): its event would count.
    let rehearsalCall = -1
    const mine = async () =>
      (await events(owner.tenantId)).filter((e) => e.type !== "call.analyzed" || e.body.data.call_id === rehearsalCall)
    const before = (await mine()).length
    const run = await srv.sql.begin(async (tx) => {
      // A campaign's hidden workflow (src/rehearsals/), from its first commit on.
      await tx`update workflows set kind = 'rehearsal', simulation_of = ${workflowId} where id = ${w.id}`
      const r = await insertHeldRun(tx, owner.tenantId, w.id, w.rule_book_id)
      await tx`update runs set owner_instance = 'events-test', lease_expires_at = now() + interval '1 hour'
        where id = ${r.id}`
      return r
    })
    const [t] = await srv.sql<[{ id: number; target_id: number }]>`select id, target_id from run_targets
      where run_id = ${run.id}`
    const [c] = await srv.sql<[{ id: number }]>`
      insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
        owner_instance, status, answered_at)
      values (${owner.tenantId}, ${run.id}, ${w.id}, ${t.id}, ${t.target_id}, 1, '+12025553103', 'sim', 'events-test',
        'connected', now())
      returning id`
    rehearsalCall = c.id
    const ended = await finishAttempts(srv.sql, [
      {
        me: "events-test",
        runId: run.id,
        tenantId: owner.tenantId,
        callId: c.id,
        runTargetId: t.id,
        outcome: "agreed",
        connectedSeconds: 10,
        costMinor: 0,
        reservedMinor: 0,
        endedAt: new Date(),
        next: { kind: "done", outcome: "agreed" },
        decision: { targetId: t.target_id, at: Date.now(), decision: "stop", reason: "test", detail: {}, costMinor: 0 },
        addToDnc: false,
        phone: "+12025553103",
      },
    ])
    expect(ended).toEqual([true])
    await insertApproval(srv.sql, {
      tenantId: owner.tenantId,
      workflowId: w.id,
      runId: run.id,
      callId: c.id,
      phone: "+12025553103",
      action: "concession",
      valueMinor: 500,
      currency: "USD",
      rationale: "rehearsal",
      context: {},
      ttlMs: 60_000,
    })
    await setRunStatus(srv.sql, run.id, "events-test", "completed", null)
    const [r] = await srv.sql<[{ status: string }]>`select status from runs where id = ${run.id}`
    expect(r.status).toBe("completed")
    // The call was queued for analysis with its end; once the analysis is stored, nothing was sent for it.
    await expect
      .poll(async () => (await srv.sql`select status from call_analyses where call_id = ${c.id}`)[0]?.status, {
        timeout: 20_000,
      })
      .toBe("done")
    expect((await mine()).slice(before).map((e) => [e.type, e.body.data])).toEqual([])
  })

  it("sends another workspace's events to its endpoints only", async () => {
    for (const e of await events(other.tenantId)) expect(await deliveredTo(e.id)).toEqual([ep.foreign])
    const [{ n }] = await srv.sql<[{ n: number }]>`select count(*)::int as n from webhook_deliveries
      where endpoint_id = ${ep.foreign} and tenant_id <> ${other.tenantId}`
    expect(n).toBe(0)
    for (const id of [ep.disabled, ep.deleted]) {
      const [{ m }] = await srv.sql<[{ m: number }]>`select count(*)::int as m from webhook_deliveries
        where endpoint_id = ${id}`
      expect(m).toBe(0)
    }
  })
})

describe("a run paused and resumed", () => {
  it("sends workflow.run.started again on resume, with resumed true and the same run", async () => {
    const s = await a.signup({ country: "US" })
    await fund(s)
    // Slow callees: many targets, so the run is still going when it is paused.
    const w = await readyWorkflow(s, numbers([3, 3, 3, 3, 3, 3, 3, 3], 2025552100))
    const started = await call("POST", `/api/workflows/${w.id}/run`, s)
    expect(started.status).toBe(201)
    const paused = await call("POST", `/api/workflows/${w.id}/pause`, s)
    expect(paused.status, JSON.stringify(paused.body)).toBe(200)
    const resumed = await call("POST", `/api/workflows/${w.id}/run`, s)
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(201)
    expect(resumed.body.run_id).toBe(started.body.run_id)
    const startedEvents = await events(s.tenantId, "workflow.run.started")
    expect(startedEvents.map((e) => [e.body.data.id, e.body.data.resumed])).toEqual([
      [started.body.run_id, false],
      [started.body.run_id, true],
    ])
    expect(startedEvents[1]!.body.data.version).toBeGreaterThanOrEqual(startedEvents[0]!.body.data.version)
  }, 30_000)
})

describe("outreach email", () => {
  const mailA = (body: unknown) =>
    a.call("POST", "/email/webhooks/mail_a", { body }).then(async (r) => ({ status: r.status, body: await r.json() }))

  async function sentMessage(sql: Sql, category: "outreach" | "transactional", providerId: string) {
    const id = await email.insertMessage(sql, {
      tenantId: owner.tenantId,
      to: "callee@example.com",
      channel: "offers",
      category,
      template: null,
      subject: "Come back",
    })
    await email.markSent(sql, id, "outbox", providerId)
    return id
  }

  it("sends message.sent, message.delivered once, and message.replied, for outreach mail only", async () => {
    const id = await sentMessage(srv.sql, "outreach", "pm-outreach-1")
    const ofMessage = async () => (await events(owner.tenantId)).filter((e) => e.body.data.message_id === id)
    let mine = await ofMessage()
    expect(mine.map((e) => e.type)).toEqual(["message.sent"])
    expect(mine[0]!.body.data).toMatchObject({
      id,
      message_id: id,
      to: "callee@example.com",
      channel: "offers",
      state: "sent",
      provider_message_id: "pm-outreach-1",
    })
    await expectEnvelopeAndFanOut(mine[0]!)

    expect((await mailA({ event: "delivered", "message-id": "pm-outreach-1", ts: "1" })).status).toBe(200)
    // The same delivery reported twice, and an open after it: still one message.delivered.
    await mailA({ event: "delivered", "message-id": "pm-outreach-1", ts: "2" })
    await mailA({ event: "opened", "message-id": "pm-outreach-1", ts: "3" })
    expect((await mailA({ event: "reply", "message-id": "pm-outreach-1", ts: "4" })).status).toBe(200)
    mine = await ofMessage()
    expect(mine.map((e) => e.type)).toEqual(["message.sent", "message.delivered", "message.replied"])
    expect(mine[1]!.body.data.state).toBe("delivered")
    expect(mine[1]!.body.data.version).toBeGreaterThanOrEqual(mine[0]!.body.data.version)
    for (const e of mine) await expectEnvelopeAndFanOut(e)

    // An open of a sent message proves its delivery.
    const opened = await sentMessage(srv.sql, "outreach", "pm-outreach-2")
    await mailA({ event: "opened", "message-id": "pm-outreach-2", ts: "5" })
    expect(
      (await events(owner.tenantId, "message.delivered")).filter((e) => e.body.data.message_id === opened),
    ).toHaveLength(1)

    // Sign-in codes and receipts are nobody's outreach: no events.
    const tx = await sentMessage(srv.sql, "transactional", "pm-transactional-1")
    await mailA({ event: "delivered", "message-id": "pm-transactional-1", ts: "6" })
    expect((await events(owner.tenantId)).filter((e) => e.body.data.message_id === tx)).toHaveLength(0)
  })

  it("writes no message.delivered when the delivery's transaction rolls back", async () => {
    const id = await sentMessage(srv.sql, "outreach", "pm-outreach-3")
    await expect(
      srv.sql.begin(async (tx) => {
        await email.applyDeliveryEvent(tx, id, "delivered")
        throw new Error("rolled back")
      }),
    ).rejects.toThrow("rolled back")
    expect(
      (await events(owner.tenantId, "message.delivered")).filter((e) => e.body.data.message_id === id),
    ).toHaveLength(0)
    const [m] = await srv.sql<[{ state: string }]>`select state from email_messages where id = ${id}`
    expect(m.state).toBe("sent")
  })

  it("writes no message.sent when the send's transaction does not commit; one when it does", async () => {
    const id = await email.insertMessage(srv.sql, {
      tenantId: owner.tenantId,
      to: "callee@example.com",
      channel: "offers",
      category: "outreach",
      template: null,
      subject: "Come back",
    })
    const sent = async () => (await events(owner.tenantId, "message.sent")).filter((e) => e.body.data.message_id === id)
    const undo = await failCommitsOf(owner.tenantId)
    try {
      await expect(email.markSent(srv.sql, id, "outbox", "pm-outreach-rb-1")).rejects.toThrow(/commit refused/)
    } finally {
      await undo()
    }
    expect(await sent()).toHaveLength(0)
    const [m] = await srv.sql<[{ state: string }]>`select state from email_messages where id = ${id}`
    expect(m.state).toBe("queued")
    await email.markSent(srv.sql, id, "outbox", "pm-outreach-rb-1")
    expect((await sent()).map((e) => e.body.data.state)).toEqual(["sent"])
  })

  it("writes no message.replied when the reply's transaction rolls back; one when it commits", async () => {
    const id = await sentMessage(srv.sql, "outreach", "pm-outreach-rb-2")
    const replied = async () =>
      (await events(owner.tenantId, "message.replied")).filter((e) => e.body.data.message_id === id)
    await expect(
      srv.sql.begin(async (tx) => {
        await email.recordReply(tx, id)
        throw new Error("rolled back")
      }),
    ).rejects.toThrow("rolled back")
    expect(await replied()).toHaveLength(0)
    await srv.sql.begin((tx) => email.recordReply(tx, id))
    expect(await replied()).toHaveLength(1)
  })
})

describe("the wallet", () => {
  let s: Session
  const post = (amountMinor: number, kind: string, key: string) =>
    srv.sql.begin((tx) =>
      postEntry(tx, { tenantId: s.tenantId, amountMinor, kind, idempotencyKey: `${key}:${s.tenantId}` }),
    )
  const balance = async () =>
    (await srv.sql<[{ b: number }]>`select balance_minor as b from wallets where tenant_id = ${s.tenantId}`)[0].b
  const walletEvents = async () => (await events(s.tenantId)).filter((e) => e.type.startsWith("wallet."))

  beforeAll(async () => {
    s = await a.signup({ country: "US" })
  })

  it("GET/PUT /api/webhooks/wallet-threshold: default 30 minutes at the bundled rate; admin sets it", async () => {
    const got = await call("GET", "/api/webhooks/wallet-threshold", s)
    expect(got.status).toBe(200)
    expect(got.body).toEqual({
      low_threshold_minor: null,
      effective_low_threshold_minor: 300,
      default_low_threshold_minor: 300,
      currency: "USD",
    })
    for (const bad of [{ low_threshold_minor: -1 }, { low_threshold_minor: 1.5 }, { low_threshold_minor: "9" }, {}]) {
      const res = await call("PUT", "/api/webhooks/wallet-threshold", s, bad)
      expect(res.status, JSON.stringify(bad)).toBe(422)
      expect(res.body.code).toBe("VALIDATION_FAILED")
    }
    const reader = await a.createKey(s, { name: "reader", scope: "read" })
    const refused = await call(
      "PUT",
      "/api/webhooks/wallet-threshold",
      { token: reader.secret },
      { low_threshold_minor: 5 },
    )
    expect(refused.status).toBe(403)
    expect((await call("GET", "/api/webhooks/wallet-threshold", { token: reader.secret })).status).toBe(200)
    const put = await call("PUT", "/api/webhooks/wallet-threshold", s, { low_threshold_minor: 200 })
    expect(put.status).toBe(200)
    expect(put.body).toMatchObject({ low_threshold_minor: 200, effective_low_threshold_minor: 200 })
    const [row] = await srv.sql<[{ low_threshold_minor: number }]>`select low_threshold_minor from webhook_wallet_state
      where tenant_id = ${s.tenantId}`
    expect(row.low_threshold_minor).toBe(200)
  })

  it("sends wallet.low once per crossing, wallet.exhausted below one minute; a release re-arms neither", async () => {
    // Signup's trial credit is 300 (USD); the threshold is now 200.
    expect(await balance()).toBe(300)
    await post(-50, "usage", "d1") // 250: above
    expect(await walletEvents()).toHaveLength(0)
    await post(-60, "usage", "d2") // 190: below — wallet.low
    await post(-10, "usage", "d3") // 180: still below — nothing
    let w = await walletEvents()
    expect(w.map((e) => e.type)).toEqual(["wallet.low"])
    expect(w[0]!.body.data).toMatchObject({
      tenant_id: s.tenantId,
      balance_minor: 190,
      currency: "USD",
      low_threshold_minor: 200,
      minutes_remaining_at_bundled_rate: 19,
    })
    await expectEnvelopeAndFanOutFor(w[0]!)
    // A call's unused reservation back above the line is no refill: no re-arming.
    await post(50, "call_release", "r1") // 230
    await post(-40, "usage", "d4") // 190
    expect((await walletEvents()).map((e) => e.type)).toEqual(["wallet.low"])
    // A top-up back above re-arms it; the next crossing sends it again.
    await post(100, "topup", "t1") // 290
    await post(-100, "usage", "d5") // 190
    expect((await walletEvents()).map((e) => e.type)).toEqual(["wallet.low", "wallet.low"])
    // Down to one minute at the bundled rate (10): not yet exhausted.
    await post(-180, "usage", "d6") // 10
    expect(await walletEvents()).toHaveLength(2)
    // Below one minute (nothing can be reserved): wallet.exhausted, once; to zero, nothing more.
    await post(-5, "usage", "d7") // 5
    await post(-5, "usage", "d8") // 0
    w = await walletEvents()
    expect(w.map((e) => e.type)).toEqual(["wallet.low", "wallet.low", "wallet.exhausted"])
    expect(w[2]!.body.data.balance_minor).toBe(5)
    // A replayed post changes nothing and sends nothing.
    await post(-5, "usage", "d8")
    expect(await walletEvents()).toHaveLength(3)
  })

  it("checks a batch of reservations once, and writes nothing when the posting rolls back", async () => {
    await post(1_000, "topup", "t2") // 1,000: above both lines, both re-armed
    await expect(
      srv.sql.begin(async (tx) => {
        await postEntry(tx, {
          tenantId: s.tenantId,
          amountMinor: -900,
          kind: "usage",
          idempotencyKey: `rb:${s.tenantId}`,
        })
        throw new Error("rolled back")
      }),
    ).rejects.toThrow("rolled back")
    expect(await walletEvents()).toHaveLength(3)
    const [st] = await srv.sql<[{ low_fired: boolean }]>`select low_fired from webhook_wallet_state
      where tenant_id = ${s.tenantId}`
    expect(st.low_fired).toBe(false)
    // Ten reservations of 90 in one statement: 1,000 → 100, below 200 once.
    const refs = Array.from({ length: 10 }, (_, i) => `call:test-${s.tenantId}-${i}`)
    const out = await srv.sql.begin((tx) => postReservations(tx, s.tenantId, refs, 90))
    expect(out.every((o) => o.outcome === "posted")).toBe(true)
    const w = await walletEvents()
    expect(w.map((e) => e.type)).toEqual(["wallet.low", "wallet.low", "wallet.exhausted", "wallet.low"])
    expect(w[3]!.body.data.balance_minor).toBe(100)
  })

  async function expectEnvelopeAndFanOutFor(e: EventRow) {
    expect(Object.keys(e.body).sort()).toEqual(["created_at", "data", "id", "tenant_id", "type"])
    expect(await deliveredTo(e.id)).toEqual([]) // this workspace has no endpoints
  }
})

describe("tenant.suspended", () => {
  it("is written by the suspension's own transaction, once per suspension, to the subscribers", async () => {
    const suspended = () => events(owner.tenantId, "tenant.suspended")
    await expect(
      srv.sql.begin(async (tx) => {
        await tx`update tenants set status = 'suspended' where id = ${owner.tenantId}`
        throw new Error("operator changed their mind")
      }),
    ).rejects.toThrow("operator changed their mind")
    expect(await suspended()).toHaveLength(0)

    await srv.sql`update tenants set status = 'suspended' where id = ${owner.tenantId}`
    await srv.sql`update tenants set status = 'suspended' where id = ${owner.tenantId}`
    let e = await suspended()
    expect(e).toHaveLength(1)
    expect(e[0]!.body.data).toMatchObject({
      id: owner.tenantId,
      tenant_id: owner.tenantId,
      status: "suspended",
      previous_status: "active",
    })
    await expectEnvelopeAndFanOut(e[0]!)
    await srv.sql`update tenants set status = 'active' where id = ${owner.tenantId}`
    await srv.sql`update tenants set status = 'suspended' where id = ${owner.tenantId}`
    e = await suspended()
    expect(e).toHaveLength(2)
    expect(e[1]!.id).not.toBe(e[0]!.id)
    await srv.sql`update tenants set status = 'active' where id = ${owner.tenantId}`
    expect(await events(other.tenantId, "tenant.suspended")).toHaveLength(0)
  })

  it.skipIf(!realServices)("wakes the delivery workers when it commits (NOTIFY), as every emit does", async () => {
    // A database of its own with no server on it: nothing else notifies while this listens.
    const db = await freshDatabase()
    const sql = connectPostgres(db.env.DATABASE_URL!, 2)
    try {
      const heard: string[] = []
      await sql.listen(WEBHOOKS_DUE_CHANNEL, (payload) => heard.push(payload))
      const tenant = async (name: string, types: string[] | null) => {
        const [t] = await sql<[{ id: number }]>`
          insert into tenants (name, country, currency) values (${name}, 'US', 'USD') returning id`
        if (types !== null)
          await sql`insert into webhook_endpoints (tenant_id, url, events, secret_ciphertext)
            values (${t.id}, 'https://hooks.example.invalid/x', ${types}, 'not-a-secret')`
        return t.id
      }
      const subscribed = await tenant("suspended-notify", ["tenant.suspended"])
      const unsubscribed = await tenant("suspended-quiet", null)
      await expect(
        sql.begin(async (tx) => {
          await tx`update tenants set status = 'suspended' where id = ${subscribed}`
          throw new Error("rolled back")
        }),
      ).rejects.toThrow("rolled back")
      await sql`update tenants set status = 'suspended' where id = ${unsubscribed}`
      await sql`update tenants set status = 'suspended' where id = ${subscribed}`
      // Notifications reach a listener in commit order: once this one is heard, every earlier one was.
      await sql`select pg_notify(${WEBHOOKS_DUE_CHANNEL}, 'sentinel')`
      await waitFor("the sentinel", async () => (heard.includes("sentinel") ? true : undefined), 10_000)
      // One wake-up: the committed suspension that made a delivery (not the rolled-back one, nor the
      // suspension of a workspace with no subscriber).
      expect(heard).toEqual(["", "sentinel"])
    } finally {
      await sql.end()
      await db.drop()
    }
  })
})
