// Decisions made after the call, through the real server and its in-process runtime, with holds so
// short that every call ends owing its decision (pending_approval): the decide answer says what the
// decision does, and the result shows it — a concession approved (at another amount, too) is agreed
// after the call at that amount, a denial is recorded as denied, an escalation for a colleague to
// follow up, a callback becomes a new attempt; nobody else is called; the approval keeps what it
// did (GET /api/approvals and approval.resolved); the run's outcome counts follow.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

// Holds of 10 ms × 0.01: the callee never waits, and each call ends owing the decision.
const ENV = { ...FAST_RUNTIME_ENV, APPROVAL_HOLD_MS: "10" }

let srv: TestServer
let a: ReturnType<typeof api>
let s: Session

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const call = async (method: string, path: string, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

beforeAll(async () => {
  srv = await startTestServer({ env: ENV })
  a = api(srv)
  s = await a.signup({ country: "US" })
  const intent = (await call("POST", "/billing/topup", { amount_minor: 1_000_000 })).body
  await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
  // A subscriber, so the workspace's events are written (what they carry is read from the table).
  await srv.sql`insert into webhook_endpoints (tenant_id, url, events, enabled, secret_ciphertext)
    values (${s.tenantId}, 'https://hooks.example.invalid/x', ${["approval.resolved"]}, true, 'not-a-secret')`
})
afterAll(async () => srv?.stop())

/** Runs `phones` to completion; the workflow id, the run id, and the run's pending approvals by phone. */
async function finishedRun(
  phones: string[],
): Promise<{ workflowId: number; runId: number; byPhone: Map<string, Json> }> {
  const w = (
    await call("POST", "/api/workflows", {
      nl_prompt: "Win back lapsed members with a discount of up to $20; book callbacks; escalate when asked.",
    })
  ).body
  await call("POST", `/api/workflows/${w.id}/audience`, { rows: phones.map((phone) => ({ phone })) })
  await call("PUT", `/api/workflows/${w.id}/compliance`, { consent_attestation_text: "Opted in." })
  const run = (await call("POST", `/api/workflows/${w.id}/run`)).body
  await expect
    .poll(async () => (await call("GET", `/api/workflows/${w.id}/runs`)).body.runs?.[0]?.status, { timeout: 30_000 })
    .toBe("completed")
  const pending = (await call("GET", `/api/approvals?workflow_id=${w.id}&status=pending`)).body.approvals as Json[]
  expect(pending).toHaveLength(phones.length)
  return { workflowId: w.id, runId: run.run_id, byPhone: new Map(pending.map((p) => [p.target_phone, p])) }
}

const resultOf = async (runId: number, phone: string): Promise<Json> =>
  ((await call("GET", `/api/runs/${runId}/results`)).body.results as Json[]).find((r) => r.phone === phone)!

const callsOf = async (runId: number) =>
  (await srv.sql<[{ n: number }]>`select count(*)::int as n from calls where run_id = ${runId}`)[0].n

// The decisions after a finished call and the one made during the goodbye (on a slower server of its own)
// are waited for side by side.
describe.concurrent("late decisions", () => {
  describe.sequential("a decision after the call ended", () => {
    it("a concession approved is agreed after the call at the approved amount; nobody is called", async () => {
      const concession = "+12025550107"
      const other = "+12025550117"
      const { workflowId, runId, byPhone } = await finishedRun([concession, other])
      const ap = byPhone.get(concession)!
      expect(ap.phase).toBe("after_call")
      expect((await resultOf(runId, concession)).outcome).toBe("pending_approval")
      // The call is analysed before the decision: the stored analysis learns the agreed value too.
      await expect
        .poll(async () => (await call("GET", `/api/calls/${ap.call_id}`)).body.analysis?.status, { timeout: 20_000 })
        .toBe("done")
      expect((await call("GET", `/api/calls/${ap.call_id}`)).body.analysis.agreed_value_minor).toBeNull()
      const queued = (await call("GET", `/api/approvals?workflow_id=${workflowId}&phase=after_call`)).body.approvals
      expect((queued as Json[]).map((x) => x.id).sort()).toEqual([...byPhone.values()].map((x) => x.id).sort())
      const before = await callsOf(runId)

      const decided = await call("POST", `/api/approvals/${ap.id}/decide`, { decision: "approve", value_minor: 1500 })
      expect(decided.status, JSON.stringify(decided.body)).toBe(200)
      const effect = "The call had ended: the result now records the agreed $15.00; no one is called."
      expect(decided.body).toMatchObject({
        status: "approved",
        approved_value_minor: 1500,
        phase: "after_call",
        effect,
      })

      expect(await resultOf(runId, concession)).toMatchObject({
        status: "done",
        outcome: "agreed_after_call",
        agreed_value_minor: 1500,
        decision_effect: effect,
      })
      expect((await call("GET", `/api/calls/${ap.call_id}`)).body.analysis.agreed_value_minor).toBe(1500)
      // The other target's result is untouched, nobody was called, and the run stays finished.
      expect(await resultOf(runId, other)).toMatchObject({ outcome: "pending_approval", decision_effect: null })
      await new Promise((r) => setTimeout(r, 300))
      expect(await callsOf(runId)).toBe(before)
      const [run] = (await call("GET", `/api/workflows/${workflowId}/runs`)).body.runs as Json[]
      expect(run).toMatchObject({ status: "completed", finished: true, targets_done: 2 })
      expect(run!.outcomes).toEqual({ agreed_after_call: 1, pending_approval: 1 })

      // The approval keeps what it did, in the list and in its approval.resolved event.
      const listed = ((await call("GET", `/api/approvals?workflow_id=${workflowId}`)).body.approvals as Json[]).find(
        (x) => x.id === ap.id,
      )
      expect(listed).toMatchObject({ status: "approved", phase: null, decided_phase: "after_call", effect })
      const [event] = await srv.sql<{ body: Json }[]>`select body from webhook_events
      where tenant_id = ${s.tenantId} and type = 'approval.resolved' and body -> 'data' ->> 'id' = ${String(ap.id)}`
      expect(event!.body.data).toMatchObject({ status: "approved", approved_value_minor: 1500, effect, version: 2 })
    }, 60_000)

    it("denying records the request as denied; approving an escalation leaves it for a colleague", async () => {
      const discount = "+12025550127"
      const human = "+12025550139"
      const { runId, byPhone } = await finishedRun([discount, human])
      const denied = await call("POST", `/api/approvals/${byPhone.get(discount)!.id}/decide`, { decision: "deny" })
      expect(denied.body).toMatchObject({
        status: "denied",
        phase: "after_call",
        effect: "The call had ended: the result now records the discount as denied; no one is called.",
      })
      expect(await resultOf(runId, discount)).toMatchObject({ outcome: "denied_after_call", agreed_value_minor: null })
      const escalated = await call("POST", `/api/approvals/${byPhone.get(human)!.id}/decide`, { decision: "approve" })
      expect(escalated.body.effect).toBe(
        "The call had ended: the result now records the transfer as approved, for a colleague to follow up; " +
          "no one is called.",
      )
      expect(await resultOf(runId, human)).toMatchObject({ outcome: "escalated_after_call", agreed_value_minor: null })
      // An analysed call's agreed value stays empty: nothing was agreed.
      await expect.poll(async () => (await resultOf(runId, discount)).analysis_status, { timeout: 20_000 }).toBe("done")
      expect((await resultOf(runId, discount)).agreed_value_minor).toBeNull()
    }, 60_000)

    it("approving a callback schedules a new attempt and says when", async () => {
      const phone = "+12025550148"
      const { runId, byPhone } = await finishedRun([phone])
      const decided = await call("POST", `/api/approvals/${byPhone.get(phone)!.id}/decide`, { decision: "approve" })
      expect(decided.body.phase).toBe("after_call")
      expect(decided.body.effect).toMatch(
        /^The call had ended: a callback is scheduled for \d{4}-\d\d-\d\d \d\d:\d\d UTC\.$/,
      )
      const [t] = await srv.sql<[{ status: string; outcome: string; next_attempt_at: Date }]>`
      select status, outcome, next_attempt_at from run_targets where run_id = ${runId}`
      expect(t).toMatchObject({ status: "waiting", outcome: "callback_scheduled" })
      expect(decided.body.effect).toContain(t.next_attempt_at.toISOString().slice(0, 16).replace("T", " "))
    }, 60_000)

    it("a late decision is still 409 once decided, and a value_minor past the cap is 422", async () => {
      const phone = "+12025550157"
      const { byPhone } = await finishedRun([phone])
      const id = byPhone.get(phone)!.id
      const tooMuch = await call("POST", `/api/approvals/${id}/decide`, { decision: "approve", value_minor: 5000 })
      expect(tooMuch).toMatchObject({ status: 422, body: { code: "VALIDATION_FAILED", field: "value_minor" } })
      expect((await call("POST", `/api/approvals/${id}/decide`, { decision: "approve" })).status).toBe(200)
      const again = await call("POST", `/api/approvals/${id}/decide`, { decision: "deny" })
      expect(again).toMatchObject({ status: 409, body: { code: "APPROVAL_ALREADY_DECIDED" } })
    }, 60_000)
  })

  describe("a decision made as the call ends (its hold over, the goodbye still being said)", () => {
    it("is applied by the call's end: the result records it once", async () => {
      // Slow enough to decide inside the goodbye: holds of 5 s × 0.2 = 1 s, a goodbye of ~1.5 s.
      const slow = await startTestServer({
        // Text turns: the window this needs (the goodbye after the hold, seen in /api/runs/live) is timed on them.
        env: { ...FAST_RUNTIME_ENV, SIM_TIME_SCALE: "0.2", APPROVAL_HOLD_MS: "5000", MEDIA_STREAMS: "telco_a" },
      })
      try {
        const b = api(slow)
        const o = await b.signup({ country: "US" })
        const req = async (method: string, path: string, body?: unknown) =>
          (await b.call(method, path, { token: o.token, ...(body !== undefined && { body }) })).json() as Promise<Json>
        const intent = await req("POST", "/billing/topup", { amount_minor: 1_000_000 })
        await b.call("POST", "/billing/webhooks/stub", {
          body: { external_id: intent.external_id, status: "succeeded" },
        })
        const w = await req("POST", "/api/workflows", {
          nl_prompt: "Win back lapsed members with a discount of up to $20; book callbacks; escalate when asked.",
        })
        await req("POST", `/api/workflows/${w.id}/audience`, { rows: [{ phone: "+12025550167" }] })
        await req("PUT", `/api/workflows/${w.id}/compliance`, { consent_attestation_text: "Opted in." })
        const run = await req("POST", `/api/workflows/${w.id}/run`)
        // Wait for the hold to run out while the call is still live.
        let ap: Json | undefined
        const deadline = Date.now() + 60_000
        while (ap === undefined && Date.now() < deadline) {
          const [pending] = (await req("GET", `/api/approvals?workflow_id=${w.id}&phase=after_call`))
            .approvals as Json[]
          const live = ((await req("GET", "/api/runs/live")).calls as Json[]).find(
            (c) => c.call_id === pending?.call_id,
          )
          if (pending !== undefined && live !== undefined) {
            expect(live.on_hold).toBeNull()
            ap = pending
          } else await new Promise((r) => setTimeout(r, 20))
        }
        expect(ap, "the call ended before its hold ran out and a decision could be made").toBeDefined()
        const decided = await req("POST", `/api/approvals/${ap!.id}/decide`, { decision: "approve", value_minor: 900 })
        expect(decided).toMatchObject({ phase: "after_call", approved_value_minor: 900 })
        expect(decided.effect).toBe(
          "The callee is no longer holding and the call is ending: once it has ended, the result will record the " +
            "agreed $9.00; no one is called.",
        )
        const effect = "The call had ended: the result now records the agreed $9.00; no one is called."
        await expect
          .poll(
            async () =>
              ((await req("GET", `/api/runs/${run.run_id}/results`)).results as Json[])[0]?.decision_effect ?? null,
            { timeout: 20_000 },
          )
          .toBe(effect)
        const [result] = (await req("GET", `/api/runs/${run.run_id}/results`)).results as Json[]
        expect(result).toMatchObject({ outcome: "agreed_after_call", agreed_value_minor: 900 })
        const [listed] = (await req("GET", `/api/approvals?workflow_id=${w.id}`)).approvals as Json[]
        expect(listed).toMatchObject({ id: ap!.id, decided_phase: "after_call", effect })
        // Applied once: the call's end found it; a second pass finds nothing to apply.
        const { applyDecisionsAfterCall } = await import("../../src/approvals/late-decisions.js")
        const { runCallbacks } = await import("../../src/runs/run-callbacks.js")
        const [c] = await slow.sql<[{ id: number; run_target_id: number }]>`
        select id, run_target_id from calls where id = ${ap!.call_id}`
        expect(await applyDecisionsAfterCall(slow.sql, c, [ap!.id], 0.2, runCallbacks)).toBe(0)
      } finally {
        await slow.stop()
      }
    }, 60_000)
  })
})
