// Post-call analysis through the real server and its in-process runtime, on the simulator: every
// connected call analysed once with exact values per sim callee behaviour, never-connected calls
// left alone, approved concessions and callbacks filling the agreed terms, one ledger charge and one
// call.analyzed event per analysis, analysis turned off, the section validated (422), and isolation.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { findAnalysis } from "../../src/analysis/analysis.repo.js"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
let a: ReturnType<typeof api>

// A call holds for a decision 1000 s × 0.01 = 10 s: time enough to decide while it is live.
const ENV = { ...FAST_RUNTIME_ENV, APPROVAL_HOLD_MS: "1000000", ANALYSIS_POLL_MS: "100" }

beforeAll(async () => {
  srv = await startTestServer({ env: ENV })
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

const FIELDS = [
  { name: "wants_product", type: "boolean", description: "Whether the callee wants the plan" },
  { name: "callback_date", type: "date", description: "When the callee asked to be called again" },
  { name: "contact_phone", type: "phone", description: "The callee's number" },
  { name: "objection_reason", type: "string", description: "Why the callee hesitated" },
  { name: "stage", type: "enum", description: "Where the lead stands", enum: ["agreed", "declined", "neutral"] },
]

async function workflow(s: Session, analysis: unknown): Promise<number> {
  const w = (
    await call("POST", "/api/workflows", s, {
      nl_prompt: "Win back lapsed members with a discount of up to $20; book callbacks; escalate when asked.",
    })
  ).body
  const put = await call("PUT", `/api/workflows/${w.id}`, s, { rule_book: { analysis } })
  expect(put.status).toBe(200)
  return w.id
}

async function run(s: Session, workflowId: number, rows: Array<{ phone: string; name?: string }>): Promise<number> {
  await call("POST", `/api/workflows/${workflowId}/audience`, s, { rows })
  await call("PUT", `/api/workflows/${workflowId}/compliance`, s, { consent_attestation_text: "Opted in." })
  const r = await call("POST", `/api/workflows/${workflowId}/run`, s)
  expect(r.status).toBe(201)
  return r.body.run_id
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, tries = 300): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const v = await probe()
    if (v !== undefined) return v
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`timed out waiting for ${what}`)
}

const runDone = (runId: number) =>
  until(`run ${runId}`, async () => {
    const [r] = await srv.sql<[{ status: string }]>`select status from runs where id = ${runId}`
    return r?.status === "completed" ? r : undefined
  })

/** The run's calls with their analyses, once every answered call's analysis is done or failed. */
const analysed = (runId: number) =>
  until(`analyses of run ${runId}`, async () => {
    const rows = await srv.sql<Json[]>`
      select c.id as call_id, c.phone_e164, c.outcome, c.answered_at, a.status, a.summary, a.goal_met,
        a.sentiment, a.fields, a.model, a.model_version, a.charged_minor, a.callback_at, a.agreed_value_minor,
        a.attempts
      from calls c left join call_analyses a on a.call_id = c.id
      where c.run_id = ${runId} order by c.phone_e164, c.id`
    const ready = rows.every((r) => r.answered_at === null || r.status === "done" || r.status === "failed")
    return ready && rows.length > 0 ? rows : undefined
  })

