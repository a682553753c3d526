// A data source's chat through the real server: the simulator's documented questions with exact
// numbers, an audience made from a filter (DNC applied), history paging, 404s and 422s; and the
// tool-call loop against a fake OpenAI-compatible server (tools run over the stored rows, a bounded
// sample, an unknown tool, a model that never stops asking: bounded).
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { MAX_TOOL_ROUNDS } from "../../src/data/chat.service.js"
import { api, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

// 8 rows for an Indian workspace: 6 valid phones (rows 3 and 6 are not), 5 on the gold plan.
const CSV = [
  "name,phone,city,plan",
  "Asha,+919876543210,Mumbai,gold",
  "Ravi,9876543211,Pune,silver",
  "Meera,12345,Mumbai,gold",
  "Kabir,+919876543213,Mumbai,silver",
  "Divya,09876543214,Delhi,gold",
  "Arjun,,Pune,gold",
  "Nisha,+919876543216,Mumbai,gold",
  "Rahul,+919876543217,Chennai,silver",
].join("\n")

interface Msg {
  id: number
  role: string
  text: string
  data: Record<string, unknown>
  created_at: string
}

async function body<T>(res: Response, status = 200): Promise<T> {
  const b = await res.json()
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${JSON.stringify(b)}`)
  return b as T
}

function helpers(srv: TestServer) {
  const a = api(srv)
  async function source(s: Session, csv = CSV): Promise<number> {
    const form = new FormData()
    form.set("name", "customers")
    form.set("file", new Blob([csv], { type: "text/csv" }), "customers.csv")
    const res = await fetch(`${srv.url}/data/sources`, {
      method: "POST",
      body: form,
      headers: { authorization: `Bearer ${s.token}` },
    })
    return (await body<{ source: { id: number; row_count: number } }>(res, 201)).source.id
  }
  const ask = (s: Session, id: number, message: unknown) =>
    a.call("POST", `/data/sources/${id}/chat`, { token: s.token, body: { message } })
  const reply = async (s: Session, id: number, message: string) =>
    (await body<{ reply: Msg }>(await ask(s, id, message))).reply
  const workflow = async (tenantId: number): Promise<number> => {
    const [w] = await srv.sql<[{ id: number }]>`
      insert into workflows (tenant_id, name, persona, nl_prompt, status)
      values (${tenantId}, 'Campaign', 'amelia', 'Call people about the sale', 'draft') returning id`
    return w.id
  }
  return { a, source, ask, reply, workflow }
}

describe("chat with the simulator", () => {
  let srv: TestServer
  let h: ReturnType<typeof helpers>
  let s: Session
  let id: number
  beforeAll(async () => {
    srv = await sharedTestServer()
    h = helpers(srv)
    s = await h.a.signup({ country: "IN" })
    id = await h.source(s)
  })
  afterAll(async () => srv?.stop())

  it("counts the rows", async () => {
    const r = await h.reply(s, id, "How many rows are there?")
    expect(r.role).toBe("agent")
    expect(r.text).toBe("The source has 8 rows.")
    expect(r.data).toEqual({ question: "count_rows", count: 8 })
  })

  it("counts valid phones in the workspace's country", async () => {
    const r = await h.reply(s, id, "how many have a valid phone?")
    expect(r.data).toMatchObject({ question: "valid_phones", column: "phone", valid: 6, invalid: 2, total: 8 })
    expect(r.text).toContain("6 of 8")
  })

  it("answers the top values of a column, named in any case", async () => {
    const r = await h.reply(s, id, "Top 3 values of City")
    expect(r.data).toEqual({
      question: "top_values",
      column: "city",
      n: 3,
      values: [
        { value: "Mumbai", count: 4 },
        { value: "Pune", count: 2 },
        { value: "Chennai", count: 1 },
      ],
    })
    expect(r.text).toBe("Top values of city: Mumbai (4), Pune (2), Chennai (1).")
  })

  it("filters rows with up to five examples", async () => {
    const gold = await h.reply(s, id, "rows where plan is gold")
    expect(gold.data).toMatchObject({ question: "filter_rows", column: "plan", equals: "gold", count: 5, total: 8 })
    expect((gold.data.examples as unknown[]).length).toBe(5)
    const silver = await h.reply(s, id, "How many rows where plan = SILVER?")
    expect(silver.data).toMatchObject({ count: 3 })
    expect((silver.data.examples as Array<{ name: string }>).map((e) => e.name)).toEqual(["Ravi", "Kabir", "Rahul"])
  })

  it("names the columns for an unknown one and lists its questions for anything else", async () => {
    const bad = await h.reply(s, id, "top values of colour")
    expect(bad.data).toEqual({
      question: "unknown_column",
      column: "colour",
      columns: ["name", "phone", "city", "plan"],
    })
    const help = await h.reply(s, id, "what's the weather like?")
    expect(help.data.question).toBe("help")
    expect(help.text).toContain("how many rows?")
  })

  it("makes an audience from a filter through the normal attach: DNC, invalid numbers", async () => {
    const owner = await h.a.signup({ country: "IN" })
    const src = await h.source(owner)
    const w = await h.workflow(owner.tenantId)
    const dnc = await h.a.call("POST", "/dnc/add", { token: owner.token, body: { phone_e164: "+919876543210" } })
    expect(dnc.status).toBe(200)
    const r = await h.reply(owner, src, `Make an audience for workflow ${w} from rows where plan is gold`)
    expect(r.data).toMatchObject({
      question: "create_audience",
      workflow_id: w,
      where: { column: "plan", equals: "gold" },
      phone_column: "phone",
      name_column: "name",
      matched: 5,
      accepted: 2,
      rejected_dnc: 1,
      rejected_invalid: 2,
      total_targets: 2,
    })
    expect(r.text).toContain("2 accepted")
    const targets = await srv.sql<Array<{ phone_e164: string; name: string | null }>>`
      select phone_e164, name from audience_targets where workflow_id = ${w} order by phone_e164`
    expect(targets).toEqual([
      { phone_e164: "+919876543214", name: "Divya" },
      { phone_e164: "+919876543216", name: "Nisha" },
    ])
  })

  it("refuses an audience for another workspace's workflow (404) and stores nothing", async () => {
    const other = await h.a.signup({ country: "IN" })
    const theirs = await h.workflow(other.tenantId)
    const before = await srv.sql`select id from data_source_messages where source_id = ${id}`
    const res = await h.ask(s, id, `make an audience for workflow ${theirs} from rows where plan is gold`)
    expect(res.status).toBe(404)
    const after = await srv.sql`select id from data_source_messages where source_id = ${id}`
    expect(after.length).toBe(before.length)
  })

  it("keeps another workspace out (404) and validates its input (422)", async () => {
    const other = await h.a.signup({ country: "IN" })
    expect((await h.ask(other, id, "how many rows")).status).toBe(404)
    expect((await h.a.call("GET", `/data/sources/${id}/chat`, { token: other.token })).status).toBe(404)
    expect((await h.ask(s, 999_999, "how many rows")).status).toBe(404)
    expect((await h.ask(s, id, "   ")).status).toBe(422)
    expect((await h.ask(s, id, 5)).status).toBe(422)
    expect((await h.ask(s, id, "x".repeat(2001))).status).toBe(422)
    for (const qs of ["limit=0", "limit=201", "after_id=-1", "limit=abc"])
      expect((await h.a.call("GET", `/data/sources/${id}/chat?${qs}`, { token: s.token })).status).toBe(422)
  })

  it("needs a write key to ask and a read key to read the history", async () => {
    const read = await h.a.createKey(s, { name: "r", scope: "read" })
    const write = await h.a.createKey(s, { name: "w", scope: "write" })
    const ask = (token: string) =>
      h.a.call("POST", `/data/sources/${id}/chat`, { token, body: { message: "how many rows" } })
    expect((await ask(read.secret)).status).toBe(403)
    expect((await ask(write.secret)).status).toBe(200)
    expect((await h.a.call("GET", `/data/sources/${id}/chat`, { token: read.secret })).status).toBe(200)
    expect((await h.a.call("GET", `/data/sources/${id}/chat`)).status).toBe(401)
  })

  it("stores both sides and pages the history oldest first", async () => {
    const owner = await h.a.signup({ country: "IN" })
    const src = await h.source(owner)
    await h.reply(owner, src, "how many rows")
    await h.reply(owner, src, "top values of plan")
    await h.reply(owner, src, "hello")
    const all = await body<{ messages: Msg[]; next_after_id: number | null }>(
      await h.a.call("GET", `/data/sources/${src}/chat?limit=200`, { token: owner.token }),
    )
    const chat = all.messages.filter((m) => m.role !== "system")
    expect(chat.map((m) => [m.role, m.text.split("\n")[0]])).toEqual([
      ["user", "how many rows"],
      ["agent", "The source has 8 rows."],
      ["user", "top values of plan"],
      ["agent", "Top values of plan: gold (5), silver (3)."],
      ["user", "hello"],
      ["agent", "I can answer these questions about this source's 8 rows:"],
    ])
    expect(all.next_after_id).toBeNull()
    const ids = all.messages.map((m) => m.id)
    const first = await body<{ messages: Msg[]; next_after_id: number | null }>(
      await h.a.call("GET", `/data/sources/${src}/chat?limit=2`, { token: owner.token }),
    )
    expect(first.messages.map((m) => m.id)).toEqual(ids.slice(0, 2))
    expect(first.next_after_id).toBe(ids[1])
    const rest = await body<{ messages: Msg[]; next_after_id: number | null }>(
      await h.a.call("GET", `/data/sources/${src}/chat?after_id=${first.next_after_id}&limit=50`, {
        token: owner.token,
      }),
    )
    expect(rest.messages.map((m) => m.id)).toEqual(ids.slice(2))
    expect(rest.next_after_id).toBeNull()
  })
})

// ---------------------------------------------------------------------------------------------
// The tool-call loop against a fake OpenAI-compatible API

type Completion = { text?: string; calls?: Array<{ name: string; arguments: unknown }> }

describe("chat with an OpenAI-compatible model", () => {
  let fake: Server
  let srv: TestServer
  let h: ReturnType<typeof helpers>
  let s: Session
  let id: number
  /** What the fake model answers to the n-th request of the current test. */
  let script: (n: number, req: Record<string, unknown>) => Completion
  let requests: Array<Record<string, unknown>>

  beforeAll(async () => {
    fake = createServer((req, res) => {
      let raw = ""
      req.on("data", (c: Buffer) => {
        raw += c.toString()
      })
      req.on("end", () => {
        const parsed = JSON.parse(raw) as Record<string, unknown>
        requests.push(parsed)
        const c = script(requests.length, parsed)
        const message = {
          role: "assistant",
          content: c.text ?? null,
          ...(c.calls !== undefined && {
            tool_calls: c.calls.map((call, i) => ({
              id: `call_${requests.length}_${i}`,
              type: "function",
              function: { name: call.name, arguments: JSON.stringify(call.arguments) },
            })),
          }),
        }
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify({ choices: [{ index: 0, message, finish_reason: c.calls ? "tool_calls" : "stop" }] }))
      })
    })
    await new Promise<void>((r) => fake.listen(0, "127.0.0.1", r))
    const port = (fake.address() as AddressInfo).port
    srv = await sharedTestServer({ env: { LLM_BASE_URL: `http://127.0.0.1:${port}/v1`, LLM_MODEL: "fake-1" } })
    h = helpers(srv)
    s = await h.a.signup({ country: "IN" })
    id = await h.source(s)
  })
  afterAll(async () => {
    await srv?.stop()
    await new Promise((r) => fake?.close(r))
  })
  beforeEach(() => {
    requests = []
  })

  const toolMessages = (req: Record<string, unknown>) =>
    (req.messages as Array<{ role: string; content: string; tool_call_id?: string }>).filter((m) => m.role === "tool")

  it("runs the model's tools over the stored rows and answers with their numbers; it sees a sample", async () => {
    script = (n) =>
      n === 1
        ? { calls: [{ name: "count_rows", arguments: {} }] }
        : n === 2
          ? { calls: [{ name: "filter_rows", arguments: { column: "Plan", equals: "gold" } }] }
          : { text: "5 of the 8 customers are on gold." }
    const r = await h.reply(s, id, "How many gold customers are there?")
    expect(r.text).toBe("5 of the 8 customers are on gold.")
    expect(r.data).toEqual({
      mode: "model",
      model: "fake-1",
      tool_calls: [
        { name: "count_rows", arguments: {}, result: { count: 8 } },
        {
          name: "filter_rows",
          arguments: { column: "Plan", equals: "gold" },
          result: { column: "plan", equals: "gold", count: 5, truncated: false },
        },
      ],
    })
    expect(requests).toHaveLength(3)
    const first = requests[0]!
    expect((first.tools as Array<{ function: { name: string } }>).map((t) => t.function.name)).toEqual([
      "count_rows",
      "filter_rows",
      "top_values",
      "create_audience",
    ])
    const system = (first.messages as Array<{ role: string; content: string }>)[0]!.content
    expect(system).toContain("Columns: name, phone, city, plan")
    expect(system).toContain("Divya") // row 5 of the sample
    expect(system).not.toContain("Arjun") // row 6: never shown
    const results = toolMessages(requests[2]!)
    expect(results.map((m) => m.tool_call_id)).toEqual(["call_1_0", "call_2_0"])
    const filtered = JSON.parse(results[1]!.content) as { count: number; rows: Array<{ name: string }> }
    expect(filtered.count).toBe(5)
    expect(filtered.rows.map((r) => r.name)).toEqual(["Asha", "Meera", "Divya", "Arjun", "Nisha"])
  })

  it("answers an unknown tool with an error result the model reads", async () => {
    script = (n) =>
      n === 1 ? { calls: [{ name: "drop_table", arguments: { table: "customers" } }] } : { text: "I cannot do that." }
    const r = await h.reply(s, id, "delete everything")
    expect(r.text).toBe("I cannot do that.")
    const [result] = toolMessages(requests[1]!)
    expect(JSON.parse(result!.content).error).toMatch(/^unknown tool drop_table/)
    expect((r.data.tool_calls as Array<{ result: { error?: string } }>)[0]!.result.error).toMatch(/unknown tool/)
  })

  it("bounds a model that never stops calling tools", async () => {
    script = () => ({ calls: [{ name: "top_values", arguments: { column: "city", n: 2 } }] })
    const r = await h.reply(s, id, "keep going")
    expect(requests).toHaveLength(MAX_TOOL_ROUNDS + 1)
    expect(r.text).toMatch(/^Sorry, I could not finish/)
    expect(r.data.rounds_exceeded).toBe(true)
    expect((r.data.tool_calls as unknown[]).length).toBe(MAX_TOOL_ROUNDS)
    expect((r.data.tool_calls as Array<{ result: unknown }>)[0]!.result).toEqual({
      column: "city",
      values: [
        { value: "Mumbai", count: 4 },
        { value: "Pune", count: 2 },
      ],
    })
  })

  it("creates an audience through the normal attach; another workspace's workflow is an error result", async () => {
    const w = await h.workflow(s.tenantId)
    const other = await h.a.signup({ country: "IN" })
    const theirs = await h.workflow(other.tenantId)
    await h.a.call("POST", "/dnc/add", { token: s.token, body: { phone_e164: "+919876543210" } })
    const args = (workflow_id: number) => ({
      workflow_id,
      where: { column: "plan", equals: "gold" },
      phone_column: "phone",
      name_column: "name",
    })
    script = (n) =>
      n === 1
        ? {
            calls: [
              { name: "create_audience", arguments: args(theirs) },
              { name: "create_audience", arguments: args(w) },
            ],
          }
        : { text: "Done: 2 accepted, 1 on the DNC list." }
    const r = await h.reply(s, id, `make an audience for workflow ${w} from the gold customers`)
    expect(r.text).toBe("Done: 2 accepted, 1 on the DNC list.")
    const [refused, made] = (r.data.tool_calls as Array<{ result: Record<string, unknown> }>).map((c) => c.result)
    expect(refused).toMatchObject({ code: "NotFound" })
    expect(made).toMatchObject({ workflow_id: w, matched: 5, accepted: 2, rejected_dnc: 1, rejected_invalid: 2 })
    const [{ n }] = await srv.sql<[{ n: number }]>`
      select count(*)::int as n from audience_targets where workflow_id = ${w}`
    expect(n).toBe(2)
    const [{ m }] = await srv.sql<[{ m: number }]>`
      select count(*)::int as m from audience_targets where workflow_id = ${theirs}`
    expect(m).toBe(0)
  })
})
