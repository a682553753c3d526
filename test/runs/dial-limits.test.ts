// Dial limits that belong to the account and the plan (src/dialing/), and the workspace's slot
// counter rows (migrations/0026): attempts from several runtime processes at once never exceed the
// workspace's cap; a slot comes back when its call ends, whoever ends it; a dead process's slots
// stop counting with its lease. The admin endpoint sets a workspace's own limits; a run follows
// them; and on the default settings a simulator campaign starts its calls at once, not at 3/s.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as calls from "../../src/calls/calls.repo.js"
import { carrierAccountCaps, effectiveDialLimits, workspaceCaps } from "../../src/dialing/dial-limits.js"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

const SYSTEM_KEY = "dial-limits-system-key-0123456789"

let srv: TestServer
let a: ReturnType<typeof api>
let owner: Session

beforeAll(async () => {
  // The default dialer settings (no DIALER_* set): what a newcomer's `npm start` runs with.
  srv = await startTestServer({
    env: { SIM_TIME_SCALE: "0.05", CALLING_HOURS: "any", RUN_CLAIM_INTERVAL_MS: "200", SYSTEM_KEY },
  })
  a = api(srv)
  owner = await a.signup({ country: "US" })
})
afterAll(async () => srv?.stop())

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const call = async (method: string, path: string, s: { token: string }, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

const admin = async (method: string, tenantId: number | string | undefined, body?: unknown, key = SYSTEM_KEY) => {
  const res = await a.call(method, "/api/internal/dial-limits", {
    headers: { "x-system-key": key, ...(tenantId !== undefined && { "x-tenant-id": String(tenantId) }) },
    ...(body !== undefined && { body }),
  })
  return { status: res.status, body: (await res.json()) as Json }
}

/** Distinct US numbers whose callees answer and agree (last digit 3). */
const numbers = (n: number, base: number) => Array.from({ length: n }, (_, i) => `+1${base + i * 10 + 3}`)

async function fund(s: Session, amountMinor = 5_000_000) {
  const intent = (await call("POST", "/billing/topup", s, { amount_minor: amountMinor })).body
  const res = await a.call("POST", "/billing/webhooks/stub", {
    body: { external_id: intent.external_id, status: "succeeded" },
  })
  expect(res.status).toBe(200)
}

async function workflowWith(s: Session, phones: string[]): Promise<Json> {
  const w = (await call("POST", "/api/workflows", s, { nl_prompt: "Invite lapsed members back with a discount." })).body
  const aud = await call("POST", `/api/workflows/${w.id}/audience`, s, { rows: phones.map((phone) => ({ phone })) })
  expect(aud.body.accepted).toBe(phones.length)
  const att = await call("PUT", `/api/workflows/${w.id}/compliance`, s, { consent_attestation_text: "Opted in." })
  expect(att.status).toBe(200)
  return w
}

/**
 * A running run owned by `me` for a day, with a target per audience row: no runtime claims it, so
 * the test plays the runtime process `me`.
 */
async function ownedRun(s: Session, me: string, phones: string[]) {
  const w = await workflowWith(s, phones)
  const [run] = await srv.sql<[{ id: number }]>`
    insert into runs (tenant_id, workflow_id, rule_book_id, status, owner_instance, lease_expires_at)
    select tenant_id, id, rule_book_id, 'running', ${me}, now() + interval '1 day' from workflows where id = ${w.id}
    returning id`
  const targets = await srv.sql<{ id: number; target_id: number }[]>`
    insert into run_targets (tenant_id, run_id, target_id, phone_e164)
    select ${s.tenantId}, ${run.id}, a.id, a.phone_e164 from audience_targets a where a.workflow_id = ${w.id}
    order by a.id
    returning id, target_id`
  return { runId: run.id as number, workflowId: w.id as number, targets }
}

const decision = (targetId: number) => ({
  targetId,
  at: Date.now(),
  decision: "dial",
  reason: "first_attempt",
  detail: {},
  costMinor: null,
})

const batchOf = (s: Session, me: string, r: { runId: number; workflowId: number }, cap: number) => ({
  me,
  runId: r.runId,
  tenantId: s.tenantId,
  workflowId: r.workflowId,
  provider: "sim",
  tenantCap: cap,
  slotLeaseMs: 60_000,
  recordContact: false,
})

const inUse = async (tenantId: number) => calls.slotsInUse(srv.sql, tenantId)

describe("the workspace's slot counter", () => {
  it("admits exactly the cap when two processes begin attempts at once, one target each", async () => {
    const s = await a.signup({ country: "US" })
    const runA = await ownedRun(s, "proc-a", numbers(20, 2025550000))
    const runB = await ownedRun(s, "proc-b", numbers(20, 2025551000))
    const cap = 7
    const results = await Promise.all([
      ...runA.targets.map((t) =>
        calls.beginAttempt(srv.sql, {
          ...batchOf(s, "proc-a", runA, cap),
          runTargetId: t.id,
          decision: decision(t.target_id),
        }),
      ),
      ...runB.targets.map((t) =>
        calls.beginAttempt(srv.sql, {
          ...batchOf(s, "proc-b", runB, cap),
          runTargetId: t.id,
          decision: decision(t.target_id),
        }),
      ),
    ])
    const begun = results.filter((r) => typeof r !== "string")
    expect(begun).toHaveLength(cap)
    expect(results.filter((r) => r === "tenant_cap")).toHaveLength(40 - cap)
    const [{ n }] = await srv.sql<[{ n: number }]>`
      select count(*)::int as n from calls where tenant_id = ${s.tenantId} and status <> 'ended'`
    expect(n).toBe(cap)
    expect(await inUse(s.tenantId)).toBe(cap)
    // Refused targets are still queued: nothing was marked dialing for them.
    const [{ dialing }] = await srv.sql<[{ dialing: number }]>`
      select count(*)::int as dialing from run_targets where tenant_id = ${s.tenantId} and status = 'dialing'`
    expect(dialing).toBe(cap)
  })

  it("admits the cap between concurrent batches, frees a slot at a call's end, drops a dead process's", async () => {
    const s = await a.signup({ country: "US" })
    const runA = await ownedRun(s, "proc-a", numbers(15, 2025552000))
    const runB = await ownedRun(s, "proc-b", numbers(15, 2025553000))
    const cap = 12
    const items = (r: typeof runA) => r.targets.map((t) => ({ runTargetId: t.id, decision: decision(t.target_id) }))
    const [ra, rb] = await Promise.all([
      calls.beginAttempts(srv.sql, batchOf(s, "proc-a", runA, cap), items(runA)),
      calls.beginAttempts(srv.sql, batchOf(s, "proc-b", runB, cap), items(runB)),
    ])
    const begunA = ra.filter((r): r is calls.BegunAttempt => typeof r !== "string")
    const begunB = rb.filter((r): r is calls.BegunAttempt => typeof r !== "string")
    expect(begunA.length + begunB.length).toBe(cap)
    // In order: once the cap is reached, every later target of the batch is refused.
    for (const r of [ra, rb]) {
      const firstRefused = r.findIndex((x) => typeof x === "string")
      if (firstRefused >= 0) expect(r.slice(firstRefused).every((x) => x === "tenant_cap")).toBe(true)
    }
    expect(await inUse(s.tenantId)).toBe(cap)

    // A call of proc-a ends, finished by proc-a: its slot comes back.
    const done = begunA[0] ?? begunB[0]!
    const doneOwner = begunA[0] !== undefined ? "proc-a" : "proc-b"
    const doneRun = begunA[0] !== undefined ? runA : runB
    const [row] = await srv.sql<[{ run_target_id: number }]>`select run_target_id from calls where id = ${done.callId}`
    const finished = await calls.finishAttempt(srv.sql, {
      me: doneOwner,
      runId: doneRun.runId,
      tenantId: s.tenantId,
      callId: done.callId,
      runTargetId: row.run_target_id,
      outcome: "agreed",
      connectedSeconds: 10,
      costMinor: 0,
      reservedMinor: null,
      endedAt: new Date(),
      next: { kind: "done", outcome: "agreed" },
      decision: { ...decision(done.targetId), decision: "stop", reason: "final_outcome" },
      addToDnc: false,
      phone: done.phone,
    })
    expect(finished).toBe(true)
    expect(await inUse(s.tenantId)).toBe(cap - 1)
    const left = runA.targets.filter((t) => !begunA.some((b) => b.targetId === t.target_id))
    const more = await calls.beginAttempts(
      srv.sql,
      batchOf(s, "proc-a", runA, cap),
      left.map((t) => ({ runTargetId: t.id, decision: decision(t.target_id) })),
    )
    expect(more.filter((r) => typeof r !== "string")).toHaveLength(1)
    expect(await inUse(s.tenantId)).toBe(cap)

    // proc-b dies: once its slot row's lease lapses, its calls no longer hold the workspace's slots.
    const bHeld = begunB.length - (doneOwner === "proc-b" ? 1 : 0)
    await srv.sql`update dial_slot_counts set expires_at = now() - interval '1 second'
      where tenant_id = ${s.tenantId} and owner_instance = 'proc-b'`
    expect(await inUse(s.tenantId)).toBe(cap - bHeld)
  })

  it("refuses every attempt of a process that no longer owns the run, and a target no longer due", async () => {
    const s = await a.signup({ country: "US" })
    const run = await ownedRun(s, "proc-a", numbers(2, 2025554000))
    const [t0, t1] = run.targets
    const theirs = await calls.beginAttempts(srv.sql, batchOf(s, "proc-x", run, 10), [
      { runTargetId: t0!.id, decision: decision(t0!.target_id) },
    ])
    expect(theirs).toEqual(["not_owner"])
    const first = await calls.beginAttempts(srv.sql, batchOf(s, "proc-a", run, 10), [
      { runTargetId: t1!.id, decision: decision(t1!.target_id) },
      { runTargetId: t1!.id, decision: decision(t1!.target_id) },
    ])
    expect(typeof first[0]).toBe("object")
    // The same target twice in one batch: dialed once.
    expect(first[1]).toBe("not_due")
    const again = await calls.beginAttempts(srv.sql, batchOf(s, "proc-a", run, 10), [
      { runTargetId: t1!.id, decision: decision(t1!.target_id) },
    ])
    expect(again).toEqual(["not_due"])
    expect(await inUse(s.tenantId)).toBe(1)
    const [{ n }] = await srv.sql<[{ n: number }]>`select count(*)::int as n from calls where run_id = ${run.runId}`
    expect(n).toBe(1)
  })
})

describe("where the limits come from", () => {
  it("takes the smallest of the carrier account's, the plan's or the workspace's, and the ceilings", () => {
    const ceilings = { callsPerSecond: 1000, maxConcurrentCalls: 10_000, maxConcurrentPerWorkflow: 10_000 }
    expect(carrierAccountCaps("sim").callsPerSecond).toBeNull()
    expect(carrierAccountCaps("telco_a:AC123").callsPerSecond).toBe(3)
    const plan = { callsPerSecond: 100, maxConcurrentCalls: 1000, maxConcurrentPerWorkflow: 1000 }
    expect(effectiveDialLimits([workspaceCaps(plan, undefined), carrierAccountCaps("sim")], ceilings)).toEqual(plan)
    expect(effectiveDialLimits([workspaceCaps(plan, undefined), carrierAccountCaps("telco_a:AC1")], ceilings)).toEqual({
      ...plan,
      callsPerSecond: 3,
    })
    const own = { callsPerSecond: 5000, maxConcurrentCalls: null, maxConcurrentPerWorkflow: 2 }
    expect(effectiveDialLimits([workspaceCaps(plan, own)], ceilings)).toEqual({
      callsPerSecond: 1000,
      maxConcurrentCalls: 1000,
      maxConcurrentPerWorkflow: 2,
    })
  })
})

describe("the admin endpoint", () => {
  it("needs the system key and a workspace, and validates what it sets", async () => {
    expect((await admin("GET", owner.tenantId, undefined, "wrong-key-wrong-key")).status).toBe(401)
    const none = await admin("GET", undefined)
    expect(none.status).toBe(422)
    expect(none.body.code).toBe("VALIDATION_FAILED")
    const missing = await admin("GET", 987_654_321)
    expect(missing.status).toBe(404)
    expect(missing.body.code).toBe("NOT_FOUND")
    const putMissing = await admin("PUT", 987_654_321, {
      calls_per_second: 5,
      max_concurrent_calls: null,
      max_concurrent_per_workflow: null,
    })
    expect(putMissing.status).toBe(404)
    for (const bad of [
      { calls_per_second: -1, max_concurrent_calls: null, max_concurrent_per_workflow: null },
      { calls_per_second: 1e-300, max_concurrent_calls: null, max_concurrent_per_workflow: null },
      { calls_per_second: 1, max_concurrent_calls: 1.5, max_concurrent_per_workflow: null },
      { calls_per_second: 1, max_concurrent_calls: 1, max_concurrent_per_workflow: 1e12 },
      { calls_per_second: "9", max_concurrent_calls: 1, max_concurrent_per_workflow: 1 },
      { calls_per_second: 1, max_concurrent_calls: 1, max_concurrent_per_workflow: 1, owner: true },
      { calls_per_second: 1 },
    ]) {
      const r = await admin("PUT", owner.tenantId, bad)
      expect(r.status, JSON.stringify(bad)).toBe(422)
      expect(r.body.code).toBe("VALIDATION_FAILED")
    }
  })

  it("answers the plan's defaults, sets the workspace's own under the ceilings, and drops them again", async () => {
    const s = await a.signup({ country: "US" })
    const before = await admin("GET", s.tenantId)
    expect(before.status).toBe(200)
    expect(before.body).toMatchObject({
      tenant_id: s.tenantId,
      plan_tier: "free",
      plan: { calls_per_second: 100, max_concurrent_calls: 1000, max_concurrent_per_workflow: 1000 },
      workspace: null,
      ceilings: { calls_per_second: 1000, max_concurrent_calls: 10_000, max_concurrent_per_workflow: 10_000 },
      effective: { calls_per_second: 100, max_concurrent_calls: 1000, max_concurrent_per_workflow: 1000 },
    })
    const set = await admin("PUT", s.tenantId, {
      calls_per_second: 50_000,
      max_concurrent_calls: 40,
      max_concurrent_per_workflow: null,
    })
    expect(set.status).toBe(200)
    expect(set.body).toMatchObject({
      workspace: { calls_per_second: 50_000, max_concurrent_calls: 40, max_concurrent_per_workflow: null },
      effective: { calls_per_second: 1000, max_concurrent_calls: 40, max_concurrent_per_workflow: 1000 },
    })
    // Another workspace is untouched.
    expect((await admin("GET", owner.tenantId)).body.workspace).toBeNull()
    const cleared = await admin("DELETE", s.tenantId)
    expect(cleared.status).toBe(200)
    expect(cleared.body).toMatchObject({ workspace: null, effective: before.body.effective })
  })
})

describe("a run under its workspace's limits", () => {
  it("on the default settings, starts a simulator campaign's calls at once instead of 3 a second", async () => {
    const s = await a.signup({ country: "US" })
    await fund(s)
    const phones = numbers(60, 2125550000)
    const w = await workflowWith(s, phones)
    const t0 = Date.now()
    const run = await call("POST", `/api/workflows/${w.id}/run`, s)
    expect(run.status).toBe(201)
    let dialed = 0
    while (Date.now() - t0 < 15_000) {
      ;[{ n: dialed }] = await srv.sql<[{ n: number }]>`
        select count(*)::int as n from calls where run_id = ${run.body.run_id}`
      if (dialed >= phones.length) break
      await new Promise((r) => setTimeout(r, 50))
    }
    // At the old default of 3 calls/s and 20 in flight this took 20 s; the plan allows 100/s.
    expect(dialed).toBe(phones.length)
    expect(Date.now() - t0).toBeLessThan(10_000)
    // Compliance and money applied as on any run: a dial decision and a cool-down record per callee.
    const [{ decisions, contacts }] = await srv.sql<[{ decisions: number; contacts: number }]>`
      select (select count(*)::int from dial_decisions where run_id = ${run.body.run_id} and decision = 'dial')
          as decisions,
        (select count(*)::int from recent_contacts where tenant_id = ${s.tenantId}) as contacts`
    expect(decisions).toBe(phones.length)
    expect(contacts).toBe(phones.length)
    await call("POST", `/api/workflows/${w.id}/pause`, s)
  })

  it("never has more calls in flight than the workspace's own cap an admin set", async () => {
    const s = await a.signup({ country: "US" })
    await fund(s)
    const set = await admin("PUT", s.tenantId, {
      calls_per_second: null,
      max_concurrent_calls: 3,
      max_concurrent_per_workflow: null,
    })
    expect(set.body.effective.max_concurrent_calls).toBe(3)
    const phones = numbers(12, 3125550000)
    const w = await workflowWith(s, phones)
    const run = await call("POST", `/api/workflows/${w.id}/run`, s)
    expect(run.status).toBe(201)
    let peak = 0
    let dialed = 0
    const t0 = Date.now()
    while (Date.now() - t0 < 25_000 && dialed < phones.length) {
      const [r] = await srv.sql<[{ live: number; dialed: number }]>`
        select count(*) filter (where status <> 'ended')::int as live, count(*)::int as dialed
        from calls where run_id = ${run.body.run_id}`
      peak = Math.max(peak, r.live)
      dialed = r.dialed
      await new Promise((res) => setTimeout(res, 20))
    }
    expect(dialed).toBeGreaterThan(3)
    expect(peak).toBeLessThanOrEqual(3)
    expect(peak).toBeGreaterThan(0)
    await call("POST", `/api/workflows/${w.id}/pause`, s)
  }, 40_000)
})
