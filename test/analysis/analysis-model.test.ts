// Post-call analysis on an OpenAI-compatible model (a local fake API): the strict json_schema request
// built from the workflow's fields, a valid answer stored with its model, the version the API reports
// and its charge, invalid and slow answers retried with backoff up to the bound (a slow one's request
// aborted at the limit), answers that would fail the same way again (a refused key, a non-JSON or
// oversized answer) recorded as failed at once and visible on GET /api/calls/{id}, a call never
// analysed twice (two processes, one lease), the workspace's own model not charged, a rehearsal's
// analysis announced to nobody, and callback_at as the runtime scheduled the callback. The service is
// driven directly on a seeded call whose row the server's own worker cannot claim (held by this test).
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import pino from "pino"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Claimed } from "../../src/analysis/analysis.repo.js"
import { type AnalysisDeps, analyseBatch, analyseClaimed } from "../../src/analysis/analysis.service.js"
import { postEntry } from "../../src/billing/ledger.repo.js"
import { makeOpenAiLlm } from "../../src/providers/llm/openai.llm.js"
import { makeSimLlm } from "../../src/providers/llm/sim.llm.js"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

let srv: TestServer
let a: ReturnType<typeof api>
let fake: Server
let fakeUrl: string
let mode: "valid" | "invalid" | "slow" | "unauthorized" | "prose" | "huge" = "valid"
const requests: Json[] = []
/** Requests whose connection closed before the fake answered (the caller gave up on them). */
let abandoned = 0

const VALID = {
  summary: "The callee agreed to the fibre plan at the standard price.",
  goal_met: true,
  sentiment: "positive",
  fields: { budget: 45, plan: "fibre", follow_up_email: "asha@example.com" },
}

beforeAll(async () => {
  fake = createServer((req, res) => {
    let body = ""
    req.on("data", (c: Buffer) => (body += c.toString()))
    req.on("end", () => {
      requests.push(JSON.parse(body) as Json)
      res.on("close", () => {
        if (!res.writableEnded) abandoned++
      })
      if (mode === "unauthorized") {
        res.writeHead(401, { "content-type": "application/json" })
        res.end(JSON.stringify({ error: { message: "Incorrect API key provided", code: "invalid_api_key" } }))
        return
      }
      const answer = mode === "invalid" ? { ...VALID, sentiment: "ecstatic" } : VALID
      const content =
        mode === "prose"
          ? "Sure! The callee agreed to the fibre plan; they seemed happy."
          : mode === "huge"
            ? // Past the 2 MiB cap on a provider's answer: valid JSON, but too much of it.
              JSON.stringify({ ...answer, summary: "x".repeat(3 * 2 ** 20) })
            : JSON.stringify(answer)
      const send = () => {
        if (res.destroyed) return
        res.writeHead(200, { "content-type": "application/json" })
        res.end(
          JSON.stringify({
            model: "fake-model-2026-01-01",
            choices: [{ message: { role: "assistant", content }, finish_reason: "stop" }],
          }),
        )
      }
      if (mode === "slow") setTimeout(send, 3_000)
      else send()
    })
  })
  await new Promise<void>((r) => fake.listen(0, "127.0.0.1", r))
  fakeUrl = `http://127.0.0.1:${(fake.address() as AddressInfo).port}/v1`
  // The seeding runs' one unanswered callee is done with quickly (its reservation given back).
  srv = await sharedTestServer({ env: FAST_RUNTIME_ENV })
  a = api(srv)
})
afterAll(async () => {
  await srv?.stop()
  fake?.closeAllConnections()
  await new Promise((r) => fake?.close(r))
})

