// A supervisor's day with approvals, through the real server and its in-process runtime: the queue
// by time left (held callees first, soonest hold end first; then after-the-call ones by expiry), the
// phase of each pending approval and the phase filter, who decided (a member by name and address, a
// key by its name), callee and campaign names; a concession approved at another amount within the
// rule book's cap, heard by the held callee and agreed at that amount (422 outside it, for another
// action or with deny, nothing decided); and the pending count pushed on the approvals stream.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, HELD_RUNTIME_ENV, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"
import { type SseClient, sse } from "../support/sse-client.js"

// A call holds for a decision 1000 s × 0.01 = 10 s: time enough to decide while the callee holds.
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

async function funded(fullName?: string): Promise<Session> {
  const s = await a.signup({ country: "US", ...(fullName !== undefined && { full_name: fullName }) })
  const intent = (await call("POST", "/billing/topup", s, { amount_minor: 1_000_000 })).body
  await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
  return s
}

/** Starts a run calling `rows`; the workflow (with its rule book) and the run's id. */
async function runCalling(s: Session, rows: { phone: string; name?: string }[]): Promise<{ w: Json; runId: number }> {
  const w = (await call("POST", "/api/workflows", s, { nl_prompt: PROMPT })).body
  expect((await call("POST", `/api/workflows/${w.id}/audience`, s, { rows })).status).toBe(200)
  await call("PUT", `/api/workflows/${w.id}/compliance`, s, { consent_attestation_text: "Opted in." })
  const run = (await call("POST", `/api/workflows/${w.id}/run`, s)).body
  expect(run.status).toBe("running")
  return { w, runId: run.run_id }
}

/** The workflow's pending approvals once there are `n`. */
async function pendingOf(s: Session, workflowId: number, n: number): Promise<Json[]> {
  for (let i = 0; i < 150; i++) {
    const { body } = await call("GET", `/api/approvals?workflow_id=${workflowId}&status=pending`, s)
    if ((body.approvals as Json[]).length >= n) return body.approvals
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`fewer than ${n} pending approvals`)
}

const byPhone = (list: Json[], phone: string): Json => list.find((x) => x.target_phone === phone)!

