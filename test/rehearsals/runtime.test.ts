// A simulation campaign's run through the real runtime (in-process server; embedded or real
// Postgres + NATS): the sim carrier at the campaign's time scale whatever the workspace's accounts,
// no screening, pacing, cool-down or DNC records, nothing charged, one attempt per callee, questions
// held for the operator, the rehearsed workflow's knowledge-base rules, held targets that neither
// spin the dialer nor let the run complete, and released ones dialed at once.
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { normaliseLine } from "../../src/kb/rule-matching.js"
import { renderMetrics } from "../../src/platform/metrics.js"
import { drawCallees } from "../../src/rehearsals/mix.js"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { type FakeTelco, startFakeTelco } from "../support/fake-telco.js"
import { startTestServer, stopSharedServers, type TestServer } from "../support/harness.js"
import { sse } from "../support/sse-client.js"
import { campaignInSql, release, runStatus, targetsOf, until, wake } from "./campaign.runtime.js"

// No shared server runs beside this suite: it reads the process's metrics, which would count theirs too.
beforeAll(stopSharedServers)

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const { CALLING_HOURS: _lifted, ...fastRuntime } = FAST_RUNTIME_ENV
const ENV: Record<string, string> = {
  ...fastRuntime,
  // A simulation runs at its campaign's scale (0.01 here), never this one: at 5 a call would take minutes.
  SIM_TIME_SCALE: "5",
  // Calling windows apply (CALLING_HOURS unset), and carrier pacing is one call a second: a
  // simulation's callees are not people and go out on no carrier, so neither holds them up.
  DIALER_CPS_PER_CARRIER: "1",
  DIALER_CPS_PER_TENANT: "1",
  CREDENTIALS_MASTER_KEY: randomBytes(32).toString("base64"),
  ALLOW_PRIVATE_PROVIDER_URLS: "true",
}
const SCALE = 0.01

let srv: TestServer
let fake: FakeTelco
let a: ReturnType<typeof api>

beforeAll(async () => {
  fake = await startFakeTelco()
  srv = await startTestServer({ env: ENV })
  a = api(srv)
})
afterAll(async () => {
  await srv?.stop()
  await fake?.close()
})

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

async function workflowOf(s: Session): Promise<Json> {
  const w = await call("POST", "/api/workflows", s, {
    nl_prompt: "Win back lapsed members with a discount of up to $20; book callbacks; escalate when asked.",
  })
  expect(w.status, JSON.stringify(w.body)).toBe(201)
  return w.body
}

const settledRun = (runId: number, timeoutMs = 20_000) =>
  until(
    `run ${runId} to complete`,
    async () => ((await runStatus(srv.sql, runId)) === "completed" ? true : undefined),
    timeoutMs,
  )

