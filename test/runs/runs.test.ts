// Runs through the real server and its in-process runtime: readiness (409 with missing), the
// wallet (402), a run over every sim behaviour completing with the outcomes the digits promise,
// money reserved and settled once per call, pause/resume keeping the run_id and dialing nobody
// twice, the decision log, turns, approvals, and tenant isolation.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { sharedTestServer, startTestServer, type TestServer } from "../support/harness.js"
import { sse } from "../support/sse-client.js"

let srv: TestServer
let a: ReturnType<typeof api>
let owner: Session

beforeAll(async () => {
  srv = await sharedTestServer({ env: FAST_RUNTIME_ENV })
  a = api(srv)
  owner = await a.signup({ country: "US" })
})
afterAll(async () => srv?.stop())

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const call = async (method: string, path: string, s: { token: string }, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

/** US numbers ending in each digit: the sim callee behaves by the last digit. */
const numbers = (digits: number[], base = 2025550100) => digits.map((d, i) => `+1${base + i * 10 + d}`)

/** Tops the wallet up through the stub gateway, as a customer would. */
async function fund(s: Session, amountMinor = 1_000_000) {
  const intent = (await call("POST", "/billing/topup", s, { amount_minor: amountMinor })).body
  const res = await a.call("POST", "/billing/webhooks/stub", {
    body: { external_id: intent.external_id, status: "succeeded" },
  })
  expect(res.status).toBe(200)
}

async function readyWorkflow(
  s: Session,
  phones: string[],
  prompt = "Call members whose membership lapsed and offer a discount of up to $20 to rejoin.",
) {
  const w = (await call("POST", "/api/workflows", s, { nl_prompt: prompt })).body
  const aud = await call("POST", `/api/workflows/${w.id}/audience`, s, {
    rows: phones.map((phone, i) => ({ phone, name: `Person ${i}` })),
  })
  expect(aud.status).toBe(200)
  expect(aud.body.accepted).toBe(phones.length)
  const att = await call("PUT", `/api/workflows/${w.id}/compliance`, s, {
    consent_attestation_text: "All numbers opted in on our website.",
  })
  expect(att.status).toBe(200)
  return w as Json
}

async function waitForRun(
  s: Session,
  workflowId: number,
  runId: number,
  until: (r: Json) => boolean,
  timeoutMs = 20_000,
): Promise<Json> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const { body } = await call("GET", `/api/workflows/${workflowId}/runs`, s)
    const run = (body.runs as Json[]).find((r) => r.id === runId)
    if (run && until(run)) return run
    if (Date.now() > deadline) throw new Error(`run ${runId} did not get there: ${JSON.stringify(run)}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

describe("starting a run", () => {
  it("answers 409 WORKFLOW_NOT_READY listing what is missing", async () => {
    const w = (await call("POST", "/api/workflows", owner, { nl_prompt: "Remind customers about renewals." })).body
    const res = await call("POST", `/api/workflows/${w.id}/run`, owner)
    expect(res.status).toBe(409)
    expect(res.body).toMatchObject({ code: "WORKFLOW_NOT_READY", missing: ["audience", "compliance"] })
    await call("POST", `/api/workflows/${w.id}/audience`, owner, { rows: [{ phone: "+12025550103" }] })
    const still = await call("POST", `/api/workflows/${w.id}/run`, owner)
    expect(still.body.missing).toEqual(["compliance"])
    const [{ n }] = await srv.sql<[{ n: number }]>`select count(*)::int as n from runs where workflow_id = ${w.id}`
    expect(n).toBe(0)
  })

  it(
    "needs the workspace owner's email verified: " + "409 with email_verified in missing, for sessions and keys alike",
    async () => {
      const s = await a.signup({ country: "US", verify: false })
      const w = await readyWorkflow(s, numbers([3]))
      const res = await call("POST", `/api/workflows/${w.id}/run`, s)
      expect(res.status).toBe(409)
      expect(res.body).toMatchObject({ code: "WORKFLOW_NOT_READY", missing: ["email_verified"] })
      // An API key acts for the workspace, so its owner's address is what counts.
      const key = await a.createKey(s, { name: "runner", scope: "write" })
      expect((await call("POST", `/api/workflows/${w.id}/run`, { token: key.secret })).body).toMatchObject({
        code: "WORKFLOW_NOT_READY",
        missing: ["email_verified"],
      })
      // Listed with the workflow's own gaps.
      const bare = (await call("POST", "/api/workflows", s, { nl_prompt: "Remind customers about renewals." })).body
      expect((await call("POST", `/api/workflows/${bare.id}/run`, s)).body.missing).toEqual([
        "audience",
        "compliance",
        "email_verified",
      ])
      const [{ n }] = await srv.sql<
        [{ n: number }]
      >`select count(*)::int as n from runs where tenant_id = ${s.tenantId}`
      expect(n).toBe(0)
      const [{ balance_minor }] = await srv.sql<
        [{ balance_minor: number }]
      >`select balance_minor from wallets where tenant_id = ${s.tenantId}`

      await a.verifyEmail(s.email)
      const started = await call("POST", `/api/workflows/${w.id}/run`, { token: key.secret })
      expect(started.status, JSON.stringify(started.body)).toBe(201)
      expect(started.body).toMatchObject({ status: "running", targets_queued: 1 })
      await waitForRun(s, w.id, started.body.run_id, (r) => r.status === "completed")
      const [after] = await srv.sql<
        [{ balance_minor: number }]
      >`select balance_minor from wallets where tenant_id = ${s.tenantId}`
      expect(after.balance_minor).toBeLessThanOrEqual(balance_minor)
    },
  )

  it("answers 402 when the wallet cannot pay one 180-second call, and starts nothing", async () => {
    const s = await a.signup({ country: "US" })
    const w = await readyWorkflow(s, numbers([3]))
    await srv.sql`update wallets set balance_minor = 1 where tenant_id = ${s.tenantId}`
    const res = await call("POST", `/api/workflows/${w.id}/run`, s)
    expect(res.status).toBe(402)
    expect(res.body.code).toBe("INSUFFICIENT_FUNDS")
    const [{ n }] = await srv.sql<[{ n: number }]>`select count(*)::int as n from runs where workflow_id = ${w.id}`
    expect(n).toBe(0)
    expect((await call("GET", `/api/workflows/${w.id}`, s)).body.status).toBe("draft")
  })

  it("answers 404 for another workspace's workflow and 409 for a retired one", async () => {
    const other = await a.signup({ country: "US" })
    const w = await readyWorkflow(owner, numbers([3]))
    expect((await call("POST", `/api/workflows/${w.id}/run`, other)).status).toBe(404)
    expect((await call("POST", `/api/workflows/${w.id}/pause`, other)).status).toBe(404)
    expect((await call("GET", `/api/workflows/${w.id}/runs`, other)).status).toBe(404)
    await call("POST", `/api/workflows/${w.id}/retire`, owner)
    const res = await call("POST", `/api/workflows/${w.id}/run`, owner)
    expect(res.status).toBe(409)
    expect(res.body.code).toBe("WORKFLOW_RETIRED")
  })
})

describe("a run over every sim behaviour", () => {
  it("dials each target, ends with the outcomes the digits promise, and charges each call once", async () => {
    const s = await a.signup({ country: "US" })
    await fund(s)
    const digits = [2, 3, 4, 5, 6, 7, 8, 9]
    const phones = numbers(digits)
    const w = await readyWorkflow(s, phones)
    const started = await call("POST", `/api/workflows/${w.id}/run`, s)
    expect(started.status).toBe(201)
    expect(started.body).toMatchObject({ status: "running", targets_queued: phones.length })
    const runId = started.body.run_id as number
    // A watcher from the start: the turns reach it live from the runtime process.
    const watcher = sse(`${srv.url}/api/runs/${runId}/turns/stream`, { authorization: `Bearer ${s.token}` })
    expect(await watcher.status).toBe(200)
    expect((await call("GET", `/api/workflows/${w.id}`, s)).body.status).toBe("live")
    // A second start while it runs is refused.
    const again = await call("POST", `/api/workflows/${w.id}/run`, s)
    expect(again.status).toBe(409)
    expect(again.body.code).toBe("RUN_IN_PROGRESS")

    const run = await waitForRun(s, w.id, runId, (r) => r.status === "completed")
    expect(run).toMatchObject({ targets_total: 8, targets_dialed: 8, targets_connected: 7, targets_queued: 0 })

    const outcomes = await srv.sql<{ phone_e164: string; outcome: string; status: string; attempts: number }[]>`
      select phone_e164, outcome, status, attempts from run_targets where run_id = ${runId} order by phone_e164`
    const byDigit = Object.fromEntries(outcomes.map((o) => [o.phone_e164.at(-1), o]))
    expect(byDigit["2"]!.outcome).toMatch(/^voicemail/)
    for (const d of ["3", "4", "5"]) expect(byDigit[d]!.outcome).toBe("agreed")
    expect(byDigit["6"]!.outcome).toBe("declined")
    for (const o of outcomes) expect(o).toMatchObject({ status: "done", attempts: 1 })

    // Proposals became approvals (held past the call: nobody decided in time).
    const approvals = await srv.sql<
      { proposed_action: string }[]
    >`select proposed_action from approvals where run_id = ${runId} order by proposed_action`
    expect(approvals.map((x) => x.proposed_action)).toEqual(["callback", "concession", "escalate"])

    // Each call: one reservation, settled once; the wallet agrees with the ledger.
    const calls = await srv.sql<
      { id: number; cost_minor: number | null; connected_seconds: number }[]
    >`select id, cost_minor, connected_seconds from calls where run_id = ${runId}`
    expect(calls).toHaveLength(8)
    for (const c of calls) {
      const entries = await srv.sql<
        { kind: string }[]
      >`select kind from ledger_entries where reference = ${`call:${c.id}`} order by id`
      expect(entries.filter((e) => e.kind === "call_reservation")).toHaveLength(1)
      expect(entries.filter((e) => e.kind === "call_release").length).toBeLessThanOrEqual(1)
    }
    // One statement, one snapshot: a settlement may still commit after the run completed.
    const [{ sum, balance_minor }] = await srv.sql<[{ sum: number; balance_minor: number }]>`
      select (select coalesce(sum(amount_minor), 0)::bigint from ledger_entries where tenant_id = ${s.tenantId}) as sum,
        (select balance_minor from wallets where tenant_id = ${s.tenantId}) as balance_minor`
    expect(balance_minor).toBe(sum)
    const charged = calls.reduce((n, c) => n + (c.cost_minor ?? 0), 0)
    expect(charged).toBeGreaterThan(0)

    // Turns: strictly increasing seq across the run, turn_index from 0 per call.
    const turns = await srv.sql<
      { seq: number; call_id: number; turn_index: number }[]
    >`select seq, call_id, turn_index from turns where run_id = ${runId} order by seq`
    expect(turns.length).toBeGreaterThan(20)
    for (let i = 1; i < turns.length; i++) expect(turns[i]!.seq).toBeGreaterThan(turns[i - 1]!.seq)
    // Each turn the watcher got names its stored row (what feedback on a turn takes).
    await watcher.waitFor(turns.length)
    watcher.close()
    const stored = await srv.sql<{ id: number; seq: number }[]>`select id, seq from turns where run_id = ${runId}`
    const idOf = new Map(stored.map((t) => [Number(t.seq), Number(t.id)]))
    const live = watcher.json<{ seq: number; turn_id: number | null; call_id: number; outcome_id: string }>()
    expect(live.map((t) => t.turn_id)).toEqual(live.map((t) => idOf.get(t.seq)))
    // A runtime turn carries its call's outcome id, live and stored (issue 22 item 8).
    expect(live.every((t) => t.outcome_id === `call-${t.call_id}`)).toBe(true)
    const [{ unkeyed }] = await srv.sql<[{ unkeyed: number }]>`
      select count(*)::int as unkeyed from turns
      where run_id = ${runId} and outcome_id is distinct from 'call-' || call_id`
    expect(unkeyed).toBe(0)

    // The decision log says why each target was dialed and how it ended.
    const log = await srv.sql<
      { decision: string; n: number }[]
    >`select decision, count(*)::int as n from dial_decisions where run_id = ${runId}
      group by decision order by decision`
    expect(Object.fromEntries(log.map((l) => [l.decision, l.n]))).toMatchObject({ dial: 8, stop: 8 })
    // The cool-down now knows these numbers.
    const [{ n }] = await srv.sql<
      [{ n: number }]
    >`select count(*)::int as n from recent_contacts where tenant_id = ${s.tenantId}`
    expect(n).toBe(8)
  })

  it("retries busy and unanswered targets, up to the maximum", async () => {
    const s = await a.signup({ country: "US" })
    await fund(s)
    const w = await readyWorkflow(s, numbers([0, 1]))
    const runId = (await call("POST", `/api/workflows/${w.id}/run`, s)).body.run_id as number
    await waitForRun(s, w.id, runId, (r) => r.status === "completed", 30_000)
    const targets = await srv.sql<
      { outcome: string; attempts: number }[]
    >`select outcome, attempts from run_targets where run_id = ${runId} order by phone_e164`
    expect(targets).toEqual([
      { outcome: "no_answer", attempts: 3 },
      { outcome: "busy", attempts: 3 },
    ])
    const retries = await srv.sql<
      { reason: string }[]
    >`select reason from dial_decisions where run_id = ${runId} and decision = 'retry' order by id`
    expect(retries.map((r) => r.reason).sort()).toEqual([
      "busy_retry_scheduled",
      "busy_retry_scheduled",
      "no_answer_retry_scheduled",
      "no_answer_retry_scheduled",
    ])
  })
})

describe("pause and resume", () => {
  it("stops queued targets, keeps the run_id on resume, and dials nobody twice", async () => {
    const s = await a.signup({ country: "US" })
    await fund(s)
    // More targets than the per-workflow cap (20), so some are still queued when the pause lands.
    const phones = numbers(
      Array.from({ length: 40 }, (_, i) => 3 + (i % 4)),
      3035550100,
    )
    const w = await readyWorkflow(s, phones)
    await srv.sql`update workflows set status = 'draft' where id = ${w.id}`
    const first = await call("POST", `/api/workflows/${w.id}/run`, s)
    const runId = first.body.run_id as number
    const paused = await call("POST", `/api/workflows/${w.id}/pause`, s)
    expect(paused.status).toBe(200)
    expect(paused.body).toMatchObject({ status: "paused", run_id: runId })
    expect((await call("GET", `/api/workflows/${w.id}`, s)).body.status).toBe("paused")
    // In-flight calls finish; nothing new is dialed while paused.
    await new Promise((r) => setTimeout(r, 1500))
    const [{ dialed: atPause }] = await srv.sql<
      [{ dialed: number }]
    >`select count(*)::int as dialed from calls where run_id = ${runId}`
    await new Promise((r) => setTimeout(r, 1000))
    const [{ dialed: later }] = await srv.sql<
      [{ dialed: number }]
    >`select count(*)::int as dialed from calls where run_id = ${runId}`
    expect(later).toBe(atPause)
    expect(later).toBeLessThan(phones.length)

    const resumed = await call("POST", `/api/workflows/${w.id}/run`, s)
    expect(resumed.status).toBe(201)
    expect(resumed.body).toMatchObject({ run_id: runId, status: "running", resumed: true })
    // Under a loaded CI machine (the embedded database beside other suites) 40 calls through the voice
    // pipeline take far longer than alone (~6 s): the bound is generous, the assertions are not.
    const run = await waitForRun(s, w.id, runId, (r) => r.status === "completed", 90_000)
    expect(run.targets_dialed).toBe(phones.length)
    const perTarget = await srv.sql<
      { n: number }[]
    >`select count(*)::int as n from calls where run_id = ${runId} group by run_target_id`
    expect(perTarget).toHaveLength(phones.length)
    for (const t of perTarget) expect(t.n).toBe(1)
    const [{ runs }] = await srv.sql<
      [{ runs: number }]
    >`select count(*)::int as runs from runs where workflow_id = ${w.id}`
    expect(runs).toBe(1)
  }, 150_000)
})

describe("money per call", () => {
  it("pauses a run whose wallet runs dry instead of overdrawing, and resumes it after a top-up", async () => {
    const s = await a.signup({ country: "US" })
    const phones = numbers([3, 4, 5, 6, 3, 4, 5, 6, 3, 4, 5, 6, 3, 4, 5, 6], 4155550100)
    const w = await readyWorkflow(s, phones)
    const runId = (await call("POST", `/api/workflows/${w.id}/run`, s)).body.run_id as number
    const paused = await waitForRun(s, w.id, runId, (r) => r.status === "paused")
    expect(paused.pause_reason).toBe("insufficient_funds")
    expect(paused.targets_dialed).toBeLessThan(phones.length)
    expect((await call("GET", `/api/workflows/${w.id}`, s)).body.status).toBe("paused")
    const [{ balance_minor }] = await srv.sql<
      [{ balance_minor: number }]
    >`select balance_minor from wallets where tenant_id = ${s.tenantId}`
    expect(balance_minor).toBeGreaterThanOrEqual(0)
    const refused = await srv.sql`select 1 from dial_decisions
      where run_id = ${runId} and decision = 'hold' and reason = 'insufficient_funds'`
    expect(refused.length).toBeGreaterThan(0)

    await fund(s)
    const resumed = await call("POST", `/api/workflows/${w.id}/run`, s)
    expect(resumed.body).toMatchObject({ run_id: runId, resumed: true })
    const done = await waitForRun(s, w.id, runId, (r) => r.status === "completed")
    expect(done.targets_dialed).toBe(phones.length)
    const twice = await srv.sql`select run_target_id from calls
      where run_id = ${runId} and outcome is distinct from 'insufficient_funds'
      group by run_target_id having count(*) > 1`
    expect(twice).toHaveLength(0)
  })
})

describe("calling hours", () => {
  it("holds targets outside the callee's local window, with the reason and the next opening in the log", async () => {
    const strict = await startTestServer({ env: { ...FAST_RUNTIME_ENV, CALLING_HOURS: "" } })
    try {
      const b = api(strict)
      const s = await b.signup({ country: "US" })
      const intent = (await (
        await b.call("POST", "/billing/topup", { token: s.token, body: { amount_minor: 100_000 } })
      ).json()) as Json
      await b.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
      const req = async (method: string, path: string, body?: unknown) =>
        (await b.call(method, path, { token: s.token, ...(body !== undefined && { body }) })).json() as Promise<Json>
      const w = await req("POST", "/api/workflows", { nl_prompt: "Invite customers to our spring sale." })
      // Washington, DC: Eastern time
      await req("POST", `/api/workflows/${w.id}/audience`, { rows: [{ phone: "+12025550103" }] })
      await req("PUT", `/api/workflows/${w.id}/compliance`, { consent_attestation_text: "Opted in." })
      // A one-hour window twelve hours away in New York is closed now.
      const nyHour = Number(
        new Intl.DateTimeFormat("en-US", { timeZone: "America/New_York", hour: "2-digit", hourCycle: "h23" }).format(
          new Date(),
        ),
      )
      const start = (nyHour + 12) % 24
      const pad = (h: number) => `${String(h).padStart(2, "0")}:00`
      const window = start === 23 ? { start: "22:00", end: "23:00" } : { start: pad(start), end: pad(start + 1) }
      expect(
        (
          await b.call("PUT", `/api/workflows/${w.id}`, {
            token: s.token,
            body: { schedule: { calling_hours: window } },
          })
        ).status,
      ).toBe(200)
      const run = await req("POST", `/api/workflows/${w.id}/run`)
      expect(run.status).toBe("running")
      const held = await (async () => {
        for (let i = 0; i < 100; i++) {
          const rows = await strict.sql<
            { reason: string; detail: Json }[]
          >`select reason, detail from dial_decisions where run_id = ${run.run_id} and decision = 'hold'`
          if (rows.length > 0) return rows[0]!
          await new Promise((r) => setTimeout(r, 100))
        }
        throw new Error("no hold decision")
      })()
      expect(held.reason).toBe("outside_calling_hours")
      expect(held.detail.zones).toEqual(["America/New_York"])
      const [target] = await strict.sql<
        [{ status: string; next_attempt_at: Date }]
      >`select status, next_attempt_at from run_targets where run_id = ${run.run_id}`
      expect(target.status).toBe("waiting")
      expect(target.next_attempt_at.getTime()).toBeGreaterThan(Date.now() + 60 * 60_000)
      const calls = await strict.sql`select 1 from calls where run_id = ${run.run_id}`
      expect(calls).toHaveLength(0)
    } finally {
      await strict.stop()
    }
  })
})