describe("the queue for a supervisor's day", () => {
  it("orders by time left, marks each pending one's phase, filters by it, and names callee and campaign", async () => {
    const s = await funded()
    const rows = [
      { phone: "+12025550107", name: "Ann Archer" },
      { phone: "+12025550118", name: "Bo Baker" },
      { phone: "+12025550129", name: "Cy Cole" },
      { phone: "+12025550137", name: "Di Dean" },
    ]
    const { w } = await runCalling(s, rows)
    const pending = await pendingOf(s, w.id, 4)
    for (const p of pending) {
      expect(p.phase).toBe("on_hold")
      expect(p.workflow_name).toBe(w.name)
      expect(p.target_name).toBe(rows.find((r) => r.phone === p.target_phone)!.name)
      expect(Date.parse(p.context.hold_until)).toBeGreaterThan(Date.now())
      expect(p).toMatchObject({ decided_by_name: null, decided_by_email: null, decided_by_kind: null, effect: null })
    }
    const [ann, bo, cy, di] = rows.map((r) => byPhone(pending, r.phone)) as [Json, Json, Json, Json]
    // Two callees still held (Bo's hold ends first), two whose hold has run out (Di's expiry comes first).
    const at = (ms: number) => new Date(Date.now() + ms).toISOString()
    const setHold = (id: number, holdMs: number, expiresMs: number) =>
      srv.sql`update approvals set context = jsonb_set(context, '{hold_until}', to_jsonb(${at(holdMs)}::text)),
        expires_at = ${at(expiresMs)}::timestamptz where id = ${id}`
    await setHold(ann.id, 8_000, 3_600_000)
    await setHold(bo.id, 4_000, 3_600_000)
    await setHold(cy.id, -1_000, 2 * 3_600_000)
    await setHold(di.id, -1_000, 3_600_000)

    const queue = (await call("GET", `/api/approvals?workflow_id=${w.id}&order=time_left`, s)).body.approvals as Json[]
    expect(queue.map((x) => x.id)).toEqual([bo.id, ann.id, di.id, cy.id])
    expect(queue.map((x) => x.phase)).toEqual(["on_hold", "on_hold", "after_call", "after_call"])
    // The default order is unchanged: newest first.
    const newest = (await call("GET", `/api/approvals?workflow_id=${w.id}`, s)).body.approvals as Json[]
    expect(newest.map((x) => x.id)).toEqual([...newest.map((x) => x.id)].sort((x, y) => y - x))

    const held = (await call("GET", `/api/approvals?workflow_id=${w.id}&phase=on_hold`, s)).body.approvals as Json[]
    expect(held.map((x) => x.id).sort()).toEqual([ann.id, bo.id].sort())
    const after = (await call("GET", `/api/approvals?workflow_id=${w.id}&phase=after_call&order=time_left`, s)).body
    expect((after.approvals as Json[]).map((x) => x.id)).toEqual([di.id, cy.id])

    // A decided one goes after every pending one, with who decided it.
    expect((await call("POST", `/api/approvals/${bo.id}/decide`, s, { decision: "deny" })).status).toBe(200)
    const later = (await call("GET", `/api/approvals?workflow_id=${w.id}&order=time_left`, s)).body.approvals as Json[]
    expect(later.map((x) => x.id)).toEqual([ann.id, di.id, cy.id, bo.id])
    expect(later.at(-1)).toMatchObject({ status: "denied", phase: null, decided_phase: "on_hold" })

    // Bad input: 422 in the contract's shape, naming the parameter.
    for (const q of ["phase=waiting", "order=oldest", "phase=on_hold&status=approved"]) {
      const bad = await call("GET", `/api/approvals?${q}`, s)
      expect(bad.status, q).toBe(422)
      expect(bad.body).toMatchObject({
        code: "VALIDATION_FAILED",
        field: q.split("=")[0] === "order" ? "order" : "phase",
      })
    }
    for (const p of [ann, cy, di]) await call("POST", `/api/approvals/${p.id}/decide`, s, { decision: "deny" })
  }, 60_000)

  it("says who decided: a member by full name and address, an API key by its name", async () => {
    const s = await funded("Sam Supervisor")
    const { w } = await runCalling(s, [{ phone: "+12025550147" }, { phone: "+12025550158" }])
    const pending = await pendingOf(s, w.id, 2)
    const concession = pending.find((x) => x.proposed_action === "concession")!
    const callback = pending.find((x) => x.proposed_action === "callback")!
    expect((await call("POST", `/api/approvals/${concession.id}/decide`, s, { decision: "deny" })).status).toBe(200)
    const key = await a.createKey(s, { name: "Night shift desk", scope: "write" })
    expect(
      (await call("POST", `/api/approvals/${callback.id}/decide`, { token: key.secret }, { decision: "deny" })).status,
    ).toBe(200)
    const decided = (await call("GET", `/api/approvals?workflow_id=${w.id}&status=denied`, s)).body.approvals as Json[]
    expect(decided.find((x) => x.id === concession.id)).toMatchObject({
      decided_by: s.userId,
      decided_by_kind: "user",
      decided_by_name: "Sam Supervisor",
      decided_by_email: s.email.toLowerCase(),
    })
    expect(decided.find((x) => x.id === callback.id)).toMatchObject({
      decided_by: null,
      decided_by_api_key_id: key.id,
      decided_by_kind: "api_key",
      decided_by_name: "Night shift desk",
      decided_by_email: null,
    })
  }, 30_000)
})