describe("a simulation campaign's run", () => {
  it("dials only released callees, on the sim carrier at the campaign's scale, unscreened, free, once", async () => {
    const s = await funded()
    const w = await workflowOf(s)
    const balance = (await call("GET", "/billing/balance", s)).body
    // Batch one: agrees, declines, voicemail, busy, no answer; batch two: three who agree.
    const digits = [3, 6, 2, 1, 0, 4, 5, 3]
    const c = await campaignInSql(srv.sql, {
      tenantId: s.tenantId,
      workflowId: w.id,
      digits,
      timeScale: SCALE,
      // A real run of this schedule would hold every callee until 2099.
      schedule: { kind: "once", body: { start_at: "2099-01-01T00:00:00Z" } },
    })
    // A real callee on the workspace's DNC list, and one called an hour ago (inside the cool-down).
    await srv.sql`insert into dnc_entries (tenant_id, phone_e164, source) values (${s.tenantId}, ${c.phones[1]!},
      'manual')`
    const contactedAt = new Date(Date.now() - 3_600_000)
    await srv.sql`insert into recent_contacts (tenant_id, phone_e164, last_contacted_at)
      values (${s.tenantId}, ${c.phones[0]!}, ${contactedAt})`
    await wake(srv, s.tenantId, c.runId)
    await until("the run to be claimed", async () => {
      const [r] = await srv.sql<
        [{ owner: string | null }]
      >`select owner_instance as owner from runs where id = ${c.runId}`
      return r.owner ?? undefined
    })

    // Every callee held: nothing is dialed, the run does not complete, and the idle dialer does not spin.
    // Counted in statements sent to the database (every client of this process, timed by
    // src/platform/metrics.ts), not in CPU time, which swings with GC, JIT and the embedded database.
    const statements = async () =>
      Number(/^parley_db_query_duration_seconds_count (\d+)$/m.exec(await renderMetrics())?.[1] ?? Number.NaN)
    const q0 = await statements()
    await new Promise((r) => setTimeout(r, 1500))
    const idle = (await statements()) - q0
    // Idle, the runtime's pollers (claims, leases, analysis, webhooks) send a few dozen; a dialer
    // polling Postgres in a loop, thousands.
    expect(idle).toBeLessThan(150)
    expect((await srv.sql`select id from calls where run_id = ${c.runId}`).count).toBe(0)
    expect(await runStatus(srv.sql, c.runId)).toBe("running")

    // Batch one.
    expect(await release(srv.sql, c.runId, 5)).toBe(5)
    const released = Date.now()
    await wake(srv, s.tenantId, c.runId)
    await until("batch one to end", async () => {
      const ts = await targetsOf(srv.sql, c.runId)
      return ts.slice(0, 5).every((t) => t.status === "done") ? ts : undefined
    })
    const [first] = await srv.sql<[{ at: Date }]>`select min(started_at) as at from calls where run_id = ${c.runId}`
    // Woken, not found on its next look (the idle dialer looks once a second): ~10 ms here.
    expect(first.at.getTime() - released).toBeLessThan(500)
    // The held callees wait; the run waits for them.
    await new Promise((r) => setTimeout(r, 300))
    expect((await targetsOf(srv.sql, c.runId)).slice(5)).toEqual(
      c.phones.slice(5).map((phone_e164) => ({ phone_e164, status: "queued", attempts: 0, outcome: null })),
    )
    expect(await runStatus(srv.sql, c.runId)).toBe("running")

    // Batch two: the rest, and the run completes.
    expect(await release(srv.sql, c.runId, 100)).toBe(3)
    await wake(srv, s.tenantId, c.runId)
    await settledRun(c.runId)

    const targets = await targetsOf(srv.sql, c.runId)
    expect(targets.map((t) => t.outcome)).toEqual([
      "agreed",
      "declined",
      expect.stringMatching(/^voicemail/),
      "busy",
      "no_answer",
      "agreed",
      "agreed",
      "agreed",
    ])
    // One attempt each: a busy line or no answer is an outcome to count, not a retry.
    expect(targets.every((t) => t.status === "done" && t.attempts === 1)).toBe(true)
    const calls = await srv.sql<
      { provider: string; cost_minor: number | null; connected_seconds: number; ms: number; outcome: string }[]
    >`select provider, cost_minor::int as cost_minor, connected_seconds, outcome,
        (extract(epoch from ended_at - started_at) * 1000)::int as ms
      from calls where run_id = ${c.runId} order by id`
    expect(calls).toHaveLength(8)
    for (const x of calls) {
      expect(x.provider).toBe("sim")
      expect(x.cost_minor ?? 0).toBe(0)
      // At SIM_TIME_SCALE 5 a call would last minutes; at the campaign's 0.01, well under a few seconds.
      expect(x.ms).toBeLessThan(5000)
    }
    // Talk time is the callee's time (scaled back), not the seconds the simulation took.
    for (const x of calls.filter((y) => y.outcome === "agreed")) expect(x.connected_seconds).toBeGreaterThan(5)
    // Unpaced: batch one started together, though the carrier allows one call a second.
    const starts = await srv.sql<{ at: Date }[]>`select started_at as at from calls where run_id = ${c.runId}
      order by id limit 5`
    expect(starts.at(-1)!.at.getTime() - starts[0]!.at.getTime()).toBeLessThan(2500)

    // Unscreened, and nothing recorded about simulated callees.
    const decisions = await srv.sql<{ decision: string; simulated: boolean | null }[]>`
      select decision, (detail ->> 'simulated')::boolean as simulated from dial_decisions where run_id = ${c.runId}`
    expect(decisions.filter((d) => d.decision === "dial")).toHaveLength(8)
    expect(decisions.every((d) => d.decision !== "skip" && d.decision !== "hold" && d.decision !== "retry")).toBe(true)
    expect(decisions.filter((d) => d.decision === "dial").every((d) => d.simulated)).toBe(true)
    const contacts = await srv.sql<{ phone_e164: string; last_contacted_at: Date }[]>`
      select phone_e164, last_contacted_at from recent_contacts where tenant_id = ${s.tenantId}`
    expect(contacts).toEqual([{ phone_e164: c.phones[0], last_contacted_at: contactedAt }])
    const dnc = await srv.sql`select phone_e164 from dnc_entries where tenant_id = ${s.tenantId}`
    expect(dnc.map((d) => d.phone_e164)).toEqual([c.phones[1]])

    // Free: the wallet is as it was, and nothing was ever reserved.
    expect((await call("GET", "/billing/balance", s)).body).toEqual(balance)
    const [held] = await srv.sql<[{ n: number }]>`
      select count(*)::int as n from usage_reservations where tenant_id = ${s.tenantId}`
    expect(held.n).toBe(0)
    // No workflow's status moved: the rehearsed one is as created, the hidden one live.
    const statuses = await srv.sql<{ id: number; status: string }[]>`
      select id::int as id, status from workflows where id in (${w.id}, ${c.simWorkflowId}) order by id`
    expect(statuses).toEqual([
      { id: w.id, status: w.status },
      { id: c.simWorkflowId, status: "live" },
    ])
  })

  it("holds a question for the operator, then the answer resumes the conversation", async () => {
    const s = await funded()
    const w = await workflowOf(s)
    // A discount seeker and a callback seeker.
    const c = await campaignInSql(srv.sql, { tenantId: s.tenantId, workflowId: w.id, digits: [7, 8], timeScale: SCALE })
    await release(srv.sql, c.runId, 2)
    await wake(srv, s.tenantId, c.runId)
    type Pending = { id: number; call_id: number; proposed_action: string; ttl_s: number }
    const pending = await until("both questions", async () => {
      const rows = await srv.sql<Pending[]>`
        select id::int as id, call_id::int as call_id, proposed_action,
          extract(epoch from expires_at - created_at)::int as ttl_s
        from approvals where run_id = ${c.runId} and status = 'pending' order by proposed_action`
      return rows.length === 2 ? rows : undefined
    })
    expect(pending.map((p) => p.proposed_action)).toEqual(["callback", "concession"])
    // SIM_APPROVAL_HOLD_MS (30 min by default) of real time, and the question expires with the hold.
    for (const p of pending) expect(Math.abs(p.ttl_s - 1800)).toBeLessThanOrEqual(5)
    // A real run's call would give up after APPROVAL_HOLD_MS × 0.01 = 200 ms; these hold on.
    await new Promise((r) => setTimeout(r, 1500))
    const live = await srv.sql`select id from calls where run_id = ${c.runId} and status <> 'ended'`
    expect(live.count).toBe(2)
    const concession = pending.find((p) => p.proposed_action === "concession")!
    const [{ held }] = await srv.sql<[{ held: number }]>`
      select max(turn_index)::int as held from turns where call_id = ${concession.call_id}`

    for (const p of pending) {
      const decided = await call("POST", `/api/approvals/${p.id}/decide`, s, { decision: "approve" })
      expect(decided.status, JSON.stringify(decided.body)).toBe(200)
    }
    await settledRun(c.runId)
    const targets = await targetsOf(srv.sql, c.runId)
    expect(targets.map((t) => [t.outcome, t.status, t.attempts])).toEqual([
      ["agreed_with_concession", "done", 1],
      // One attempt: the approved callback is the rehearsal's outcome, not a call to place later.
      ["callback_scheduled", "done", 1],
    ])
    // The conversation went on after the answer: the agent spoke again on the held call.
    const after = await srv.sql<{ speaker: string }[]>`
      select speaker from turns where call_id = ${concession.call_id} and turn_index > ${held} order by turn_index`
    expect(after.some((t) => t.speaker === "agent")).toBe(true)
  })
})

