// The knowledge base's loop, end to end through the real server and its in-process runtime (sim
// carrier, sim model): a supervisor bans a line the agent said in a finished run, and the next run
// on a new audience never says it; a banned rule created while a run is dialing reaches that run's
// next calls, which never say it, and the calls still complete.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { normaliseLine } from "../../src/kb/rule-matching.js"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
let a: ReturnType<typeof api>

beforeAll(async () => {
  // One call at a time per workflow, so "the calls after the change" is a clean cut.
  srv = await startTestServer({ env: { ...FAST_RUNTIME_ENV, DIALER_MAX_CONCURRENT_PER_WORKFLOW: "1" } })
  a = api(srv)
})
afterAll(async () => srv?.stop())

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const call = async (method: string, path: string, s: { token: string }, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

/** US numbers ending in each digit (the sim callee behaves by the last digit), from `base`. */
const numbers = (digits: number[], base: number) => digits.map((d, i) => `+1${base + i * 10 + d}`)

async function fund(s: Session, amountMinor = 1_000_000) {
  const intent = (await call("POST", "/billing/topup", s, { amount_minor: amountMinor })).body
  const res = await a.call("POST", "/billing/webhooks/stub", {
    body: { external_id: intent.external_id, status: "succeeded" },
  })
  expect(res.status).toBe(200)
}

async function addAudience(s: Session, workflowId: number, phones: string[], tag: string) {
  const res = await call("POST", `/api/workflows/${workflowId}/audience`, s, {
    rows: phones.map((phone, i) => ({ phone, name: `${tag} ${String.fromCharCode(65 + i)}` })),
  })
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  expect(res.body.accepted).toBe(phones.length)
}

async function readyWorkflow(s: Session, phones: string[]) {
  const w = (
    await call("POST", "/api/workflows", s, {
      nl_prompt: "Call members whose membership lapsed about our new gym membership plan and ask them to rejoin.",
    })
  ).body
  await addAudience(s, w.id, phones, "Member")
  const att = await call("PUT", `/api/workflows/${w.id}/compliance`, s, {
    consent_attestation_text: "All numbers opted in on our website.",
  })
  expect(att.status).toBe(200)
  return w as Json
}

async function startRun(s: Session, workflowId: number): Promise<number> {
  const started = await call("POST", `/api/workflows/${workflowId}/run`, s)
  expect(started.status, JSON.stringify(started.body)).toBe(201)
  return started.body.run_id as number
}

async function waitForRun(s: Session, workflowId: number, runId: number, timeoutMs = 30_000): Promise<Json> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const { body } = await call("GET", `/api/workflows/${workflowId}/runs`, s)
    const run = (body.runs as Json[]).find((r) => r.id === runId)
    if (run?.status === "completed") {
      await settledTurns(runId)
      return run
    }
    if (Date.now() > deadline) throw new Error(`run ${runId} did not complete: ${JSON.stringify(run)}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

interface Turn {
  id: number
  call_id: number
  turn_index: number
  speaker: string
  text: string
  at: Date
  name: string
}

/** The run's turns with the callee's name, in order. */
const turnsOf = (runId: number) =>
  srv.sql<Turn[]>`
    select t.id::int as id, t.call_id::int as call_id, t.turn_index, t.speaker, t.text, t.at, a.name
    from turns t join audience_targets a on a.id = t.target_id
    where t.run_id = ${runId} order by t.seq`

/** Turns are written in batches: wait until the count stops moving. */
async function settledTurns(runId: number): Promise<void> {
  let last = -1
  for (;;) {
    const [{ n }] = await srv.sql<[{ n: number }]>`select count(*)::int as n from turns where run_id = ${runId}`
    if (n === last) return
    last = n
    await new Promise((r) => setTimeout(r, 150))
  }
}

/** A line as compared whoever hears it: the callee's name put back as {name}, then normalised. */
const lineOf = (text: string, name: string) => normaliseLine(text.split(name).join("{name}"))

/** The agent's reply to an agreeing callee's "yes, I have a minute": the pitch. */
const pitchesOf = (turns: Turn[]) =>
  turns.filter((t) => t.speaker === "agent" && t.turn_index === 2 && /calling about/i.test(t.text))

// Each test has a workspace, a workflow and numbers of its own: they run side by side.
describe.concurrent("rules the agent obeys, end to end", () => {
  it("never says, in a new run on a new audience, a line banned from a finished run", async () => {
    const s = await a.signup({ country: "US" })
    await fund(s)
    const w = await readyWorkflow(s, numbers([3, 4, 5, 6], 2025550300))
    const first = await startRun(s, w.id)
    await waitForRun(s, w.id, first)
    const before = await turnsOf(first)
    const pitches = pitchesOf(before)
    expect(pitches.length).toBeGreaterThanOrEqual(3)
    const banned = pitches[0]!
    const line = lineOf(banned.text, banned.name)
    // The same line (name aside) went to every agreeing callee: a line the next run would say.
    expect(pitches.every((p) => lineOf(p.text, p.name) === line)).toBe(true)

    const verdict = await call("POST", "/kb/feedback", s, { turn_id: banned.id, verdict: "ban" })
    expect(verdict.status, JSON.stringify(verdict.body)).toBe(201)
    expect(verdict.body.rule_ids).toHaveLength(1)
    const rule = (await call("GET", `/kb/rules/${verdict.body.rule_ids[0]}`, s)).body
    expect(rule).toMatchObject({ bucket: "banned_phrases", status: "active", source_kind: "feedback" })
    expect(rule.body).toContain("{name}")
    expect(normaliseLine(rule.body)).toBe(line)

    await addAudience(s, w.id, numbers([3, 4, 5, 6, 3, 4], 2025550500), "Guest")
    const second = await startRun(s, w.id)
    await waitForRun(s, w.id, second)
    const after = (await turnsOf(second)).filter((t) => t.name.startsWith("Guest"))
    const calls = new Set(after.map((t) => t.call_id))
    expect(calls.size).toBe(6)
    const agent = after.filter((t) => t.speaker === "agent")
    for (const t of agent) expect(lineOf(t.text, t.name), t.text).not.toContain(line)
    // The calls still go where the callees take them.
    const outcomes = await srv.sql<{ phone_e164: string; outcome: string }[]>`
      select phone_e164, outcome from run_targets where run_id = ${second} and attempts > 0 order by phone_e164`
    expect(outcomes).toHaveLength(6)
    for (const o of outcomes) expect(o.outcome).toBe(o.phone_e164.endsWith("6") ? "declined" : "agreed")
  })

  it("brings a rule created while a run dials to that run's next calls", async () => {
    const s = await a.signup({ country: "US" })
    await fund(s)
    const phones = numbers(
      Array.from({ length: 18 }, (_, i) => 3 + (i % 3)),
      2025550700,
    )
    const w = await readyWorkflow(s, phones)
    const runId = await startRun(s, w.id)

    // Once two calls have heard the pitch, ban it for this workflow.
    let pitches: Turn[] = []
    const deadline = Date.now() + 20_000
    while (pitches.length < 2) {
      if (Date.now() > deadline) throw new Error("no pitch was said")
      await new Promise((r) => setTimeout(r, 50))
      pitches = pitchesOf(await turnsOf(runId))
    }
    const said = pitches[0]!
    const line = lineOf(said.text, said.name)
    const created = await call("POST", "/kb/rules", s, {
      bucket: "banned_phrases",
      title: "Too pushy an opener",
      body: said.text.split(said.name).join("{name}"),
      workflow_id: w.id,
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const changedAt = Date.now()

    await waitForRun(s, w.id, runId, 60_000)
    const turns = await turnsOf(runId)
    const startedAt = new Map<number, number>()
    for (const t of turns) if (t.turn_index === 0) startedAt.set(t.call_id, t.at.getTime())
    // The bus message is published before the rule's 201 is sent; allow for its delivery.
    const later = new Set([...startedAt].filter(([, at]) => at > changedAt + 250).map(([id]) => id))
    const earlier = new Set([...startedAt].filter(([, at]) => at < changedAt).map(([id]) => id))
    expect(earlier.size).toBeGreaterThanOrEqual(2)
    expect(later.size).toBeGreaterThanOrEqual(5)
    for (const t of turns)
      if (t.speaker === "agent" && later.has(t.call_id)) expect(lineOf(t.text, t.name), t.text).not.toContain(line)
    // Before the change the line was said; after it the calls still complete, every callee agreeing.
    expect(pitchesOf(turns).filter((t) => earlier.has(t.call_id)).length).toBeGreaterThanOrEqual(2)
    const outcomes = await srv.sql<{ call_id: number; outcome: string }[]>`
      select id::int as call_id, outcome from calls where run_id = ${runId}`
    expect(outcomes).toHaveLength(phones.length)
    for (const o of outcomes) expect(o.outcome).toBe("agreed")
  })
})