describe("approving a concession at another amount", () => {
  it("is heard by the held callee at that amount, agreed at it, and shown on the approval", async () => {
    const s = await funded()
    const { w, runId } = await runCalling(s, [{ phone: "+12025550167", name: "Ann" }])
    const [ap] = (await pendingOf(s, w.id, 1)) as [Json]
    const cap = w.rule_book.concession_policy.cap_minor as number
    expect(cap).toBe(2000)
    expect(ap.proposed_value_minor).toBe(1000)
    const decided = await call("POST", `/api/approvals/${ap.id}/decide`, s, { decision: "approve", value_minor: 1234 })
    expect(decided.status, JSON.stringify(decided.body)).toBe(200)
    expect(decided.body).toMatchObject({
      id: ap.id,
      status: "approved",
      approved_value_minor: 1234,
      phase: "on_hold",
      effect: "The callee is still on the line and will hear the approval of $12.34 now.",
    })
    // The agent offers what was approved, and the callee agrees.
    await expect
      .poll(
        async () =>
          (await srv.sql<{ outcome: string | null }[]>`select outcome from run_targets where run_id = ${runId}`)[0]
            ?.outcome,
        { timeout: 15_000 },
      )
      .toBe("agreed_with_concession")
    const lines = await srv.sql<{ text: string }[]>`
      select text from turns where call_id = ${ap.call_id} and speaker = 'agent' order by turn_index`
    expect(lines.some((l) => l.text.includes("$12.34"))).toBe(true)
    expect(lines.some((l) => l.text.includes("$10.00"))).toBe(false)
    // The result's agreed value is the approved amount, once the call is analysed.
    await expect
      .poll(async () => (await call("GET", `/api/runs/${runId}/results`, s)).body.results?.[0]?.agreed_value_minor, {
        timeout: 20_000,
      })
      .toBe(1234)
    const listed = (await call("GET", `/api/approvals?workflow_id=${w.id}`, s)).body.approvals as Json[]
    expect(listed[0]).toMatchObject({ id: ap.id, approved_value_minor: 1234, proposed_value_minor: 1000 })
  }, 40_000)

  it("approved as proposed records the proposal's amount", async () => {
    const s = await funded()
    const { w } = await runCalling(s, [{ phone: "+12025550177" }])
    const [ap] = (await pendingOf(s, w.id, 1)) as [Json]
    const decided = await call("POST", `/api/approvals/${ap.id}/decide`, s, { decision: "approve" })
    expect(decided.body).toMatchObject({
      approved_value_minor: 1000,
      effect: "The callee is still on the line and will hear the approval of $10.00 now.",
    })
  })

  it("is 422 naming value_minor outside (0, cap], for another action or with deny; nothing decided", async () => {
    const s = await funded()
    const other = await funded()
    const { w } = await runCalling(s, [{ phone: "+12025550187" }, { phone: "+12025550198" }])
    const pending = await pendingOf(s, w.id, 2)
    const concession = pending.find((x) => x.proposed_action === "concession")!
    const callback = pending.find((x) => x.proposed_action === "callback")!
    const refused: [number, Json][] = [
      [concession.id, { decision: "approve", value_minor: 2001 }],
      [concession.id, { decision: "approve", value_minor: 0 }],
      [concession.id, { decision: "approve", value_minor: -5 }],
      [concession.id, { decision: "approve", value_minor: 12.5 }],
      [concession.id, { decision: "approve", value_minor: "1000" }],
      [concession.id, { decision: "deny", value_minor: 1000 }],
      [callback.id, { decision: "approve", value_minor: 1000 }],
    ]
    for (const [id, body] of refused) {
      const res = await call("POST", `/api/approvals/${id}/decide`, s, body)
      expect(res.status, JSON.stringify(body)).toBe(422)
      expect(res.body).toMatchObject({ code: "VALIDATION_FAILED", field: "value_minor" })
      expect(typeof res.body.error).toBe("string")
    }
    const over = await call("POST", `/api/approvals/${concession.id}/decide`, s, {
      decision: "approve",
      value_minor: 2001,
    })
    expect(over.body.error).toMatch(/2000/)
    // Another workspace's approval is absent, whatever the amount.
    expect(
      (await call("POST", `/api/approvals/${concession.id}/decide`, other, { decision: "approve", value_minor: 10 }))
        .status,
    ).toBe(404)
    const still = (await call("GET", `/api/approvals?workflow_id=${w.id}&status=pending`, s)).body.approvals as Json[]
    expect(still.map((x) => x.id).sort()).toEqual([concession.id, callback.id].sort())
    // The cap itself is allowed.
    const atCap = await call("POST", `/api/approvals/${concession.id}/decide`, s, {
      decision: "approve",
      value_minor: 2000,
    })
    expect(atCap.body).toMatchObject({ status: "approved", approved_value_minor: 2000 })
    await call("POST", `/api/approvals/${callback.id}/decide`, s, { decision: "deny" })
  }, 30_000)

  it("needs the supervise permission: an analyst reads the queue but cannot decide", async () => {
    const s = await funded()
    const analyst = await a.addMember(s, "analyst")
    const supervisor = await a.addMember(s, "supervisor")
    const { w } = await runCalling(s, [{ phone: "+12025550207" }])
    const [ap] = (await pendingOf(analyst, w.id, 1)) as [Json]
    const denied = await call("POST", `/api/approvals/${ap.id}/decide`, analyst, {
      decision: "approve",
      value_minor: 500,
    })
    expect(denied.status).toBe(403)
    const ok = await call("POST", `/api/approvals/${ap.id}/decide`, supervisor, {
      decision: "approve",
      value_minor: 500,
    })
    expect(ok.body).toMatchObject({ status: "approved", approved_value_minor: 500 })
  }, 30_000)
})

