// How ended calls reach the analysis queue: an answered call's pending row is written in the
// transaction that ends it (calls.repo finishAttempts), so the worker never scans calls to find
// work; a call that never connected, or whose workflow turns analysis off, gets none; and the
// repair sweep (enqueueMissing) pages through ended calls by (ended_at, id), each looked at once,
// adding a row only for a call ended without one.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { enqueueMissing, type SweepMark } from "../../src/analysis/analysis.repo.js"
import { type AttemptEnd, finishAttempts } from "../../src/calls/calls.repo.js"
import { api, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
let owner: Session

beforeAll(async () => {
  srv = await sharedTestServer()
  owner = await api(srv).signup({ country: "US" })
})
afterAll(async () => srv?.stop())

/** A completed run of `n` targets (no runtime involved: the rows are written here), with `analysis` in its book. */
async function seededRun(n: number, analysis: unknown = { fields: [] }) {
  const t = owner.tenantId
  const { sql } = srv
  const [w] = await sql<[{ id: number }]>`
    insert into workflows (tenant_id, name, persona, nl_prompt) values (${t}, 'queue', 'priya', 'q') returning id`
  const [rb] = await sql<[{ id: number }]>`
    insert into rule_books (tenant_id, workflow_id, version, body, source)
    values (${t}, ${w.id}, 1, ${sql.json({ goal: "Renew.", analysis } as never)}, 'edited') returning id`
  const [run] = await sql<[{ id: number }]>`
    insert into runs (tenant_id, workflow_id, rule_book_id, status) values (${t}, ${w.id}, ${rb.id}, 'completed')
    returning id`
  const phone = (i: number) => `+1202555${String(1000 + i).padStart(4, "0")}`
  const targets = await sql<{ id: number; target_id: number; phone_e164: string }[]>`
    with a as (
      insert into audience_targets (tenant_id, workflow_id, phone_e164)
      select ${t}, ${w.id}, x from unnest(${Array.from({ length: n }, (_, i) => phone(i))}::text[]) x
      returning id, phone_e164)
    insert into run_targets (tenant_id, run_id, target_id, phone_e164, status, attempts)
    select ${t}, ${run.id}, a.id, a.phone_e164, 'dialing', 1 from a
    returning id, target_id, phone_e164`
  return { workflowId: w.id, runId: run.id, targets: targets.sort((x, y) => x.id - y.id) }
}

const rowsOf = (runId: number) =>
  srv.sql<{ call_id: number; status: string }[]>`
    select call_id, status from call_analyses where run_id = ${runId} order by call_id`

describe("the hangup transaction", () => {
  async function liveCalls(analysis?: unknown) {
    const r = await seededRun(3, analysis)
    const calls = await srv.sql<{ id: number; run_target_id: number; target_id: number; phone_e164: string }[]>`
      insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
        owner_instance, status, answered_at)
      select ${owner.tenantId}, ${r.runId}, ${r.workflowId}, x.id, x.target_id, 1, x.phone_e164, 'sim', 'test-owner',
        case when x.n = 3 then 'dialing' else 'connected' end, case when x.n = 3 then null else now() end
      from unnest(${r.targets.map((x) => x.id)}::bigint[], ${r.targets.map((x) => x.target_id)}::bigint[],
        ${r.targets.map((x) => x.phone_e164)}::text[]) with ordinality as x(id, target_id, phone_e164, n)
      returning id, run_target_id, target_id, phone_e164`
    const ends: AttemptEnd[] = calls.map((c) => ({
      me: "test-owner",
      runId: r.runId,
      tenantId: owner.tenantId,
      callId: Number(c.id),
      runTargetId: Number(c.run_target_id),
      outcome: "agreed",
      connectedSeconds: 30,
      costMinor: 10,
      reservedMinor: 10,
      endedAt: new Date(),
      next: { kind: "done", outcome: "agreed" },
      decision: {
        targetId: c.target_id,
        at: Date.now(),
        decision: "stop",
        reason: "final_outcome",
        detail: {},
        costMinor: 10,
      },
      addToDnc: false,
      phone: c.phone_e164,
    }))
    return { runId: r.runId, calls: calls.map((c) => Number(c.id)).sort((x, y) => x - y), ends }
  }

  it("queues each answered call with its end, and only those", async () => {
    const { runId, calls, ends } = await liveCalls()
    expect(await rowsOf(runId)).toEqual([])
    expect(await finishAttempts(srv.sql, ends)).toEqual([true, true, true])
    // The third never connected: no row, so no model call and no charge.
    expect((await rowsOf(runId)).map((r) => r.call_id)).toEqual(calls.slice(0, 2))
    // Ending them again changes nothing.
    expect(await finishAttempts(srv.sql, ends)).toEqual([false, false, false])
    expect(await rowsOf(runId)).toHaveLength(2)
  })

  it("queues nothing for a workflow whose analysis is turned off", async () => {
    const { runId, ends } = await liveCalls({ enabled: false })
    expect(await finishAttempts(srv.sql, ends)).toEqual([true, true, true])
    expect(await rowsOf(runId)).toEqual([])
  })
})

describe("the repair sweep", () => {
  it("pages through ended calls by (ended_at, id), each once, adding rows only where one is missing", async () => {
    const r = await seededRun(7)
    // Ended together in pairs (ties broken by id) at microsecond instants, as clock_timestamp() writes them.
    const calls = await srv.sql<{ id: number }[]>`
      insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
        owner_instance, status, outcome, answered_at, ended_at)
      select ${owner.tenantId}, ${r.runId}, ${r.workflowId}, rt.id, rt.target_id, 1, rt.phone_e164, 'sim', 'old',
        'ended', 'agreed', now() - interval '1 minute',
        timestamptz '2030-01-01 00:00:00.123456+00' + (rn / 2) * interval '1.000001 second'
      from (select *, row_number() over (order by id) as rn from run_targets where run_id = ${r.runId}) rt
      returning id`
    const ids = calls.map((c) => Number(c.id)).sort((x, y) => x - y)
    // One already has its row (its end queued it): left as it is.
    await srv.sql`insert into call_analyses (call_id, tenant_id, run_id, status, summary)
      values (${ids[0]!}, ${owner.tenantId}, ${r.runId}, 'done', 'kept')`
    let from: SweepMark | undefined = { endedAt: "2029-12-31T23:59:59Z", callId: 0 }
    const scanned: number[] = []
    let added = 0
    for (let i = 0; i < 10 && from !== undefined; i++) {
      const step = await enqueueMissing(srv.sql, from, 2)
      scanned.push(step.scanned)
      added += step.added
      from = step.scanned < 2 ? undefined : step.next
    }
    // 7 calls, 2 a page: 2, 2, 2, 1 — every call looked at once, the last page short.
    expect(scanned).toEqual([2, 2, 2, 1])
    expect(added).toBe(6)
    const rows = await rowsOf(r.runId)
    expect(rows.map((x) => x.call_id)).toEqual(ids)
    expect(rows[0]!.status).toBe("done")
    const [kept] = await srv.sql<[{ summary: string }]>`select summary from call_analyses where call_id = ${ids[0]!}`
    expect(kept.summary).toBe("kept")
  })
})