describe("the analysis of a sim campaign", () => {
  it("analyses each connected call once, with exact values per callee behaviour, and charges each once", async () => {
    const s = await funded()
    const wf = await workflow(s, { fields: FIELDS })
    const runId = await run(s, wf, [
      { phone: "+12025550100" }, // no answer
      { phone: "+12025550101" }, // busy
      { phone: "+12025550103", name: "Asha" }, // agrees
      { phone: "+12025550106" }, // declines
    ])
    await runDone(runId)
    const rows = await analysed(runId)
    const byPhone = new Map(rows.map((r) => [r.phone_e164, r]))
    // Never connected: no row, no model call, no charge.
    for (const p of ["+12025550100", "+12025550101"]) {
      expect(byPhone.get(p)!.answered_at).toBeNull()
      expect(byPhone.get(p)!.status).toBeNull()
    }
    expect(byPhone.get("+12025550103")).toMatchObject({
      outcome: "agreed",
      status: "done",
      summary: "Asha was interested and agreed to go ahead.",
      goal_met: true,
      sentiment: "positive",
      model: "sim-1",
      model_version: "sim-1",
      charged_minor: 1,
      callback_at: null,
      agreed_value_minor: null,
      attempts: 1,
    })
    const agreed = byPhone.get("+12025550103")!
    expect(agreed.fields).toMatchObject({
      wants_product: true,
      callback_date: null,
      contact_phone: "+12025550103",
      stage: "agreed",
    })
    expect(typeof agreed.fields.objection_reason).toBe("string")
    expect(byPhone.get("+12025550106")).toMatchObject({
      outcome: "declined",
      status: "done",
      summary: "The callee objected that they did not need the offer and declined.",
      goal_met: false,
      sentiment: "negative",
      charged_minor: 1,
    })
    expect(byPhone.get("+12025550106")!.fields).toEqual({
      wants_product: false,
      callback_date: null,
      contact_phone: "+12025550106",
      objection_reason: expect.stringMatching(/need/),
      stage: "declined",
    })

    // One ledger entry per analysed call, keyed by the call; one call.analyzed event each.
    const done = rows.filter((r) => r.status === "done").map((r) => r.call_id)
    const ledger = await srv.sql<Json[]>`
      select amount_minor, kind, reference, idempotency_key from ledger_entries
      where tenant_id = ${s.tenantId} and kind = 'call_analysis' order by id`
    expect(ledger.map((l) => l.idempotency_key).sort()).toEqual(done.map((id) => `analysis:${id}`).sort())
    expect(ledger.every((l) => l.amount_minor === -1)).toBe(true)
    const events = await srv.sql<Json[]>`
      select body from webhook_events where tenant_id = ${s.tenantId} and type = 'call.analyzed'`
    expect(events.map((e) => e.body.data.call_id).sort()).toEqual([...done].sort())
    const agreedEvent = events.find((e) => e.body.data.call_id === agreed.call_id)!.body
    expect(agreedEvent).toMatchObject({
      type: "call.analyzed",
      tenant_id: s.tenantId,
      data: { status: "done", goal_met: true, sentiment: "positive", fields: { stage: "agreed" } },
    })

    // Isolation: another workspace cannot read the analysis.
    const other = await a.signup({ country: "US" })
    expect(await findAnalysis(srv.sql, other.tenantId, agreed.call_id)).toBeUndefined()
    expect((await findAnalysis(srv.sql, s.tenantId, agreed.call_id))?.status).toBe("done")
  })

  it("fills agreed_value_minor and callback_at from approved approvals, not the model", async () => {
    const s = await funded()
    const wf = await workflow(s, { fields: FIELDS })
    const runId = await run(s, wf, [{ phone: "+12025550117" }, { phone: "+12025550118" }])
    const decided = new Map<string, Json>()
    await until(
      "two approvals decided",
      async () => {
        const { body } = await call("GET", `/api/approvals?workflow_id=${wf}&status=pending`, s)
        for (const ap of body.approvals as Json[]) {
          const d = await call("POST", `/api/approvals/${ap.id}/decide`, s, { decision: "approve" })
          if (d.status === 200) decided.set(ap.proposed_action, { ...ap, decided_at: d.body.decided_at })
        }
        return decided.size === 2 ? true : undefined
      },
      100,
    )
    // Not until the run completes: the approved callback is a new attempt 72 s later.
    const rows = await analysed(runId)
    const discount = rows.find((r) => r.phone_e164 === "+12025550117" && r.status === "done")!
    expect(discount).toMatchObject({
      outcome: "agreed_with_concession",
      goal_met: true,
      sentiment: "positive",
      summary: "The callee asked for a discount and agreed to go ahead with the approved discount.",
      agreed_value_minor: decided.get("concession")!.proposed_value_minor,
      callback_at: null,
    })
    expect(decided.get("concession")!.proposed_value_minor).toBeGreaterThan(0)
    const callback = rows.find((r) => r.call_id === decided.get("callback")!.call_id)!
    expect(callback).toMatchObject({ status: "done", agreed_value_minor: null, goal_met: false })
    // When the runtime will dial again, as it scheduled it at hangup: the call's retry in the decision
    // log, CALLBACK_DELAY_MS (2 h) × the run's time scale (0.01) after the call ended.
    const [scheduled] = await srv.sql<[{ retry_at: string; ended_at: Date }]>`
      select d.detail ->> 'retry_at' as retry_at, c.ended_at
      from calls c
      join dial_decisions d on d.call_id = c.id and d.decision = 'retry' and d.reason = 'callback_scheduled'
      where c.id = ${callback.call_id}`
    expect(scheduled).toBeDefined()
    expect(new Date(callback.callback_at).getTime()).toBe(Number(scheduled.retry_at))
    expect(Number(scheduled.retry_at) - scheduled.ended_at.getTime()).toBe(72_000)
    expect(callback.fields.callback_date).toMatch(/^\d{4}-\d{2}-\d{2}$/)
  })

  it("analyses nothing of a workflow whose analysis is turned off", async () => {
    const s = await funded()
    const off = await workflow(s, { enabled: false })
    const on = await workflow(s, { fields: [] })
    const offRun = await run(s, off, [{ phone: "+12025550104" }])
    await runDone(offRun)
    // A call that ended after the one of the workflow turned off is analysed: its queue entry came with its end.
    const onRun = await run(s, on, [{ phone: "+12025550105" }])
    await runDone(onRun)
    const [onRow] = await analysed(onRun)
    expect(onRow).toMatchObject({ status: "done", fields: {} })
    const offRows = await srv.sql<Json[]>`
      select c.id, c.answered_at, a.call_id from calls c left join call_analyses a on a.call_id = c.id
      where c.run_id = ${offRun}`
    expect(offRows).toHaveLength(1)
    expect(offRows[0]!.answered_at).not.toBeNull()
    expect(offRows[0]!.call_id).toBeNull()
    const charges = await srv.sql`
      select 1 from ledger_entries where tenant_id = ${s.tenantId} and kind = 'call_analysis'`
    expect(charges).toHaveLength(1)
  })
})

