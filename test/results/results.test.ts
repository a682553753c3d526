// Where call outcomes show: GET /api/calls/{id} (the call, its transcript in seq order, its
// analysis) and GET /api/runs/{id}/results as JSON pages and as CSV, for a sim run through the real
// runtime; the CSV read back through csv-parse (quotes, commas, newlines, formula cells); isolation
// between workspaces, authentication, and bad input answered 4xx in the contract's shape.

import { parse } from "csv-parse/sync"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { CallBody } from "../../api/routes/calls.get.js"
import { ResultsBody } from "../../api/routes/runs.results.js"
import type { TurnLatency } from "../../src/providers/telephony/telephony.interface.js"
import { unsafeCell } from "../../src/results/results.csv.js"
import { withAudio } from "../../src/turns/turn.message.js"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

let srv: TestServer
let a: ReturnType<typeof api>
let owner: Session
let stranger: Session
let runId: number
let workflowId: number
/** The run's calls by the last digit of the number dialed. */
let callsByDigit: Record<string, { id: number; cost_minor: number; connected_seconds: number }[]>

const call = async (method: string, path: string, token: string | undefined, headers?: Record<string, string>) => {
  const res = await a.call(method, path, { ...(token !== undefined && { token }), ...(headers && { headers }) })
  const text = await res.text()
  let body: Json = {}
  try {
    body = JSON.parse(text) as Json
  } catch {}
  return { status: res.status, body, text, headers: res.headers }
}

