// GET /api/workflows/{id}/analytics on a small seeded campaign with exact figures: the funnel, the
// outcomes per UTC day, the weekday × hour grid in the callee's local time (a +05:30 zone and two US
// zones), reply latency percentiles, spend; another workspace's workflow 404, bad ranges 422, empty; and the
// rollups (migrations 0057, 0058) against the calls and turns themselves through inserts, updates, an erasure and
// deletes, over a range inside the campaign and one holding all of it (the funnel's totals).

import { beforeAll, describe, expect, it } from "vitest"
import { AnalyticsBody } from "../../api/routes/workflows.analytics.js"
import { direct } from "../../src/analytics/analytics.repo.js"
import { api, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

let srv: TestServer
let a: ReturnType<typeof api>
let owner: Session
let stranger: Session
let workflowId: number
let emptyWorkflowId: number

const get = async (path: string, s: Session) => {
  const res = await a.call("GET", path, { token: s.token })
  return { status: res.status, body: (await res.json()) as Json }
}

// 2026-03-02 is a Monday; New York is at -05:00 and Los Angeles at -08:00 (DST starts 8 March).
const RANGE = "from=2026-03-02&to=2026-03-03"

interface SeedCall {
  target: number
  attempt: number
  at: string
  answered: boolean
  status?: string
  outcome: string | null
  secs: number | null
  cost: number | null
  analysis?: { goal_met: boolean; charged: number | null }
}

async function seedWorkflow(tenantId: number, phones: string[]) {
  const sql = srv.sql
  const [w] = await sql<[{ id: number }]>`
    insert into workflows (tenant_id, name, persona, nl_prompt) values (${tenantId}, 'analytics', 'priya', 'test')
    returning id`
  const [run] = await sql<[{ id: number }]>`
    insert into runs (tenant_id, workflow_id, status) values (${tenantId}, ${w!.id}, 'completed') returning id`
  const targets: { id: number; rt: number; phone: string }[] = []
  for (const phone of phones) {
    const [t] = await sql<[{ id: number }]>`
      insert into audience_targets (tenant_id, workflow_id, phone_e164) values (${tenantId}, ${w!.id}, ${phone})
      returning id`
    const [rt] = await sql<[{ id: number }]>`
      insert into run_targets (tenant_id, run_id, target_id, phone_e164, status)
      values (${tenantId}, ${run!.id}, ${t!.id}, ${phone}, 'done') returning id`
    targets.push({ id: Number(t!.id), rt: Number(rt!.id), phone })
  }
  return { workflowId: Number(w!.id), runId: Number(run!.id), targets }
}

async function seedCall(tenantId: number, s: Awaited<ReturnType<typeof seedWorkflow>>, c: SeedCall) {
  const t = s.targets[c.target]!
  // No ended_at: the server's analysis sweep reads ended calls only, and must leave these be.
  const [row] = await srv.sql<[{ id: number }]>`
    insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
      owner_instance, status, outcome, connected_seconds, cost_minor, started_at, answered_at)
    values (${tenantId}, ${s.runId}, ${s.workflowId}, ${t.rt}, ${t.id}, ${c.attempt}, ${t.phone}, 'sim', 'test',
      ${c.status ?? "ended"}, ${c.outcome}, ${c.secs}, ${c.cost}, ${c.at}, ${c.answered ? c.at : null})
    returning id`
  const callId = Number(row!.id)
  if (c.analysis)
    await srv.sql`
      insert into call_analyses (call_id, tenant_id, run_id, status, goal_met, charged_minor, analyzed_at)
      values (${callId}, ${tenantId}, ${s.runId}, 'done', ${c.analysis.goal_met}, ${c.analysis.charged}, now())`
  return callId
}

let seq = 0
async function seedTurn(tenantId: number, runId: number, callId: number, at: string, speaker: string, total?: number) {
  seq++
  await srv.sql`
    insert into turns (tenant_id, run_id, target_id, call_id, seq, turn_index, speaker, text, at, latency_ms)
    values (${tenantId}, ${runId}, 0, ${callId}, ${seq}, ${seq}, ${speaker}, 'x', ${at},
      ${total === undefined ? null : srv.sql.json({ total, model: total / 2 })})`
}

beforeAll(async () => {
  srv = await sharedTestServer()
  a = api(srv)
  owner = await a.signup({ country: "US" })
  stranger = await a.signup({ country: "US" })
  const t = owner.tenantId
  const s = await seedWorkflow(t, ["+12025550101", "+12025550102", "+919876500003", "+12135550104", "+12025550105"])
  workflowId = s.workflowId
  // Target 0 (New York): no answer on Monday 09:10 local, agreed on Tuesday 10:00 local.
  await seedCall(t, s, {
    target: 0,
    attempt: 1,
    at: "2026-03-02T14:10:00Z",
    answered: false,
    outcome: "no_answer",
    secs: null,
    cost: 0,
  })
  await seedCall(t, s, {
    target: 0,
    attempt: 2,
    at: "2026-03-03T15:00:00Z",
    answered: true,
    outcome: "agreed",
    secs: 45,
    cost: 120,
    analysis: { goal_met: true, charged: 5 },
  })
  // Target 1 (New York): a voicemail on Monday 09:20 local; a later agreement falls after the range.
  await seedCall(t, s, {
    target: 1,
    attempt: 1,
    at: "2026-03-02T14:20:00Z",
    answered: true,
    outcome: "voicemail_left",
    secs: 20,
    cost: 40,
  })
  const late = await seedCall(t, s, {
    target: 1,
    attempt: 2,
    at: "2026-03-04T00:00:00Z",
    answered: true,
    outcome: "agreed",
    secs: 90,
    cost: 999,
  })
  // Target 2 (India, +05:30): 04:40 UTC is 10:10 local (an hour-truncated UTC bucket would say 09:30).
  const talk = await seedCall(t, s, {
    target: 2,
    attempt: 1,
    at: "2026-03-02T04:40:00Z",
    answered: true,
    outcome: "declined",
    secs: 31,
    cost: 60,
    analysis: { goal_met: false, charged: 5 },
  })
  // Target 3 (Los Angeles): 29 s on Monday 23:30 local, goal met by the analysis; then one still dialing.
  await seedCall(t, s, {
    target: 3,
    attempt: 1,
    at: "2026-03-03T07:30:00Z",
    answered: true,
    outcome: "callee_hung_up",
    secs: 29,
    cost: 30,
    analysis: { goal_met: true, charged: null },
  })
  await seedCall(t, s, {
    target: 3,
    attempt: 2,
    at: "2026-03-03T09:00:00Z",
    answered: false,
    status: "dialing",
    outcome: null,
    secs: null,
    cost: null,
  })
  // Target 4 is never dialed. Latencies 100…1000 ms in range, one of 5000 ms after it.
  for (let i = 1; i <= 10; i++) {
    await seedTurn(t, s.runId, talk, `2026-03-02T04:41:${String(i).padStart(2, "0")}Z`, "callee")
    await seedTurn(t, s.runId, talk, `2026-03-02T04:42:${String(i).padStart(2, "0")}Z`, "agent", i * 100)
  }
  await seedTurn(t, s.runId, talk, "2026-03-02T04:43:00Z", "agent")
  await seedTurn(t, s.runId, late, "2026-03-04T00:01:00Z", "agent", 5000)
  emptyWorkflowId = (await seedWorkflow(t, [])).workflowId
})

describe("GET /api/workflows/{id}/analytics", () => {
  it("counts the funnel in distinct targets", async () => {
    const { status, body } = await get(`/api/workflows/${workflowId}/analytics?${RANGE}`, owner)
    expect(status, JSON.stringify(body)).toBe(200)
    expect(AnalyticsBody.parse(body)).toBeTruthy()
    expect(body.from).toBe("2026-03-02T00:00:00.000Z")
    expect(body.to).toBe("2026-03-04T00:00:00.000Z")
    expect(body.funnel).toEqual({
      targets: 5,
      dialed: 4,
      answered: 4,
      human: 3,
      voicemail: 1,
      talked_30s: 2,
      agreed: 2,
    })
  })

  it("lists outcomes per UTC day", async () => {
    const { body } = await get(`/api/workflows/${workflowId}/analytics?${RANGE}`, owner)
    expect(body.outcomes_over_time).toEqual([
      { day: "2026-03-02", total: 3, outcomes: { no_answer: 1, voicemail_left: 1, declined: 1 } },
      { day: "2026-03-03", total: 3, outcomes: { agreed: 1, callee_hung_up: 1, in_progress: 1 } },
    ])
  })

  it("places dials and connects by the callee's local weekday and hour", async () => {
    const { body } = await get(`/api/workflows/${workflowId}/analytics?${RANGE}`, owner)
    const { weekdays, dials, connects } = body.hour_of_day as {
      weekdays: string[]
      dials: number[][]
      connects: number[][]
    }
    expect(weekdays).toEqual(["mon", "tue", "wed", "thu", "fri", "sat", "sun"])
    const cells = (g: number[][]) =>
      g.flatMap((row, d) => row.flatMap((n, h) => (n === 0 ? [] : [`${weekdays[d]} ${h}: ${n}`])))
    expect(cells(dials)).toEqual(["mon 9: 2", "mon 10: 1", "mon 23: 1", "tue 1: 1", "tue 10: 1"])
    expect(cells(connects)).toEqual(["mon 9: 1", "mon 10: 1", "mon 23: 1", "tue 10: 1"])
  })

  it("gives reply latency percentiles of agent turns in range", async () => {
    const { body } = await get(`/api/workflows/${workflowId}/analytics?${RANGE}`, owner)
    expect(body.latency).toEqual({ n: 10, p50: 500, p90: 900, p99: 1000 })
  })

  it("sums the spend: settled call costs and analysis charges, in the workspace's currency", async () => {
    const { body } = await get(`/api/workflows/${workflowId}/analytics?${RANGE}`, owner)
    expect(body.spend_minor).toBe(0 + 120 + 40 + 60 + 30 + 5 + 5)
    expect(body.currency).toBe("USD")
  })

  it("takes timestamps: the range's ends are exact", async () => {
    const q = "from=2026-03-02T14:15:00Z&to=2026-03-03T15:00:00Z"
    const { body } = await get(`/api/workflows/${workflowId}/analytics?${q}`, owner)
    // c3 (14:20), c5 (07:30 next day) and the one still dialing (09:00); 15:00 itself is excluded.
    expect(body.funnel.dialed).toBe(2)
    expect(body.outcomes_over_time.map((d: Json) => d.total)).toEqual([1, 2])
  })

  it("defaults to the last 30 days", async () => {
    const { status, body } = await get(`/api/workflows/${workflowId}/analytics`, owner)
    expect(status).toBe(200)
    expect(Date.parse(body.to) - Date.parse(body.from)).toBe(30 * 86_400_000)
    expect(Math.abs(Date.parse(body.to) - Date.now())).toBeLessThan(60_000)
  })

  it("is another workspace's workflow: 404", async () => {
    const { status, body } = await get(`/api/workflows/${workflowId}/analytics?${RANGE}`, stranger)
    expect(status).toBe(404)
    expect(body.code).toBe("NOT_FOUND")
    expect((await get(`/api/workflows/99999999/analytics`, owner)).status).toBe(404)
  })

  it("refuses bad ranges with 422", async () => {
    for (const q of [
      "from=2026-03-05&to=2026-03-01",
      "from=2025-01-01&to=2026-03-01",
      "from=yesterday",
      "to=2026-13-45",
    ]) {
      const { status, body } = await get(`/api/workflows/${workflowId}/analytics?${q}`, owner)
      expect(status, q).toBe(422)
      expect(body.code, q).toBe("VALIDATION_FAILED")
    }
    // 400 days exactly is allowed.
    expect(
      (await get(`/api/workflows/${workflowId}/analytics?from=2025-01-01T00:00:00Z&to=2026-02-05T00:00:00Z`, owner))
        .status,
    ).toBe(200)
  })

  it("answers zeros for a workflow without calls", async () => {
    const { status, body } = await get(`/api/workflows/${emptyWorkflowId}/analytics?${RANGE}`, owner)
    expect(status).toBe(200)
    expect(body.funnel).toEqual({
      targets: 0,
      dialed: 0,
      answered: 0,
      human: 0,
      voicemail: 0,
      talked_30s: 0,
      agreed: 0,
    })
    expect(body.outcomes_over_time).toEqual([
      { day: "2026-03-02", total: 0, outcomes: {} },
      { day: "2026-03-03", total: 0, outcomes: {} },
    ])
    expect((body.hour_of_day.dials as number[][]).flat().every((n) => n === 0)).toBe(true)
    expect(body.latency).toEqual({ n: 0, p50: null, p90: null, p99: null })
    expect(body.spend_minor).toBe(0)
  })
})

describe("the rollups follow the calls", () => {
  // Both ends inside a 15-minute slot: the partial slots are read from calls, the whole ones from rollups.
  const from = "2026-03-10T08:07:00Z"
  const to = "2026-03-11T23:55:00Z"
  let s: Awaited<ReturnType<typeof seedWorkflow>>
  const calls: number[] = []

  /** A range holding every call and turn: its whole days come from the rollups, its funnel from the totals. */
  const all = { from: "2026-03-01T00:00:00Z", to: "2026-04-01T00:00:00Z" }

  /** The API's figures, and the same figures computed from the calls by the pre-rollup queries. */
  async function compare(range = { from, to }) {
    const { status, body } = await get(
      `/api/workflows/${s.workflowId}/analytics?from=${range.from}&to=${range.to}`,
      owner,
    )
    expect(status, JSON.stringify(body)).toBe(200)
    const r = { from: new Date(range.from), to: new Date(range.to) }
    const [d, a, days, slots, latency] = await Promise.all([
      direct.dialed(srv.sql, s.workflowId, r),
      direct.answered(srv.sql, s.workflowId, r),
      direct.outcomesPerDay(srv.sql, s.workflowId, r),
      direct.dialsPerSlotAndPrefix(srv.sql, s.workflowId, r),
      direct.latencySorted(srv.sql, s.workflowId, r),
    ])
    expect(body.latency).toEqual(latency)
    // The range ends after every call, where the per-target funnel is exact.
    expect(body.funnel).toEqual({
      targets: d.targets,
      dialed: d.dialed,
      answered: a.answered,
      human: a.human,
      voicemail: a.answered - a.human,
      talked_30s: a.talked,
      agreed: a.agreed,
    })
    const outcomes: Record<string, Record<string, number>> = {}
    for (const x of days) outcomes[x.day] = { ...outcomes[x.day], [x.outcome ?? "in_progress"]: x.calls }
    expect(
      Object.fromEntries(
        (body.outcomes_over_time as Json[]).filter((x) => x.total > 0).map((x) => [x.day, x.outcomes]),
      ),
    ).toEqual(outcomes)
    expect(body.spend_minor).toBe(Number(d.call_cost_minor) + Number(a.analysis_cost_minor))
    const sum = (g: number[][]) => g.flat().reduce((x, y) => x + y, 0)
    expect(sum(body.hour_of_day.dials)).toBe(slots.reduce((x, y) => x + y.dials, 0))
    expect(sum(body.hour_of_day.connects)).toBe(slots.reduce((x, y) => x + y.connects, 0))
    if (range.from === from) await compare(all)
    return body
  }

  beforeAll(async () => {
    s = await seedWorkflow(owner.tenantId, ["+12025550201", "+12025550202", "+919876500203", "+12135550204"])
    const at = ["2026-03-10T08:05:00Z", "2026-03-10T08:10:00Z", "2026-03-10T12:00:00Z", "2026-03-11T23:50:00Z"]
    // One call a target, in progress: before the range, in its partial first slot, in a whole slot, in its
    // partial last slot; and a second call of target 2 after the range.
    for (const [i, t] of at.entries())
      calls.push(
        await seedCall(owner.tenantId, s, {
          target: i,
          attempt: 1,
          at: t,
          answered: false,
          status: "dialing",
          outcome: null,
          secs: null,
          cost: null,
        }),
      )
    await seedCall(owner.tenantId, s, {
      target: 2,
      attempt: 2,
      at: "2026-03-12T10:00:00Z",
      answered: true,
      outcome: "agreed",
      secs: 60,
      cost: 70,
    })
    // Agent turns' latencies before the range, in it (its partial days) and after it, within `all`'s whole days.
    const turns: Array<[string, number]> = [
      ["2026-03-10T08:06:00Z", 87],
      ["2026-03-10T09:00:00Z", 450],
      ["2026-03-11T12:00:00Z", 999.6],
      ["2026-03-11T23:56:00Z", 1234.5],
      ["2026-03-12T10:00:30Z", 2049],
      ["2026-03-20T00:00:00Z", 51234],
    ]
    for (const [at, total] of turns) {
      await seedTurn(owner.tenantId, s.runId, calls[0]!, at, "callee")
      await seedTurn(owner.tenantId, s.runId, calls[0]!, at, "agent", total)
    }
  })

  it("gives latency percentiles to three significant figures, from the rollups' whole days and the turns", async () => {
    expect((await compare()).latency).toEqual({ n: 2, p50: 450, p90: 1000, p99: 1000 })
    expect((await compare(all)).latency).toEqual({ n: 6, p50: 1000, p90: 51200, p99: 51200 })
    // An erasure deletes turns: they leave the counts.
    await srv.sql`delete from turns where run_id = ${s.runId} and latency_ms ->> 'total' in ('2049', '51234')`
    expect((await compare(all)).latency).toEqual({ n: 4, p50: 450, p90: 1230, p99: 1230 })
    // A total that is not a number is stored and counted nowhere; one past a day counts as a day.
    await srv.sql`
      insert into turns (tenant_id, run_id, target_id, call_id, seq, turn_index, speaker, text, at, latency_ms)
      values (${owner.tenantId}, ${s.runId}, 0, ${calls[0]!}, 900001, 900001, 'agent', 'x', '2026-03-15T00:00:00Z',
          ${srv.sql.json({ total: "fast" })}),
        (${owner.tenantId}, ${s.runId}, 0, ${calls[0]!}, 900002, 900002, 'agent', 'x', '2026-03-15T00:00:01Z',
          ${srv.sql.json({ total: 1e15 })})`
    expect((await compare(all)).latency).toEqual({ n: 5, p50: 1000, p90: 86_400_000, p99: 86_400_000 })
  })

  it("counts calls in progress and their answers", async () => {
    let body = await compare()
    expect(body.funnel.dialed).toBe(3)
    expect(body.outcomes_over_time[0].outcomes).toEqual({ in_progress: 2 })
    await srv.sql`update calls set status = 'connected', answered_at = started_at where id = any(${calls})`
    body = await compare()
    expect(body.funnel.answered).toBe(3)
  })

  it("moves ended calls into the rollups, and follows a changed outcome", async () => {
    const end = (id: number, outcome: string, secs: number, cost: number) =>
      srv.sql`update calls set status = 'ended', outcome = ${outcome}, connected_seconds = ${secs}, cost_minor = ${cost}
        where id = ${id}`
    await end(calls[0]!, "agreed", 40, 11)
    await end(calls[1]!, "agreed", 40, 13)
    await end(calls[2]!, "voicemail", 10, 17)
    await end(calls[3]!, "declined", 35, 19)
    let body = await compare()
    expect(body.funnel).toMatchObject({ dialed: 3, human: 2, voicemail: 1, talked_30s: 2, agreed: 1 })
    expect(body.spend_minor).toBe(13 + 17 + 19)
    // An agreement taken back: the target is counted again from its calls.
    await srv.sql`update calls set outcome = 'declined', connected_seconds = 20 where id = ${calls[1]!}`
    body = await compare()
    expect(body.funnel).toMatchObject({ talked_30s: 1, agreed: 0 })
    // An unrelated update changes nothing.
    await srv.sql`update calls set owner_instance = 'elsewhere' where id = any(${calls})`
    expect((await compare()).funnel.agreed).toBe(0)
  })

  it("follows the analyses: goal_met and charges, set, changed and deleted", async () => {
    await srv.sql`
      insert into call_analyses (call_id, tenant_id, run_id, status, goal_met, charged_minor, analyzed_at)
      values (${calls[3]!}, ${owner.tenantId}, ${s.runId}, 'done', true, 7, now())`
    let body = await compare()
    expect(body.funnel.agreed).toBe(1)
    expect(body.spend_minor).toBe(13 + 17 + 19 + 7)
    await srv.sql`update call_analyses set goal_met = false, charged_minor = 9 where call_id = ${calls[3]!}`
    body = await compare()
    expect(body.funnel.agreed).toBe(0)
    expect(body.spend_minor).toBe(13 + 17 + 19 + 9)
    await srv.sql`delete from call_analyses where call_id = ${calls[3]!}`
    expect((await compare()).spend_minor).toBe(13 + 17 + 19)
  })

  it("follows an erased number out of its zone", async () => {
    const before = await compare()
    // Target 2's call, 12:00 UTC on Tuesday 10 March, is 17:30 in India; an erased number has no zone (UTC).
    expect(before.hour_of_day.dials[1][17]).toBe(1)
    await srv.sql`update calls set phone_e164 = ${`erased:${"0".repeat(64)}`} where id = ${calls[2]!}`
    const after = await compare()
    expect(after.hour_of_day.dials[1][17]).toBe(0)
    expect(after.hour_of_day.dials[1][12]).toBe(1)
    expect(after.funnel).toEqual(before.funnel)
  })

  it("counts the audience as rows are added, moved and deleted", async () => {
    const before = (await compare()).funnel.targets
    const added = await srv.sql<{ id: number }[]>`
      insert into audience_targets (tenant_id, workflow_id, phone_e164)
      values (${owner.tenantId}, ${s.workflowId}, '+12025550191'), (${owner.tenantId}, ${s.workflowId}, '+12025550192')
      returning id`
    expect((await compare()).funnel.targets).toBe(before + 2)
    const [other] = await srv.sql<[{ id: number }]>`
      insert into workflows (tenant_id, name, persona, nl_prompt) values (${owner.tenantId}, 'other', 'priya', 'test')
      returning id`
    await srv.sql`update audience_targets set workflow_id = ${other!.id} where id = ${added[0]!.id}`
    await srv.sql`update audience_targets set name = 'unmoved' where id = ${added[1]!.id}`
    expect((await compare()).funnel.targets).toBe(before + 1)
    const moved = await get(`/api/workflows/${other!.id}/analytics?from=${from}&to=${to}`, owner)
    expect(moved.body.funnel.targets).toBe(1)
    await srv.sql`delete from audience_targets where id = any(${added.map((r) => r.id)}::bigint[])`
    expect((await compare()).funnel.targets).toBe(before)
  })

  it("forgets deleted calls, with their analyses", async () => {
    await srv.sql`
      insert into call_analyses (call_id, tenant_id, run_id, status, goal_met, charged_minor, analyzed_at)
      values (${calls[1]!}, ${owner.tenantId}, ${s.runId}, 'done', true, 5, now())`
    expect((await compare()).funnel.agreed).toBe(1)
    await srv.sql`delete from calls where id = any(${[calls[1]!, calls[3]!]})`
    const body = await compare()
    expect(body.funnel).toMatchObject({ dialed: 1, answered: 1, agreed: 0 })
    expect(body.spend_minor).toBe(17)
  })
})