const call = async (method: string, path: string, s: { token: string }, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

const FIELDS = [
  { name: "budget", type: "number", description: "The monthly budget the callee named" },
  { name: "plan", type: "enum", description: "The plan chosen", enum: ["fibre", "copper"] },
  { name: "follow_up_email", type: "email", description: "Where to send the details" },
]

let seq = 100_000
/**
 * An ended, answered call of a real run of `s`, with a transcript, and its analysis row already held
 * by "test-a" (so the server's worker leaves it alone); resolves with the claim.
 */
type Seeded = Claimed & { run_id: number }

/** `attempt` > 3 (the dialer's own attempts are 1–3); `again` adds a call to the run of an earlier seed. */
async function seededCall(s: Session, again?: { seeded: Seeded; attempt: number }): Promise<Seeded> {
  if (again !== undefined) {
    const [c] = await srv.sql<[{ workflow_id: number; run_target_id: number; target_id: number }]>`
      select workflow_id, run_target_id, target_id from calls where id = ${again.seeded.call_id}`
    const rt = { id: c.run_target_id, target_id: c.target_id }
    return insertCall(s, again.seeded.run_id, c.workflow_id, rt, again.attempt)
  }
  const w = (await call("POST", "/api/workflows", s, { nl_prompt: "Sell the fibre plan to broadband customers." })).body
  expect((await call("PUT", `/api/workflows/${w.id}`, s, { rule_book: { analysis: { fields: FIELDS } } })).status).toBe(
    200,
  )
  await call("POST", `/api/workflows/${w.id}/audience`, s, { rows: [{ phone: "+12025550100" }] })
  await call("PUT", `/api/workflows/${w.id}/compliance`, s, { consent_attestation_text: "Opted in." })
  const runId = (await call("POST", `/api/workflows/${w.id}/run`, s)).body.run_id as number
  const [rt] = await srv.sql<[{ id: number; target_id: number }]>`
    select id, target_id from run_targets where run_id = ${runId}`
  return insertCall(s, runId, w.id, rt, 9)
}

function insertCall(
  s: Session,
  runId: number,
  workflowId: number,
  rt: { id: number; target_id: number },
  attempt: number,
): Promise<Seeded> {
  return srv.sql.begin(async (tx) => {
    const [c] = await tx<[{ id: number }]>`
      insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
        status, outcome, owner_instance, connected_seconds, answered_at, ended_at)
      values (${s.tenantId}, ${runId}, ${workflowId}, ${rt.id}, ${rt.target_id}, ${attempt}, '+12025550103', 'sim',
        'ended',
        'agreed', 'test', 40, now() - interval '40 seconds', now())
      returning id`
    const lines = [
      ["agent", "Hello, this is Maya from Fibrely. Do you have a minute?"],
      ["callee", "Sure. I pay about 45 a month now; what is it about?"],
      ["agent", "Our fibre plan is faster for the same price. Shall I switch you?"],
      ["callee", "Yes, go ahead. Send the details to asha@example.com."],
    ]
    for (const [i, [speaker, text]] of lines.entries())
      await tx`insert into turns (tenant_id, run_id, target_id, call_id, seq, turn_index, speaker, text, at)
        values (${s.tenantId}, ${runId}, ${rt.target_id}, ${c.id}, ${seq++}, ${i}, ${speaker!}, ${text!}, now())`
    const [claimed] = await tx<[Seeded]>`
      insert into call_analyses (call_id, tenant_id, run_id, status, attempts, locked_by, locked_until)
      values (${c.id}, ${s.tenantId}, ${runId}, 'pending', 1, 'test-a', now() + interval '1 hour')
      returning call_id, tenant_id, attempts, run_id`
    return claimed
  }) as Promise<Seeded>
}

/** Takes the row again for `me`, as a claim would once it is due: the next attempt. */
async function reclaim(callId: number, me: string): Promise<Claimed | undefined> {
  const [c] = await srv.sql<[Claimed?]>`
    update call_analyses set locked_by = ${me}, locked_until = now() + interval '1 hour', attempts = attempts + 1
    where call_id = ${callId} and status = 'pending'
    returning call_id, tenant_id, attempts`
  return c
}

function deps(over: Partial<AnalysisDeps> = {}): AnalysisDeps {
  return {
    sql: srv.sql,
    log: pino({ level: "silent" }),
    // Retries minutes away: the server's own worker never takes a row back from this test.
    config: {
      analysis: { pollMs: 1000, concurrency: 1, timeoutMs: 5_000, maxAttempts: 3, retryBackoffMs: 200_000 },
    },
    me: "test-a",
    platformLlm: makeOpenAiLlm({ baseUrl: fakeUrl, model: "fake-model", timeoutMs: 4_000 }),
    ownLlm: async () => undefined,
    ...over,
  }
}

const rowOf = async (callId: number) =>
  (await srv.sql<[Json]>`select * from call_analyses where call_id = ${callId}`)[0]
const chargesOf = (tenantId: number) =>
  srv.sql<Json[]>`select amount_minor, idempotency_key from ledger_entries
    where tenant_id = ${tenantId} and kind = 'call_analysis'`
const eventsOf = (tenantId: number) =>
  srv.sql<Json[]>`select body from webhook_events where tenant_id = ${tenantId} and type = 'call.analyzed'`

describe("analysis on an OpenAI-compatible model", () => {
  it("asks with a strict json_schema built from the fields and stores a valid answer once, charged", async () => {
    mode = "valid"
    const s = await a.signup({ country: "US" })
    const claimed = await seededCall(s)
    requests.length = 0
    expect(await analyseClaimed(deps(), claimed)).toBe("done")
    expect(requests).toHaveLength(1)
    const format = requests[0]!.response_format
    expect(format).toMatchObject({ type: "json_schema", json_schema: { name: "call_analysis", strict: true } })
    const schema = format.json_schema.schema
    expect(schema.required).toEqual(["summary", "goal_met", "sentiment", "fields"])
    expect(schema.additionalProperties).toBe(false)
    expect(schema.properties.fields.required).toEqual(["budget", "plan", "follow_up_email"])
    expect(schema.properties.fields.properties.plan.enum).toEqual(["fibre", "copper", null])
    expect(JSON.stringify(requests[0]!.messages)).toContain("asha@example.com")

    expect(await rowOf(claimed.call_id)).toMatchObject({
      status: "done",
      summary: VALID.summary,
      goal_met: true,
      sentiment: "positive",
      fields: VALID.fields,
      model: "fake-model",
      // The version the API said answered, not the name asked for.
      model_version: "fake-model-2026-01-01",
      charged_minor: 1,
      attempts: 1,
      error: null,
      locked_by: null,
    })
    expect(await chargesOf(s.tenantId)).toEqual([{ amount_minor: -1, idempotency_key: `analysis:${claimed.call_id}` }])
    expect(await eventsOf(s.tenantId)).toHaveLength(1)
    // A stale second attempt stores nothing, charges nothing, emits nothing.
    expect(await analyseClaimed(deps(), claimed)).toBe("lost")
    expect(await chargesOf(s.tenantId)).toHaveLength(1)
    expect(await eventsOf(s.tenantId)).toHaveLength(1)
  })

  it("retries an invalid answer with backoff, at most max attempts, then records the failure", async () => {
    mode = "invalid"
    const s = await a.signup({ country: "US" })
    let claimed: Claimed | undefined = await seededCall(s)
    const results: string[] = []
    while (claimed !== undefined) {
      const before = Date.now()
      results.push(await analyseClaimed(deps(), claimed))
      const row = await rowOf(claimed.call_id)
      if (row.status === "pending") {
        // Due again after the backoff, doubling: 200 s, then 400 s.
        const wait = new Date(row.next_attempt_at).getTime() - before
        expect(wait).toBeGreaterThanOrEqual(200_000 * 2 ** (claimed.attempts - 1))
        expect(wait).toBeLessThan(200_000 * 2 ** (claimed.attempts - 1) + 5_000)
        expect(row.locked_by).toBeNull()
      }
      claimed = await reclaim(claimed.call_id, "test-a")
      if (results.length > 5) break
    }
    expect(results).toEqual(["retry", "retry", "failed"])
    const row = await rowOf(
      (
        await srv.sql<[{ call_id: number }]>`
      select call_id from call_analyses where tenant_id = ${s.tenantId}`
      )[0].call_id,
    )
    expect(row).toMatchObject({
      status: "failed",
      attempts: 3,
      summary: null,
      charged_minor: null,
      next_attempt_at: null,
    })
    expect(row.error).toMatch(/did not match the schema at sentiment/)
    expect(await chargesOf(s.tenantId)).toEqual([])
    expect(await eventsOf(s.tenantId)).toEqual([])
  })

  it("gives up on a slow answer at the time limit, aborting its request, and retries it", async () => {
    mode = "slow"
    const s = await a.signup({ country: "US" })
    const claimed = await seededCall(s)
    requests.length = 0
    const before = abandoned
    const started = Date.now()
    const quick = deps().config
    const slowDeps = deps({ config: { ...quick, analysis: { ...quick.analysis, timeoutMs: 500 } } })
    expect(await analyseClaimed(slowDeps, claimed)).toBe("retry")
    // Given up at the limit, not when the model finally answered (3 s).
    expect(Date.now() - started).toBeLessThan(2_900)
    // The request was cut off then (the fake saw its connection close unanswered), and not sent again.
    await expect.poll(() => abandoned - before, { timeout: 2_000 }).toBe(1)
    expect(requests).toHaveLength(1)
    const row = await rowOf(claimed.call_id)
    expect(row).toMatchObject({ status: "pending", attempts: 1, summary: null })
    expect(row.error).toMatch(/took longer than 500 ms|timed out/)
    // The next attempt, with the model answering in time, stores it.
    mode = "valid"
    expect(await analyseClaimed(deps(), (await reclaim(claimed.call_id, "test-a"))!)).toBe("done")
    expect(await rowOf(claimed.call_id)).toMatchObject({ status: "done", attempts: 2, error: null })
  })

  it.each([
    ["a refused key (401)", "unauthorized", /language model API answered 401: invalid_api_key/],
    ["an answer that is not JSON", "prose", /answered without a JSON object/],
    ["an answer past the size cap", "huge", /more than 2097152 bytes/],
  ] as const)("records %s as failed at once: one request, no retry, the reason visible", async (_, m, reason) => {
    mode = m
    const s = await a.signup({ country: "US" })
    const claimed = await seededCall(s)
    requests.length = 0
    expect(await analyseClaimed(deps(), claimed)).toBe("failed")
    // Neither the adapter nor the worker asks again: it would fail the same way.
    expect(requests).toHaveLength(1)
    const row = await rowOf(claimed.call_id)
    expect(row).toMatchObject({
      status: "failed",
      attempts: 1,
      summary: null,
      charged_minor: null,
      next_attempt_at: null,
    })
    expect(row.error).toMatch(reason)
    expect(await reclaim(claimed.call_id, "test-a")).toBeUndefined()
    expect(await chargesOf(s.tenantId)).toEqual([])
    expect(await eventsOf(s.tenantId)).toEqual([])
    // The workspace sees the failure and why on the call.
    const shown = await call("GET", `/api/calls/${claimed.call_id}`, s)
    expect(shown.status).toBe(200)
    expect(shown.body.analysis).toMatchObject({ status: "failed", attempts: 1, summary: null })
    expect(shown.body.analysis.error).toMatch(reason)
    expect(shown.body.analysis.error.length).toBeLessThanOrEqual(1000)
  })

  it("stores a call analysed by two processes once: the lease holder wins, the other's answer is dropped", async () => {
    mode = "valid"
    const s = await a.signup({ country: "US" })
    const first = await seededCall(s)
    // test-a's lease ran out while it worked; test-b took the row over.
    await srv.sql`update call_analyses set locked_until = now() - interval '1 second' where call_id = ${first.call_id}`
    const second = (await reclaim(first.call_id, "test-b"))!
    const results = await Promise.all([analyseClaimed(deps(), first), analyseClaimed(deps({ me: "test-b" }), second)])
    expect(results).toEqual(["lost", "done"])
    expect(await rowOf(first.call_id)).toMatchObject({ status: "done", attempts: 2 })
    expect(await chargesOf(s.tenantId)).toHaveLength(1)
    expect(await eventsOf(s.tenantId)).toHaveLength(1)
  })

  it("does not charge an analysis on the workspace's own model", async () => {
    mode = "valid"
    const s = await a.signup({ country: "US" })
    const claimed = await seededCall(s)
    const own = makeOpenAiLlm({ baseUrl: fakeUrl, model: "tenant-model", timeoutMs: 4_000 })
    expect(await analyseClaimed(deps({ ownLlm: async () => own }), claimed)).toBe("done")
    expect(await rowOf(claimed.call_id)).toMatchObject({ status: "done", model: "tenant-model", charged_minor: null })
    expect(await chargesOf(s.tenantId)).toEqual([])
    expect(await eventsOf(s.tenantId)).toHaveLength(1)
  })

  it("records a failure, with no charge and no event, when the wallet cannot pay", async () => {
    mode = "valid"
    const s = await a.signup({ country: "US" })
    const claimed = await seededCall(s)
    // The seeding run's calls have given their reservations back before the wallet is emptied.
    for (let i = 0; i < 100; i++) {
      const [r] = await srv.sql<[{ status: string }]>`select status from runs where id = ${claimed.run_id}`
      if (r.status === "completed") break
      await new Promise((res) => setTimeout(res, 100))
    }
    const [w] = await srv.sql<
      [{ balance_minor: number }]
    >`select balance_minor from wallets where tenant_id = ${s.tenantId}`
    await srv.sql.begin((tx) =>
      postEntry(tx, {
        tenantId: s.tenantId,
        amountMinor: -w.balance_minor,
        kind: "test_drain",
        idempotencyKey: `drain:${s.tenantId}`,
      }),
    )
    expect(await analyseClaimed(deps(), claimed)).toBe("failed")
    const row = await rowOf(claimed.call_id)
    expect(row).toMatchObject({ status: "failed", summary: null, charged_minor: null })
    expect(row.error).toMatch(/wallet cannot pay/)
    expect(await chargesOf(s.tenantId)).toEqual([])
    expect(await eventsOf(s.tenantId)).toEqual([])
  })

  it("stops a call whose claims never finished once they pass the bound, without asking the model", async () => {
    mode = "valid"
    const s = await a.signup({ country: "US" })
    const claimed = await seededCall(s)
    await srv.sql`update call_analyses set attempts = 4 where call_id = ${claimed.call_id}`
    requests.length = 0
    expect(await analyseClaimed(deps(), { ...claimed, attempts: 4 })).toBe("failed")
    expect(requests).toHaveLength(0)
    expect(await rowOf(claimed.call_id)).toMatchObject({
      status: "failed",
      error: "gave up after 3 attempts that did not finish",
    })
  })

  it("stores a group in one go, and when the wallet pays for only one, only the other fails", async () => {
    mode = "valid"
    const s = await a.signup({ country: "US" })
    const one = await seededCall(s)
    const two = await seededCall(s, { seeded: one, attempt: 8 })
    for (let i = 0; i < 100; i++) {
      const [r] = await srv.sql<[{ status: string }]>`select status from runs where id = ${one.run_id}`
      if (r.status === "completed") break
      await new Promise((res) => setTimeout(res, 100))
    }
    const [w] = await srv.sql<
      [{ balance_minor: number }]
    >`select balance_minor from wallets where tenant_id = ${s.tenantId}`
    await srv.sql.begin((tx) =>
      postEntry(tx, {
        tenantId: s.tenantId,
        amountMinor: 1 - w.balance_minor,
        kind: "test_drain",
        idempotencyKey: `drain1:${s.tenantId}`,
      }),
    )
    expect(await analyseBatch(deps(), [one, two])).toEqual(["done", "failed"])
    expect(await rowOf(one.call_id)).toMatchObject({ status: "done", charged_minor: 1 })
    expect(await rowOf(two.call_id)).toMatchObject({ status: "failed", charged_minor: null })
    expect(await chargesOf(s.tenantId)).toEqual([{ amount_minor: -1, idempotency_key: `analysis:${one.call_id}` }])
    expect((await eventsOf(s.tenantId)).map((e) => e.body.data.call_id)).toEqual([one.call_id])
  })
})

describe("what the analysis takes from the call rather than the model", () => {
  const simDeps = () => deps({ platformLlm: makeSimLlm() })

  it("stores a rehearsal's analysis without announcing it (no call.analyzed event)", async () => {
    const s = await a.signup({ country: "US" })
    const claimed = await seededCall(s)
    // The seeded call's workflow becomes a simulation campaign's hidden workflow.
    const [rehearsed] = await srv.sql<[{ id: number }]>`
      insert into workflows (tenant_id, name, persona, nl_prompt) values (${s.tenantId}, 'rehearsed', 'priya', 'x')
      returning id`
    await srv.sql`update workflows set kind = 'rehearsal', simulation_of = ${rehearsed.id}
      where id = (select workflow_id from calls where id = ${claimed.call_id})`
    expect(await analyseClaimed(simDeps(), claimed)).toBe("done")
    expect(await rowOf(claimed.call_id)).toMatchObject({ status: "done", model: "sim-1", model_version: "sim-1" })
    expect(await eventsOf(s.tenantId)).toEqual([])
    // A rehearsal costs nothing either.
    expect(await chargesOf(s.tenantId)).toEqual([])
  })

  /** An approved callback approval of the seeded call, decided now. */
  const approveCallback = async (callId: number) => {
    await srv.sql`
      insert into approvals (tenant_id, workflow_id, run_id, call_id, proposed_action, currency, status, expires_at,
        decided_at)
      select tenant_id, workflow_id, run_id, id, 'callback', 'USD', 'approved', now() + interval '1 hour', now()
      from calls where id = ${callId}`
  }

  it("takes callback_at from the retry the call's end scheduled (the decision log), not from a formula", async () => {
    const s = await a.signup({ country: "US" })
    const claimed = await seededCall(s)
    await approveCallback(claimed.call_id)
    // The runtime scheduled the redial at hangup + the delay × the run's own time scale.
    const retryAt = Date.parse("2031-05-04T03:02:01.234Z")
    await srv.sql`
      insert into dial_decisions (tenant_id, run_id, target_id, call_id, decision, reason, detail, at)
      select tenant_id, run_id, target_id, id, 'retry', 'callback_scheduled',
        ${srv.sql.json({ call_id: claimed.call_id, outcome: "callback_scheduled", retry_at: retryAt })}, now()
      from calls where id = ${claimed.call_id}`
    expect(await analyseClaimed(simDeps(), claimed)).toBe("done")
    expect(new Date((await rowOf(claimed.call_id)).callback_at).getTime()).toBe(retryAt)
  })

  it("takes callback_at from the target's next attempt when the callback was approved after the call", async () => {
    const s = await a.signup({ country: "US" })
    const claimed = await seededCall(s)
    await approveCallback(claimed.call_id)
    // The seeding run's own attempts at the target are over, so nothing else moves it meanwhile.
    for (let i = 0; i < 100; i++) {
      const [r] = await srv.sql<[{ status: string }]>`select status from runs where id = ${claimed.run_id}`
      if (r.status === "completed") break
      await new Promise((res) => setTimeout(res, 100))
    }
    const at = new Date("2031-06-01T09:30:00.000Z")
    await srv.sql`update run_targets set status = 'waiting', outcome = 'callback_scheduled', next_attempt_at = ${at}
      where id = (select run_target_id from calls where id = ${claimed.call_id})`
    expect(await analyseClaimed(simDeps(), claimed)).toBe("done")
    expect(new Date((await rowOf(claimed.call_id)).callback_at).getTime()).toBe(at.getTime())
  })

  it("leaves callback_at null when the approved callback was never scheduled (no attempts left)", async () => {
    const s = await a.signup({ country: "US" })
    const claimed = await seededCall(s)
    await approveCallback(claimed.call_id)
    // The call's end wrote a final decision, not a retry: the target was out of attempts.
    await srv.sql`
      insert into dial_decisions (tenant_id, run_id, target_id, call_id, decision, reason, detail, at)
      select tenant_id, run_id, target_id, id, 'stop', 'max_attempts_reached', '{}'::jsonb, now()
      from calls where id = ${claimed.call_id}`
    expect(await analyseClaimed(simDeps(), claimed)).toBe("done")
    expect(await rowOf(claimed.call_id)).toMatchObject({ status: "done", callback_at: null })
  })
})