describe("the analysis section of a rule book", () => {
  it.each([
    ["a bad type", { fields: [{ name: "x", type: "colour", description: "d" }] }, "analysis.fields.0.type"],
    [
      "more than 20 fields",
      { fields: Array.from({ length: 21 }, (_, i) => ({ name: `f${i}`, type: "string", description: "d" })) },
      "analysis.fields",
    ],
    [
      "duplicate names",
      {
        fields: [
          { name: "budget", type: "number", description: "d" },
          { name: "budget", type: "string", description: "d" },
        ],
      },
      "analysis.fields.1.name",
    ],
    [
      "an enum without values",
      { fields: [{ name: "tier", type: "enum", description: "d" }] },
      "analysis.fields.0.enum",
    ],
    [
      "a name not in snake_case",
      { fields: [{ name: "Budget", type: "number", description: "d" }] },
      "analysis.fields.0.name",
    ],
    [
      "a built-in's name",
      { fields: [{ name: "summary", type: "string", description: "d" }] },
      "analysis.fields.0.name",
    ],
    [
      "values on a non-enum",
      { fields: [{ name: "n", type: "number", description: "d", enum: ["1"] }] },
      "analysis.fields.0.enum",
    ],
  ])("refuses %s with 422 RULE_BOOK_INVALID and keeps the version", async (_, analysis, field) => {
    const s = await a.signup({ country: "US" })
    const w = (await call("POST", "/api/workflows", s, { nl_prompt: "Survey customers about their delivery." })).body
    const res = await call("PUT", `/api/workflows/${w.id}`, s, { rule_book: { analysis } })
    expect(res.status).toBe(422)
    expect(res.body.code).toBe("RULE_BOOK_INVALID")
    expect(res.body.errors.map((e: Json) => e.field)).toContain(field)
    const after = await call("GET", `/api/workflows/${w.id}`, s)
    expect(after.body.rule_book_version).toBe(1)
    expect(after.body.rule_book.analysis).toBeUndefined()
  })

  it("stores a valid section as a new rule-book version, defaults filled", async () => {
    const s = await a.signup({ country: "US" })
    const w = (await call("POST", "/api/workflows", s, { nl_prompt: "Survey customers about their delivery." })).body
    const res = await call("PUT", `/api/workflows/${w.id}`, s, {
      rule_book: { analysis: { fields: [FIELDS[0], FIELDS[4]] } },
    })
    expect(res.status).toBe(200)
    expect(res.body.rule_book_version).toBe(2)
    expect(res.body.rule_book.analysis).toEqual({ enabled: true, fields: [FIELDS[0], FIELDS[4]] })
    const [v] = await srv.sql<[{ body: Json }]>`
      select body from rule_books where workflow_id = ${w.id} and version = 2`
    expect(v.body.analysis.fields).toHaveLength(2)
    // A regenerated book keeps the operator's fields.
    const regen = await call("POST", `/api/workflows/${w.id}/regenerate-rule-book`, s)
    expect(regen.status).toBe(200)
    expect(regen.body.rule_book_version).toBe(3)
    expect(regen.body.rule_book.analysis).toEqual({ enabled: true, fields: [FIELDS[0], FIELDS[4]] })
  })
})