const send = async (method: string, path: string, s: Session, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

// The sim callee behaves by the number's last digit: 0 never answers (three attempts), 3 agrees,
// 6 declines.
const PHONES = ["+12025550110", "+12025550123", "+12025550136"]

// Values chosen to break a naive CSV: quotes, a comma, a line break, and cells a spreadsheet runs.
const TRICKY_NOTE = 'He said "yes, at $40",\nthen hung up'
const FORMULA = '=HYPERLINK("http://evil.example","click")'

async function waitForRun(s: Session, wid: number, rid: number): Promise<void> {
  const deadline = Date.now() + 30_000
  for (;;) {
    const { body } = await send("GET", `/api/workflows/${wid}/runs`, s)
    if ((body.runs as Json[]).find((r) => r.id === rid)?.status === "completed") return
    if (Date.now() > deadline) throw new Error(`run ${rid} did not complete`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

beforeAll(async () => {
  srv = await sharedTestServer({ env: FAST_RUNTIME_ENV })
  a = api(srv)
  owner = await a.signup({ country: "US" })
  stranger = await a.signup({ country: "US" })
  const intent = (await send("POST", "/billing/topup", owner, { amount_minor: 1_000_000 })).body
  await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })

  const w = (await send("POST", "/api/workflows", owner, { nl_prompt: "Call lapsed members; offer $20 off." })).body
  workflowId = w.id
  expect(
    (
      await send("POST", `/api/workflows/${w.id}/audience`, owner, {
        rows: PHONES.map((phone, i) => ({ phone, name: ["Ann", "Bo, Jr.", "=cmd|' /C calc'!A0"][i] })),
      })
    ).status,
  ).toBe(200)
  await send("PUT", `/api/workflows/${w.id}/compliance`, owner, { consent_attestation_text: "Opted in online." })
  const started = await send("POST", `/api/workflows/${w.id}/run`, owner)
  expect(started.status, JSON.stringify(started.body)).toBe(201)
  runId = started.body.run_id
  await waitForRun(owner, w.id, runId)

  // The run's rule book asks for three fields (the analysis section is issue 25 item 1's).
  await srv.sql`
    update rule_books set body = jsonb_set(body, '{analysis}', ${srv.sql.json({
      fields: [
        { name: "price", type: "number", description: "the price agreed" },
        { name: "note", type: "string", description: "anything to pass on" },
        { name: "phone", type: "phone", description: "a better number" },
      ],
    })})
    where id = (select rule_book_id from runs where id = ${runId})`
  const calls = await srv.sql<{ id: number; phone_e164: string; cost_minor: number; connected_seconds: number }[]>`
    select id, phone_e164, coalesce(cost_minor, 0)::bigint as cost_minor,
      coalesce(connected_seconds, 0) as connected_seconds
    from calls where run_id = ${runId} order by id`
  callsByDigit = {}
  for (const c of calls) (callsByDigit[c.phone_e164.at(-1)!] ??= []).push(c)
  // The analyses as the worker stores them (written here, so the values are exact whatever the
  // worker does meanwhile): the agreeing call done and charged, the declining one failed.
  const agreed = callsByDigit["3"]![0]!.id
  const declined = callsByDigit["6"]![0]!.id
  const analyses = [
    {
      call_id: agreed,
      status: "done",
      summary: "Agreed to rejoin at the discounted price.",
      goal_met: true,
      sentiment: "positive",
      callback_at: new Date("2026-12-01T10:00:00.000Z"),
      agreed_value_minor: 4000,
      fields: { price: 4000, note: TRICKY_NOTE, phone: "+12025550199" },
      model: "sim",
      model_version: "sim-1",
      error: null,
      charged_minor: 7,
    },
    {
      call_id: declined,
      status: "failed",
      summary: null,
      goal_met: null,
      sentiment: null,
      callback_at: null,
      agreed_value_minor: null,
      fields: {},
      model: "sim",
      model_version: "sim-1",
      error: "model answered invalid JSON three times",
      charged_minor: null,
    },
  ]
  for (const x of analyses)
    await srv.sql`
      insert into call_analyses (call_id, tenant_id, run_id, status, attempts, summary, goal_met, sentiment,
        callback_at, agreed_value_minor, fields, model, model_version, error, charged_minor, analyzed_at)
      values (${x.call_id}, ${owner.tenantId}, ${runId}, ${x.status}, 1, ${x.summary}, ${x.goal_met}, ${x.sentiment},
        ${x.callback_at}, ${x.agreed_value_minor}, ${srv.sql.json(x.fields)}, ${x.model}, ${x.model_version},
        ${x.error}, ${x.charged_minor}, now())
      on conflict (call_id) do update set status = excluded.status, attempts = excluded.attempts,
        summary = excluded.summary,
        goal_met = excluded.goal_met, sentiment = excluded.sentiment, callback_at = excluded.callback_at,
        agreed_value_minor = excluded.agreed_value_minor, fields = excluded.fields, model = excluded.model,
        model_version = excluded.model_version, error = excluded.error, charged_minor = excluded.charged_minor,
        analyzed_at = excluded.analyzed_at`
  // Whatever the worker made of the no-answer calls (it should make nothing) goes, so it cannot vary.
  await srv.sql`delete from call_analyses where run_id = ${runId} and call_id not in (${agreed}, ${declined})`
}, 90_000)
afterAll(async () => srv?.stop())

const sum = (xs: { cost_minor: number }[]) => xs.reduce((n, x) => n + Number(x.cost_minor), 0)
const talk = (xs: { connected_seconds: number }[]) => xs.reduce((n, x) => n + x.connected_seconds, 0)

describe("GET /api/runs/{run_id}/results (JSON)", () => {
  it("answers one row per target with its attempts, outcome, talk seconds, cost and analysis", async () => {
    const res = await call("GET", `/api/runs/${runId}/results`, owner.token)
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toMatch(/^application\/json/)
    expect(res.body).toMatchObject({
      run_id: runId,
      workflow_id: workflowId,
      run_status: "completed",
      currency: "USD",
      fields: [
        { name: "price", type: "number" },
        { name: "note", type: "string" },
        { name: "phone", type: "phone" },
      ],
      next_cursor: null,
    })
    const rows = res.body.results as Json[]
    expect(rows.map((r) => r.phone)).toEqual(PHONES)
    const [noAnswer, agreed, declined] = rows as [Json, Json, Json]
    const c = callsByDigit
    expect(noAnswer).toEqual({
      target_id: expect.any(Number),
      phone: PHONES[0],
      name: "Ann",
      status: "done",
      outcome: "no_answer",
      attempts: 3,
      talk_seconds: 0,
      cost_minor: sum(c["0"]!),
      analysis_status: null,
      summary: null,
      goal_met: null,
      sentiment: null,
      callback_at: null,
      agreed_value_minor: null,
      decision_effect: null,
      // The latest attempt's call, whose transcript GET /api/calls/{id} gives.
      call_id: Math.max(...c["0"]!.map((x) => x.id)),
      arm: null,
      fields: { price: null, note: null, phone: null },
    })
    expect(c["0"]).toHaveLength(3)
    expect(agreed).toMatchObject({
      name: "Bo, Jr.",
      status: "done",
      outcome: "agreed",
      attempts: 1,
      talk_seconds: talk(c["3"]!),
      // The call's settled cost and its analysis's charge.
      cost_minor: sum(c["3"]!) + 7,
      analysis_status: "done",
      summary: "Agreed to rejoin at the discounted price.",
      goal_met: true,
      sentiment: "positive",
      callback_at: "2026-12-01T10:00:00.000Z",
      agreed_value_minor: 4000,
      fields: { price: 4000, note: TRICKY_NOTE, phone: "+12025550199" },
    })
    expect(agreed.talk_seconds).toBeGreaterThan(0)
    expect(declined).toMatchObject({
      outcome: "declined",
      analysis_status: "failed",
      summary: null,
      cost_minor: sum(c["6"]!),
      fields: { price: null, note: null, phone: null },
    })
  })

  it("pages by cursor in target order, every target once", async () => {
    const seen: Json[] = []
    let cursor: string | null = null
    let pages = 0
    do {
      const q: string = cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`
      const res = await call("GET", `/api/runs/${runId}/results?limit=2${q}`, owner.token)
      expect(res.status).toBe(200)
      expect((res.body.results as Json[]).length).toBeLessThanOrEqual(2)
      seen.push(...(res.body.results as Json[]))
      cursor = res.body.next_cursor
      pages++
    } while (cursor !== null)
    expect(pages).toBe(2)
    expect(seen.map((r) => r.phone)).toEqual(PHONES)
    const ids = seen.map((r) => r.target_id as number)
    expect([...ids].sort((x, y) => x - y)).toEqual(ids)
  })

  it("answers 422 for a bad limit, cursor or format, and 404 for a run that is not there", async () => {
    for (const q of ["limit=0", "limit=201", "cursor=bogus", "format=xml"]) {
      const res = await call("GET", `/api/runs/${runId}/results?${q}`, owner.token)
      expect(res.status, q).toBe(422)
      expect(res.body).toMatchObject({ code: "VALIDATION_FAILED", field: expect.any(String) })
    }
    const bad = await call("GET", "/api/runs/abc/results", owner.token)
    expect(bad.status).toBe(422)
    const missing = await call("GET", "/api/runs/999999/results", owner.token)
    expect(missing.status).toBe(404)
    expect(missing.body).toEqual({ error: "run 999999 not found", code: "NOT_FOUND" })
  })
})

describe("GET /api/runs/{run_id}/results (CSV)", () => {
  const parseCsv = (text: string) => parse(text, { relax_column_count: false }) as string[][]

  it("streams the same rows as a CSV file that round-trips through csv-parse", async () => {
    const res = await call("GET", `/api/runs/${runId}/results?format=csv`, owner.token)
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toBe("text/csv; charset=utf-8")
    expect(res.headers.get("content-disposition")).toBe(`attachment; filename="run-${runId}-results.csv"`)
    const records = parseCsv(res.text)
    expect(records[0]).toEqual([
      "target_id",
      "phone",
      "name",
      "status",
      "outcome",
      "attempts",
      "talk_seconds",
      "cost_minor",
      "currency",
      "analysis_status",
      "summary",
      "goal_met",
      "sentiment",
      "callback_at",
      "agreed_value_minor",
      // The experiment arm (empty outside an experiment).
      "arm",
      "price",
      "note",
      // A field named like a fixed column keeps its own column.
      "field_phone",
    ])
    expect(records).toHaveLength(1 + PHONES.length)
    const json = (await call("GET", `/api/runs/${runId}/results`, owner.token)).body.results as Json[]
    const header = records[0]!
    for (const [i, rec] of records.slice(1).entries()) {
      const cell = (name: string) => unsafeCell(rec[header.indexOf(name)]!)
      const r = json[i]!
      expect(Number(cell("target_id"))).toBe(r.target_id)
      // E.164 numbers start with "+" yet are plain numbers: left as written.
      expect(rec[1]).toBe(r.phone)
      expect(cell("name")).toBe(r.name)
      expect(cell("outcome")).toBe(r.outcome)
      expect(Number(cell("attempts"))).toBe(r.attempts)
      expect(Number(cell("talk_seconds"))).toBe(r.talk_seconds)
      expect(Number(cell("cost_minor"))).toBe(r.cost_minor)
      expect(cell("currency")).toBe("USD")
      expect(cell("analysis_status")).toBe(r.analysis_status ?? "")
      expect(cell("summary")).toBe(r.summary ?? "")
      expect(cell("goal_met")).toBe(r.goal_met === null ? "" : String(r.goal_met))
      expect(cell("callback_at")).toBe(r.callback_at ?? "")
      expect(cell("price")).toBe(r.fields.price === null ? "" : String(r.fields.price))
      expect(cell("note")).toBe(r.fields.note ?? "")
      expect(cell("field_phone")).toBe(r.fields.phone ?? "")
    }
    // Quotes, a comma and a line break survive the trip; the formula-looking name is defused.
    expect(records[2]![header.indexOf("note")]).toBe(TRICKY_NOTE)
    expect(records[2]![header.indexOf("name")]).toBe("Bo, Jr.")
    expect(records[3]![header.indexOf("name")]).toBe("'=cmd|' /C calc'!A0")
    expect(res.text.split("\r\n")[0]).toBe(header.join(","))
  })

  it("defuses every cell a spreadsheet would run, and gives each value back", async () => {
    const agreed = callsByDigit["3"]![0]!.id
    const cells = [
      FORMULA,
      "+SUM(A1:A9)",
      "-2+3",
      "@cmd",
      "\tx",
      "\r=1",
      "'=already",
      "-42",
      "+12025550199",
      // Spreadsheets that trim leading whitespace and line breaks run these too.
      ` ${FORMULA}`,
      "\n=1+1",
      "\r\n@SUM(1)",
      "  \t+cmd",
      "'\n=quoted",
    ]
    const harmless = [" 5", "a=b", "hello - world", "'plain"]
    try {
      for (const [i, note] of cells.entries()) {
        await srv.sql`update call_analyses set fields = ${srv.sql.json({ note, price: -5, phone: "+1202" })},
          summary = ${note} where call_id = ${agreed}`
        const res = await call("GET", `/api/runs/${runId}/results`, owner.token, { accept: "text/csv" })
        expect(res.status, note).toBe(200)
        const records = parseCsv(res.text)
        const header = records[0]!
        const raw = records[2]![header.indexOf("note")]!
        const plainNumber = /^[+-]?\d+$/.test(note)
        expect(raw, `cell ${i}`).toBe(plainNumber ? note : `'${note}`)
        expect(unsafeCell(raw)).toBe(note)
        expect(records[2]![header.indexOf("summary")]).toBe(raw)
        expect(records[2]![header.indexOf("price")]).toBe("-5")
      }
      // Cells a spreadsheet runs as text are left as written.
      for (const note of harmless) {
        await srv.sql`update call_analyses set fields = ${srv.sql.json({ note, price: 1, phone: "+1202" })}
          where call_id = ${agreed}`
        const res = await call("GET", `/api/runs/${runId}/results?format=csv`, owner.token)
        const records = parseCsv(res.text)
        const raw = records[2]![records[0]!.indexOf("note")]!
        expect(raw, JSON.stringify(note)).toBe(note)
        expect(unsafeCell(raw)).toBe(note)
      }
    } finally {
      const fields = { price: 4000, note: TRICKY_NOTE, phone: "+12025550199" }
      await srv.sql`update call_analyses set fields = ${srv.sql.json(fields)},
        summary = 'Agreed to rejoin at the discounted price.' where call_id = ${agreed}`
    }
  })

  it("names every column uniquely, however the fields are named", async () => {
    const [run] = await srv.sql<[{ rule_book_id: number; body: Json }]>`
      select rb.id as rule_book_id, rb.body from runs r join rule_books rb on rb.id = r.rule_book_id
      where r.id = ${runId}`
    // Beside "phone" (a fixed column: its column is field_phone), fields named field_phone and
    // field_field_phone: each field keeps its own name when it is free, the others are prefixed on.
    const fields = [
      { name: "phone", type: "phone", description: "a better number" },
      { name: "field_phone", type: "string", description: "d" },
      { name: "field_field_phone", type: "string", description: "d" },
      { name: "status", type: "string", description: "d" },
    ]
    try {
      await srv.sql`update rule_books set body = jsonb_set(body, '{analysis}', ${srv.sql.json({ fields })})
        where id = ${run.rule_book_id}`
      const res = await call("GET", `/api/runs/${runId}/results?format=csv`, owner.token)
      expect(res.status).toBe(200)
      const header = parseCsv(res.text)[0]!
      expect(header.slice(16)).toEqual(["field_field_field_phone", "field_phone", "field_field_phone", "field_status"])
      expect(new Set(header).size).toBe(header.length)
    } finally {
      await srv.sql`update rule_books set body = ${srv.sql.json(run.body)} where id = ${run.rule_book_id}`
    }
  })

  it("is chosen by Accept: text/csv unless format says json or q=0 rules it out", async () => {
    const csv = await call("GET", `/api/runs/${runId}/results`, owner.token, { accept: "text/csv;q=0.9, */*;q=0.1" })
    expect(csv.headers.get("content-type")).toMatch(/^text\/csv/)
    const forced = await call("GET", `/api/runs/${runId}/results?format=json`, owner.token, { accept: "text/csv" })
    expect(forced.headers.get("content-type")).toMatch(/^application\/json/)
    expect(forced.body.results).toHaveLength(PHONES.length)
    const refused = await call("GET", `/api/runs/${runId}/results`, owner.token, { accept: "text/csv;q=0" })
    expect(refused.headers.get("content-type")).toMatch(/^application\/json/)
  })

  it("answers a run of another workspace 404 in JSON, before any CSV header", async () => {
    for (const q of ["", "?format=csv"]) {
      const res = await call("GET", `/api/runs/${runId}/results${q}`, stranger.token)
      expect(res.status).toBe(404)
      expect(res.headers.get("content-type")).toMatch(/^application\/json/)
      expect(res.body).toEqual({ error: `run ${runId} not found`, code: "NOT_FOUND" })
    }
  })
})

describe("GET /api/calls/{call_id}", () => {
  it("answers the call with its transcript in seq order and its analysis", async () => {
    const agreed = callsByDigit["3"]![0]!
    const res = await call("GET", `/api/calls/${agreed.id}`, owner.token)
    expect(res.status).toBe(200)
    const [row] = await srv.sql<[Json]>`select * from calls where id = ${agreed.id}`
    expect(res.body).toMatchObject({
      id: agreed.id,
      call_id: agreed.id,
      run_id: runId,
      workflow_id: workflowId,
      target_id: row.target_id,
      phone: PHONES[1],
      name: "Bo, Jr.",
      attempt: 1,
      provider: "sim",
      status: "ended",
      outcome: "agreed",
      started_at: (row.started_at as Date).toISOString(),
      answered_at: (row.answered_at as Date).toISOString(),
      ended_at: (row.ended_at as Date).toISOString(),
      talk_seconds: row.connected_seconds,
      reserved_minor: row.reserved_minor,
      cost_minor: row.cost_minor,
      currency: "USD",
      transcript_truncated: false,
      analysis: {
        status: "done",
        attempts: 1,
        summary: "Agreed to rejoin at the discounted price.",
        goal_met: true,
        sentiment: "positive",
        callback_at: "2026-12-01T10:00:00.000Z",
        agreed_value_minor: 4000,
        fields: { price: 4000, note: TRICKY_NOTE, phone: "+12025550199" },
        model: "sim",
        model_version: "sim-1",
        error: null,
        charged_minor: 7,
        analyzed_at: expect.any(String),
      },
    })
    const turns = await srv.sql<
      {
        seq: number
        turn_index: number
        speaker: string
        text: string
        at: Date
        interrupted: boolean
        latency_ms: TurnLatency | null
      }[]
    >`
      select seq, turn_index, speaker, text, at, interrupted, latency_ms from turns
      where call_id = ${agreed.id} order by seq`
    expect(turns.length).toBeGreaterThan(2)
    // The call was heard as audio: the agent's answers carry their latency.
    expect(turns.some((t) => t.latency_ms !== null)).toBe(true)
    expect(res.body.transcript).toEqual(turns.map((t) => withAudio({ ...t, at: t.at.toISOString() })))
  })

  it("shows a failed analysis with its error, and none for a call that never connected", async () => {
    const failed = await call("GET", `/api/calls/${callsByDigit["6"]![0]!.id}`, owner.token)
    expect(failed.body.analysis).toMatchObject({ status: "failed", error: "model answered invalid JSON three times" })
    const unanswered = await call("GET", `/api/calls/${callsByDigit["0"]![2]!.id}`, owner.token)
    expect(unanswered.status).toBe(200)
    expect(unanswered.body).toMatchObject({
      attempt: 3,
      outcome: "no_answer",
      answered_at: null,
      talk_seconds: 0,
      transcript: [],
      analysis: null,
    })
  })

  it("answers another workspace's call 404, like a missing one; a bad id 422", async () => {
    const id = callsByDigit["3"]![0]!.id
    const other = await call("GET", `/api/calls/${id}`, stranger.token)
    expect(other.status).toBe(404)
    expect(other.body).toEqual({ error: `call ${id} not found`, code: "NOT_FOUND" })
    expect((await call("GET", "/api/calls/99999999", owner.token)).status).toBe(404)
    const bad = await call("GET", "/api/calls/1e3", owner.token)
    expect(bad.status).toBe(422)
    expect(bad.body).toMatchObject({ code: "VALIDATION_FAILED", field: "call_id" })
  })
})

describe("the OpenAPI document", () => {
  it("describes both answers of the results and the call, and the bodies match what is served", async () => {
    const doc = (await call("GET", "/openapi.json", undefined)).body
    const results = doc.paths["/api/runs/{run_id}/results"].get.responses["200"].content
    expect(Object.keys(results).sort()).toEqual(["application/json", "text/csv"])
    expect(results["application/json"].schema.properties.results.items.properties.fields).toBeDefined()
    const callDoc = doc.paths["/api/calls/{call_id}"].get
    expect(callDoc["x-required-scope"]).toBe("read")
    expect(callDoc.responses["200"].content["application/json"].schema.properties.analysis).toBeDefined()
    // Served bodies have exactly the documented keys.
    const page = (await call("GET", `/api/runs/${runId}/results`, owner.token)).body
    expect(() => ResultsBody.strict().parse(page)).not.toThrow()
    for (const r of page.results as Json[])
      expect(Object.keys(r).sort()).toEqual(Object.keys(ResultsBody.shape.results.element.shape).sort())
    for (const id of [callsByDigit["3"]![0]!.id, callsByDigit["0"]![0]!.id]) {
      const body = (await call("GET", `/api/calls/${id}`, owner.token)).body
      expect(() => CallBody.strict().parse(body)).not.toThrow()
    }
  })
})

describe("the contact timeline", () => {
  it("shows each call entry's analysis: summary, goal met and sentiment (null without one)", async () => {
    const events = async (phone: string) =>
      ((await call("GET", `/api/timeline?phone=${encodeURIComponent(phone)}`, owner.token)).body.events as Json[])
        .filter((e) => e.kind === "call")
        .map((e) => e.payload)
    const agreed = await events(PHONES[1]!)
    expect(agreed).toHaveLength(1)
    expect(agreed[0]).toMatchObject({
      call_id: callsByDigit["3"]![0]!.id,
      analysis: {
        status: "done",
        summary: "Agreed to rejoin at the discounted price.",
        goal_met: true,
        sentiment: "positive",
      },
    })
    expect((await events(PHONES[2]!))[0]!.analysis).toEqual({
      status: "failed",
      summary: null,
      goal_met: null,
      sentiment: null,
    })
    const unanswered = await events(PHONES[0]!)
    expect(unanswered).toHaveLength(3)
    for (const e of unanswered) expect(e.analysis).toBeNull()
  })
})

describe("authentication", () => {
  it("answers 401 without credentials and serves a read-scoped API key", async () => {
    const id = callsByDigit["3"]![0]!.id
    for (const path of [`/api/calls/${id}`, `/api/runs/${runId}/results`, `/api/runs/${runId}/results?format=csv`]) {
      const res = await call("GET", path, undefined)
      expect(res.status, path).toBe(401)
      expect(res.body.code).toBe("UNAUTHENTICATED")
    }
    const key = await a.createKey(owner, { name: "crm export", scope: "read" })
    expect((await call("GET", `/api/calls/${id}`, key.secret)).status).toBe(200)
    const csv = await call("GET", `/api/runs/${runId}/results?format=csv`, key.secret)
    expect(csv.status).toBe(200)
    expect(parse(csv.text)).toHaveLength(1 + PHONES.length)
    const strangerKey = await a.createKey(stranger, { name: "nosy", scope: "read" })
    expect((await call("GET", `/api/calls/${id}`, strangerKey.secret)).status).toBe(404)
  })
})