// ---- end to end through the campaign API (api/routes/sim.campaigns.ts) ----------------------------

const campaignOf = async (s: Session, body: Json): Promise<Json> => {
  const r = await call("POST", "/api/sim/campaigns", s, body)
  expect(r.status, JSON.stringify(r.body)).toBe(201)
  return r.body
}

const viewOf = async (s: Session, id: number): Promise<Json> => (await call("GET", `/api/sim/campaigns/${id}`, s)).body

const untilState = (s: Session, id: number, state: string, timeoutMs = 20_000) =>
  until(
    `campaign ${id} to be ${state}`,
    async () => {
      const v = await viewOf(s, id)
      if (v.state === "failed") throw new Error(`campaign failed: ${v.failure}`)
      return v.state === state ? v : undefined
    },
    timeoutMs,
  )

/** The first seed from 1 whose draw of `size` from `mix` satisfies `ok` (drawCallees is deterministic). */
const seedWhere = (size: number, mix: Record<string, number>, ok: (personas: string[]) => boolean): number => {
  for (let seed = 1; ; seed++) if (ok(drawCallees(seed, size, mix).map((c) => c.persona))) return seed
}

type Turn = { call_id: number | string | null; turn_index: number; speaker: string; text: string }

describe("a simulation campaign end to end through the API", () => {
  it("runs a batch on the runtime, streams its turns, asks, and goes on once answered; free", async () => {
    const s = await funded()
    const w = await workflowOf(s)
    const balance = (await call("GET", "/billing/balance", s)).body
    const mix = { "wants-discount": 1, agrees: 1, declines: 1 }
    const seed = seedWhere(3, mix, (p) => [...p].sort().join() === "agrees,declines,wants-discount")
    const c = await campaignOf(s, { workflow_id: w.id, size: 3, batch_size: 3, seed, time_scale: SCALE, mix })
    expect(c).toMatchObject({ state: "ready", size: 3, free: true, charged_minor: 0 })
    const stream = sse(`${srv.url}/api/runs/${c.run_id}/turns/stream`, { authorization: `Bearer ${s.token}` })
    try {
      expect(await stream.status).toBe(200)
      const batch = await call("POST", `/api/sim/campaigns/${c.id}/run-batch`, s)
      expect(batch.status, JSON.stringify(batch.body)).toBe(202)
      expect(batch.body.state).toBe("running")

      const asked = await untilState(s, c.id, "awaiting_answer")
      const q = asked.pending_question
      expect(q).toMatchObject({ action: "concession", currency: "USD" })
      expect(q.value_minor).toBeGreaterThan(0)
      const [held] = await srv.sql<[{ id: number }]>`
        select id::int as id from calls where run_id = ${c.run_id} and phone_e164 = ${q.target_phone}`
      const turnsOfHeld = () => stream.json<Turn>().filter((t) => Number(t.call_id) === held.id)
      // The callee hears a holding line while the operator decides; the stream carries it.
      await until("the holding line on the stream", async () =>
        turnsOfHeld().some((t) => t.speaker === "agent" && /moment|check/i.test(t.text)) ? true : undefined,
      )
      const heldAt = Math.max(...turnsOfHeld().map((t) => t.turn_index))

      const answered = await call("POST", `/api/sim/campaigns/${c.id}/answer`, s, {
        question_id: q.question_id,
        decision: "approve",
        note: "Fine for a rehearsal.",
      })
      expect(answered.status, JSON.stringify(answered.body)).toBe(200)
      expect(answered.body.answered).toMatchObject({ question_id: q.question_id, status: "approved" })
      // The held conversation continues: the agent's next line arrives on the stream.
      await until("the resumed agent turn", async () =>
        turnsOfHeld().find((t) => t.speaker === "agent" && t.turn_index > heldAt),
      )

      const done = await untilState(s, c.id, "completed")
      expect(done.progress).toMatchObject({ done: 3, size: 3 })
      expect(done.outcomes).toMatchObject({ agreed: 2, declined: 1, approvals_asked: 1, approvals_approved: 1 })
      expect(done.outcomes.by_outcome.agreed_with_concession).toBe(1)
      expect(done.pending_question).toBeNull()
      expect(done.charged_minor).toBe(0)
      // Every simulated turn reached the stream.
      const [{ n }] = await srv.sql<[{ n: number }]>`select count(*)::int as n from turns where run_id = ${c.run_id}`
      await stream.waitFor(n, 5000)
    } finally {
      stream.close()
    }
    expect((await call("GET", "/billing/balance", s)).body).toEqual(balance)
    const [r] = await srv.sql<[{ n: number }]>`select count(*)::int as n from usage_reservations
      where tenant_id = ${s.tenantId}`
    expect(r.n).toBe(0)
  })

  it("stops mid-batch: conversations in flight finish, nothing more is dialed until resumed", async () => {
    const s = await funded()
    const w = await workflowOf(s)
    // Slow enough (a conversation lasts a second or two) to stop while the batch is on the line.
    const c = await campaignOf(s, {
      workflow_id: w.id,
      size: 6,
      batch_size: 3,
      seed: 7,
      time_scale: 0.05,
      mix: { agrees: 1, declines: 1 },
    })
    expect((await call("POST", `/api/sim/campaigns/${c.id}/run-batch`, s)).status).toBe(202)
    await until("calls on the line", async () => {
      const live = await srv.sql`select id from calls where run_id = ${c.run_id} and status = 'connected'`
      return live.count > 0 ? true : undefined
    })
    const stopped = await call("POST", `/api/sim/campaigns/${c.id}/stop`, s)
    expect(stopped.status, JSON.stringify(stopped.body)).toBe(200)
    expect(stopped.body.state).toBe("stopped")
    expect(stopped.body.progress.done).toBeLessThan(3)

    const settled = await until("the batch's calls to end", async () => {
      const v = await viewOf(s, c.id)
      return v.progress.in_flight === 0 ? v : undefined
    })
    // They ended as conversations do (agreed or declined), not cut off.
    const ended = await srv.sql<{ outcome: string }[]>`select outcome from calls where run_id = ${c.run_id}`
    expect(ended.length).toBeGreaterThan(0)
    expect(ended.length).toBeLessThanOrEqual(3)
    for (const e of ended) expect(["agreed", "declined"]).toContain(e.outcome)
    expect(settled).toMatchObject({ state: "stopped" })
    expect(settled.progress.done).toBe(ended.length)

    const refused = await call("POST", `/api/sim/campaigns/${c.id}/run-batch`, s)
    expect(refused.status, JSON.stringify(refused.body)).toBe(409)
    expect(refused.body).toMatchObject({ code: "SIM_CAMPAIGN_STATE", state: "stopped" })
    expect((await call("POST", `/api/sim/campaigns/${c.id}/stop`, s)).status).toBe(200)
    await new Promise((r) => setTimeout(r, 500))
    expect((await srv.sql`select id from calls where run_id = ${c.run_id}`).count).toBe(ended.length)

    const resumed = await call("POST", `/api/sim/campaigns/${c.id}/resume`, s)
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200)
    for (let i = 0; i < 6; i++) {
      const v = await viewOf(s, c.id)
      if (v.state === "completed") break
      if (v.state === "ready") expect((await call("POST", `/api/sim/campaigns/${c.id}/run-batch`, s)).status).toBe(202)
      await until("the batch to end", async () => {
        const x = await viewOf(s, c.id)
        return x.state === "ready" || x.state === "completed" ? x : undefined
      })
    }
    const done = await untilState(s, c.id, "completed")
    expect(done.progress).toMatchObject({ done: 6, size: 6 })
    expect((await srv.sql`select id from calls where run_id = ${c.run_id}`).count).toBe(6)
  })

  it("follows the rehearsed workflow's knowledge-base rules: a banned line is never said", async () => {
    const s = await funded()
    const w = await workflowOf(s)
    const mix = { agrees: 1 }
    const first = await campaignOf(s, { workflow_id: w.id, size: 2, batch_size: 2, seed: 1, time_scale: SCALE, mix })
    await call("POST", `/api/sim/campaigns/${first.id}/run-batch`, s)
    await untilState(s, first.id, "completed")
    const pitchOf = (runId: number) =>
      srv.sql<{ text: string; name: string }[]>`
        select t.text, a.name from turns t join audience_targets a on a.id = t.target_id
        where t.run_id = ${runId} and t.speaker = 'agent' and t.turn_index = 2 order by t.seq`
    const said = (await pitchOf(first.run_id))[0]!
    expect(said.text).toMatch(/calling about/i)
    const body = said.text.split(said.name).join("{name}")
    const line = normaliseLine(body)
    const lineOf = (t: { text: string; name: string }) => normaliseLine(t.text.split(t.name).join("{name}"))
    // Said to every agreeing callee alike (name aside): a line the next rehearsal would say again.
    expect((await pitchOf(first.run_id)).map(lineOf)).toEqual([line, line])

    // Banned for the rehearsed workflow (the campaign's hidden one is not named): it applies.
    const rule = await call("POST", "/kb/rules", s, {
      bucket: "banned_phrases",
      title: "Too pushy",
      body,
      workflow_id: w.id,
    })
    expect(rule.status, JSON.stringify(rule.body)).toBe(201)
    const second = await campaignOf(s, { workflow_id: w.id, size: 3, batch_size: 3, seed: 2, time_scale: SCALE, mix })
    await call("POST", `/api/sim/campaigns/${second.id}/run-batch`, s)
    const done = await untilState(s, second.id, "completed")
    expect(done.outcomes.agreed).toBe(3)
    const agent = await srv.sql<{ text: string; name: string }[]>`
      select t.text, a.name from turns t join audience_targets a on a.id = t.target_id
      where t.run_id = ${second.run_id} and t.speaker = 'agent'`
    expect(agent.length).toBeGreaterThan(6)
    for (const t of agent) expect(lineOf(t), t.text).not.toContain(line)
  })

  it("never places a call on the workspace's own carrier account", async () => {
    const account = fake.addAccount()
    const s = await a.signup({ country: "US" })
    expect((await call("PUT", "/onboarding/mode", s, { mode: "byok" })).status).toBe(200)
    const saved = await call("PUT", "/onboarding/credentials/telco_a", s, {
      primary_id: account.sid,
      secret: account.token,
      extra: { api_base_url: fake.url, caller_id: "+14155550000" },
    })
    expect(saved.body).toMatchObject({ saved: true, validated: true })
    const w = await workflowOf(s)
    const c = await campaignOf(s, {
      workflow_id: w.id,
      size: 4,
      batch_size: 4,
      seed: 3,
      time_scale: SCALE,
      mix: { agrees: 1, declines: 1 },
    })
    await call("POST", `/api/sim/campaigns/${c.id}/run-batch`, s)
    const done = await untilState(s, c.id, "completed")
    expect(done.outcomes.agreed + done.outcomes.declined).toBe(4)
    const providers = await srv.sql`select distinct provider from calls where run_id = ${c.run_id}`
    expect(providers.map((p) => p.provider)).toEqual(["sim"])
    expect(fake.requests.filter((r) => r.accountSid === account.sid && /Calls/.test(r.resource))).toEqual([])
  })
})