describe("the pending count on the approvals stream", () => {
  const pendingEvents = (c: SseClient) =>
    c.events.filter((e) => e.event === "pending").map((e) => JSON.parse(e.data) as { pending: number; at: string })

  async function until(c: SseClient, test: (n: number) => boolean, what: string): Promise<void> {
    const deadline = Date.now() + 15_000
    while (!test(pendingEvents(c).at(-1)?.pending ?? -1)) {
      if (Date.now() > deadline) throw new Error(`no pending count ${what}: ${JSON.stringify(c.events)}`)
      await new Promise((r) => setTimeout(r, 50))
    }
  }

  it("is sent on connect and after every change, as a named event beside the unchanged change events", async () => {
    const s = await funded()
    const c = sse(`${srv.url}/api/approvals/stream`, { cookie: s.cookie })
    expect(await c.status).toBe(200)
    await until(c, (n) => n === 0, "of 0 on connect")
    expect(Date.parse(pendingEvents(c)[0]!.at)).not.toBeNaN()

    const { w } = await runCalling(s, [{ phone: "+12025550217" }, { phone: "+12025550227" }])
    const pending = await pendingOf(s, w.id, 2)
    await until(c, (n) => n === 2, "of 2 after two proposals")
    await call("POST", `/api/approvals/${pending[0]!.id}/decide`, s, { decision: "deny" })
    await until(c, (n) => n === 1, "of 1 after a decision")
    await call("POST", `/api/approvals/${pending[1]!.id}/decide`, s, { decision: "approve", value_minor: 700 })
    await until(c, (n) => n === 0, "of 0 after both")

    // A second watcher gets the count as it stands when it connects.
    const late = sse(`${srv.url}/api/approvals/stream`, { authorization: `Bearer ${s.token}` })
    await until(late, (n) => n === 0, "of 0 for a late watcher")

    // The change events keep their shape, unnamed (what EventSource.onmessage sees).
    const changes = c.events.filter((e) => e.event === undefined).map((e) => JSON.parse(e.data) as Json)
    expect(changes.length).toBeGreaterThanOrEqual(4)
    for (const e of changes) expect(Object.keys(e).sort()).toEqual(["approval_id", "at", "status"])
    for (const p of pendingEvents(c)) expect(Object.keys(p).sort()).toEqual(["at", "pending"])
    c.close()
    late.close()
  }, 40_000)
})
