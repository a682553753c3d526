// Workflows through the real server: creation from a prompt by the simulated language model, the
// rows of the workflow state table this issue owns (create → draft or 422, PUT while live → 409,
// retire and delete refused while a run is running), rule-book versions, regeneration, consent
// attestation, scopes, and tenant isolation on every endpoint.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Session } from "../support/clients.js"
import { sharedTestServer, startTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
let a: ReturnType<typeof api>
let owner: Session
let other: Session

const PROMPT =
  "Call our gym members whose membership lapsed last month. Offer them a discount of up to 500 rupees to rejoin, " +
  "answer questions about timings, and book a callback if they are busy."

beforeAll(async () => {
  srv = await sharedTestServer()
  a = api(srv)
  owner = await a.signup({ country: "IN" })
  other = await a.signup({ country: "US" })
})
afterAll(async () => srv?.stop())

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const call = async (method: string, path: string, s: { token: string } | string, body?: unknown) => {
  const token = typeof s === "string" ? s : s.token
  const res = await a.call(method, path, { token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

const create = async (s: Session = owner, body: Json = { nl_prompt: PROMPT }) => {
  const res = await call("POST", "/api/workflows", s, body)
  if (res.status !== 201) throw new Error(`create ${res.status}: ${JSON.stringify(res.body)}`)
  return res.body
}

const countRows = async (table: "workflows" | "rule_books", tenantId: number) => {
  const [{ n }] = await srv.sql<
    [{ n: number }]
  >`select count(*)::int as n from ${srv.sql(table)} where tenant_id = ${tenantId}`
  return n
}

describe("creating a workflow", () => {
  it("turns the prompt into a validated rule book and a draft workflow", async () => {
    const res = await call("POST", "/api/workflows", owner, {
      nl_prompt: PROMPT,
      is_test: true,
      author_user_id: "crm-42",
    })
    expect(res.status).toBe(201)
    const w = res.body
    expect(w).toMatchObject({
      status: "draft",
      is_test: true,
      author_user_id: "crm-42",
      audience_count: 0,
      runs_count: 0,
      rule_book_version: 1,
    })
    expect(typeof w.id).toBe("number")
    expect(w.name.length).toBeGreaterThan(0)
    expect(w.rule_book).toMatchObject({
      schema_version: 1,
      persona: w.persona,
      concession_policy: { currency: "INR", allowed: true },
    })
    expect(w.rule_book.system_prompt.length).toBeGreaterThan(0)
    expect(w.rule_book.objection_handlers.length).toBeGreaterThan(0)
    expect(w.rule_book.disclosure_lines.length).toBeGreaterThan(0)
    expect(w.compliance).toMatchObject({ attested: false, consent_attested_by_user_id: null })
    expect(w.schedule).toEqual({ calling_hours: { start: "09:00", end: "21:00" } })

    const [row] = await srv.sql`select w.status, w.nl_prompt, w.rule_book_id, rb.version, rb.source, rb.model, rb.body
                                from workflows w join rule_books rb on rb.id = w.rule_book_id where w.id = ${w.id}`
    expect(row).toMatchObject({
      status: "draft",
      nl_prompt: PROMPT,
      rule_book_id: w.rule_book_id,
      version: 1,
      source: "generated",
      model: "sim-1",
    })
    expect(row!.body).toEqual(w.rule_book)
  })

  it("uses the persona the caller chose, and the book speaks that persona's language", async () => {
    const w = await create(owner, { nl_prompt: PROMPT, persona_override: "kai" })
    expect(w.persona).toBe("kai")
    expect(w.rule_book).toMatchObject({ persona: "kai", language: "en-US" })
    const hindi = await create(owner, { nl_prompt: PROMPT, persona_override: "meera" })
    expect(hindi.rule_book).toMatchObject({ persona: "meera", language: "hi-IN" })
  })

  it("writes the concession policy in the workspace's currency", async () => {
    const w = await create(other, { nl_prompt: "Win back churned subscribers with a discount of up to $20." })
    expect(w.rule_book.concession_policy).toMatchObject({ currency: "USD", allowed: true })
  })

  it("answers a rule book that fails validation with 422 RULE_BOOK_INVALID and creates nothing", async () => {
    const before = [await countRows("workflows", owner.tenantId), await countRows("rule_books", owner.tenantId)]
    const res = await call("POST", "/api/workflows", owner, { nl_prompt: "Sell insurance INVALID_RULEBOOK please" })
    expect(res.status).toBe(422)
    expect(res.body.code).toBe("RULE_BOOK_INVALID")
    expect(res.body.errors.length).toBeGreaterThan(0)
    for (const e of res.body.errors) expect(e).toEqual({ field: expect.any(String), message: expect.any(String) })
    expect([await countRows("workflows", owner.tenantId), await countRows("rule_books", owner.tenantId)]).toEqual(
      before,
    )
  })

  it.each([
    ["a prompt over 4000 characters", { nl_prompt: "x".repeat(4001) }, "nl_prompt"],
    ["an empty prompt", { nl_prompt: "   " }, "nl_prompt"],
    ["a missing prompt", {}, "nl_prompt"],
    ["an unknown persona", { nl_prompt: PROMPT, persona_override: "bob" }, "persona_override"],
    ["a non-boolean is_test", { nl_prompt: PROMPT, is_test: "yes" }, "is_test"],
  ])("refuses %s with 422 VALIDATION_FAILED", async (_, body, field) => {
    const before = await countRows("workflows", owner.tenantId)
    const res = await call("POST", "/api/workflows", owner, body)
    expect(res.status).toBe(422)
    expect(res.body).toMatchObject({ code: "VALIDATION_FAILED", field })
    expect(await countRows("workflows", owner.tenantId)).toBe(before)
  })

  it("accepts a prompt of exactly 4000 characters", async () => {
    const res = await call("POST", "/api/workflows", owner, {
      nl_prompt: PROMPT + " ".repeat(0) + "y".repeat(4000 - PROMPT.length),
    })
    expect(res.status).toBe(201)
  })

  it("needs write scope: a read key gets 403", async () => {
    const key = await a.createKey(owner, { name: "reader", scope: "read" })
    const res = await call("POST", "/api/workflows", key.secret, { nl_prompt: PROMPT })
    expect(res.status).toBe(403)
    expect((await call("GET", "/api/workflows", key.secret)).status).toBe(200)
  })

  it("answers 502 and creates nothing when the language model cannot be reached", async () => {
    const down = await startTestServer({ env: { LLM_BASE_URL: "http://127.0.0.1:9/v1", LLM_TIMEOUT_MS: "500" } })
    try {
      const s = await api(down).signup()
      const res = await api(down).call("POST", "/api/workflows", { token: s.token, body: { nl_prompt: PROMPT } })
      expect(res.status).toBe(502)
      expect(await res.json()).toMatchObject({ code: "GATEWAY_UNAVAILABLE" })
      const [{ n }] = await down.sql<[{ n: number }]>`select count(*)::int as n from workflows`
      expect(n).toBe(0)
    } finally {
      await down.stop()
    }
  })
})

describe("reading workflows", () => {
  it("lists the workspace's workflows newest first, filtered by status", async () => {
    const s = await a.signup()
    const first = await create(s)
    const second = await create(s)
    await srv.sql`update workflows set status = 'paused' where id = ${first.id}`
    const all = await call("GET", "/api/workflows", s)
    expect(all.status).toBe(200)
    expect(all.body.tenant_id).toBe(s.tenantId)
    expect(all.body.workflows.map((w: Json) => w.id)).toEqual([second.id, first.id])
    expect(Object.keys(all.body.workflows[0]).sort()).toEqual(
      [
        "archived_at",
        "created_at",
        "id",
        "name",
        "persona",
        "rule_book_id",
        "schedule_kind",
        "status",
        "updated_at",
      ].sort(),
    )
    const paused = await call("GET", "/api/workflows?status=paused", s)
    expect(paused.body.workflows.map((w: Json) => w.id)).toEqual([first.id])
    const bad = await call("GET", "/api/workflows?status=running", s)
    expect(bad.status).toBe(422)
    expect(bad.body.field).toBe("status")
  })

  it("shows audience and run counts", async () => {
    const w = await create()
    await srv.sql`insert into audience_targets (tenant_id, workflow_id, phone_e164)
      values (${owner.tenantId}, ${w.id}, '+919812345678'),
             (${owner.tenantId}, ${w.id}, '+919812345679')`
    await srv.sql`insert into runs (tenant_id, workflow_id, status, ended_at)
      values (${owner.tenantId}, ${w.id}, 'completed', now())`
    const res = await call("GET", `/api/workflows/${w.id}`, owner)
    expect(res.body).toMatchObject({ audience_count: 2, runs_count: 1 })
    const runs = await call("GET", `/api/workflows/${w.id}/runs`, owner)
    expect(runs.body.runs).toHaveLength(1)
    expect(runs.body.runs[0]).toMatchObject({ status: "completed", workflow_id: w.id })
  })

  it("answers an unknown or malformed id with 404 and 422", async () => {
    expect((await call("GET", "/api/workflows/999999999", owner)).status).toBe(404)
    expect((await call("GET", "/api/workflows/abc", owner)).status).toBe(422)
  })
})

describe("changing a workflow", () => {
  it("changes name, persona and schedule; a persona change is a new rule-book version in its language", async () => {
    const w = await create()
    const res = await call("PUT", `/api/workflows/${w.id}`, owner, {
      name: "Win-back, March",
      persona: "rohan",
      schedule_kind: "window",
      schedule: {
        calling_hours: { start: "10:00", end: "19:30" },
        timezone: "Asia/Kolkata",
        days: ["mon", "tue", "wed"],
      },
    })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({
      name: "Win-back, March",
      persona: "rohan",
      schedule_kind: "window",
      schedule: {
        calling_hours: { start: "10:00", end: "19:30" },
        timezone: "Asia/Kolkata",
        days: ["mon", "tue", "wed"],
      },
      rule_book_version: 2,
      rule_book: { persona: "rohan", language: "en-IN" },
    })
    expect(res.body.rule_book_id).not.toBe(w.rule_book_id)
    const versions = await srv.sql`select version, source from rule_books where workflow_id = ${w.id} order by version`
    expect(versions).toEqual([
      { version: 1, source: "generated" },
      { version: 2, source: "edited" },
    ])
  })

  it("merges rule-book fields, top level or inside rule_book, into a new version", async () => {
    const w = await create()
    const res = await call("PUT", `/api/workflows/${w.id}`, owner, {
      opening_line: "Hi {name}, this is {agent_name} from {company}.",
      rule_book: { concession_policy: { cap_minor: 20000 } },
    })
    expect(res.status).toBe(200)
    expect(res.body.rule_book.opening_line).toBe("Hi {name}, this is {agent_name} from {company}.")
    expect(res.body.rule_book.concession_policy).toEqual({ ...w.rule_book.concession_policy, cap_minor: 20000 })
    expect(res.body.rule_book.objection_handlers).toEqual(w.rule_book.objection_handlers)
  })

  it("refuses an invalid rule-book change with 422 RULE_BOOK_INVALID and changes nothing", async () => {
    const w = await create()
    const res = await call("PUT", `/api/workflows/${w.id}`, owner, {
      name: "should not stick",
      disclosure_lines: [],
      concession_policy: { allowed: true, cap_minor: 0 },
      opening_line: "Hello {first_name}",
    })
    expect(res.status).toBe(422)
    expect(res.body.code).toBe("RULE_BOOK_INVALID")
    const fields = res.body.errors.map((e: Json) => e.field)
    expect(fields).toEqual(expect.arrayContaining(["disclosure_lines", "concession_policy.cap_minor", "opening_line"]))
    const after = await call("GET", `/api/workflows/${w.id}`, owner)
    expect(after.body).toMatchObject({ name: w.name, rule_book_version: 1, rule_book_id: w.rule_book_id })
  })

  it.each([
    ["an unknown persona", { persona: "bob" }, "persona"],
    ["an unknown field", { colour: "blue" }, ""],
    ["an empty body", {}, ""],
    [
      "a malformed calling window",
      { schedule: { calling_hours: { start: "21:00", end: "09:00" } } },
      "schedule.calling_hours.end",
    ],
    ["an unknown time zone", { schedule: { timezone: "Mars/Olympus" } }, "schedule.timezone"],
    ["a once schedule without a start", { schedule_kind: "once" }, "schedule.start_at"],
  ])("refuses %s with 422", async (_, body, field) => {
    const w = await create()
    const res = await call("PUT", `/api/workflows/${w.id}`, owner, body)
    expect(res.status).toBe(422)
    expect(res.body.code).toBe("VALIDATION_FAILED")
    if (field !== "") expect(res.body.field).toBe(field)
  })

  it("answers 409 while live (pause first) and allows changes while paused", async () => {
    const w = await create()
    await srv.sql`update workflows set status = 'live' where id = ${w.id}`
    const live = await call("PUT", `/api/workflows/${w.id}`, owner, { name: "nope" })
    expect(live.status).toBe(409)
    expect(live.body.code).toBe("WORKFLOW_LIVE")
    const regen = await call("POST", `/api/workflows/${w.id}/regenerate-rule-book`, owner, {})
    expect(regen.status).toBe(409)
    await srv.sql`update workflows set status = 'paused' where id = ${w.id}`
    const paused = await call("PUT", `/api/workflows/${w.id}`, owner, { name: "now fine" })
    expect(paused.status).toBe(200)
    expect(paused.body).toMatchObject({ name: "now fine", status: "paused" })
  })

  it("regenerates the rule book from the stored or a new prompt", async () => {
    const w = await create()
    const same = await call("POST", `/api/workflows/${w.id}/regenerate-rule-book`, owner)
    expect(same.status).toBe(200)
    expect(same.body.rule_book_version).toBe(2)
    const fresh = await call("POST", `/api/workflows/${w.id}/regenerate-rule-book`, owner, {
      nl_prompt: "Remind patients about their dental check-up next week.",
    })
    expect(fresh.status).toBe(200)
    expect(fresh.body).toMatchObject({
      rule_book_version: 3,
      nl_prompt: "Remind patients about their dental check-up next week.",
    })
    const bad = await call("POST", `/api/workflows/${w.id}/regenerate-rule-book`, owner, {
      nl_prompt: "INVALID_RULEBOOK",
    })
    expect(bad.status).toBe(422)
    expect(bad.body.code).toBe("RULE_BOOK_INVALID")
    const after = await call("GET", `/api/workflows/${w.id}`, owner)
    expect(after.body.rule_book_version).toBe(3)
  })

  it("writes the persona local to the workspace's country", async () => {
    const us = await a.signup({ country: "US" })
    const w = await create(us, { nl_prompt: "Call customers about the new plan." })
    expect(w.rule_book).toMatchObject({ persona: "anya", language: "en-US" })
  })
})

describe("consent attestation", () => {
  it("records the signed-in user and refuses API keys", async () => {
    const w = await create()
    const key = await a.createKey(owner, { name: "admin key", scope: "admin" })
    const byKey = await call("PUT", `/api/workflows/${w.id}/compliance`, key.secret, {
      consent_attestation_text: "We have consent.",
    })
    expect(byKey.status).toBe(403)
    expect(byKey.body.code).toBe("API_KEY_NOT_ALLOWED")

    const res = await call("PUT", `/api/workflows/${w.id}/compliance`, owner, {
      consent_attestation_text: "Every number was collected with opt-in consent on our sign-up form.",
      dpdp_consent_method: "web form checkbox",
    })
    expect(res.status).toBe(200)
    expect(res.body.compliance).toMatchObject({
      attested: true,
      consent_attested_by_user_id: owner.userId,
      dpdp_consent_method: "web form checkbox",
      tcpa_sender_id: null,
    })
    expect(Date.parse(res.body.compliance.consent_attested_at)).not.toBeNaN()
    const [row] = await srv.sql`select compliance from workflows where id = ${w.id}`
    expect(row!.compliance.consent_attested_by_user_id).toBe(owner.userId)

    // Every attestation is kept, with the one it replaced: who, when, the text.
    const again = await call("PUT", `/api/workflows/${w.id}/compliance`, owner, {
      consent_attestation_text: "Numbers came from our opt-in list, exported on 1 November.",
    })
    expect(again.status).toBe(200)
    const log = await call("GET", "/audit?action=compliance.attested", owner)
    expect(log.body.events).toHaveLength(2)
    expect(log.body.events[0]).toMatchObject({
      actor: `user:${owner.userId}`,
      target: `workflow:${w.id}`,
      before: { consent_attestation_text: "Every number was collected with opt-in consent on our sign-up form." },
      after: {
        consent_attestation_text: "Numbers came from our opt-in list, exported on 1 November.",
        consent_attested_by_user_id: owner.userId,
      },
    })
    expect(log.body.events[1].before).toBeNull()
  })

  it("needs the attestation text", async () => {
    const w = await create()
    const res = await call("PUT", `/api/workflows/${w.id}/compliance`, owner, { tcpa_sender_id: "ACME" })
    expect(res.status).toBe(422)
    expect(res.body.field).toBe("consent_attestation_text")
  })
})

describe("retiring and deleting", () => {
  it("refuses both while a run is running, then retires for good", async () => {
    const w = await create()
    const [run] = await srv.sql<
      [{ id: number }]
    >`insert into runs (tenant_id, workflow_id) values (${owner.tenantId}, ${w.id}) returning id`
    await srv.sql`update workflows set status = 'live' where id = ${w.id}`
    for (const [method, path] of [
      ["POST", `/api/workflows/${w.id}/retire`],
      ["DELETE", `/api/workflows/${w.id}`],
    ] as const) {
      const res = await call(method, path, owner)
      expect(res.status).toBe(409)
      expect(res.body).toMatchObject({ code: "RUN_IN_PROGRESS", run_id: run.id })
    }
    expect((await call("GET", `/api/workflows/${w.id}`, owner)).body.status).toBe("live")

    await srv.sql`update runs set status = 'completed', ended_at = now() where id = ${run.id}`
    const retired = await call("POST", `/api/workflows/${w.id}/retire`, owner)
    expect(retired.status).toBe(200)
    expect(retired.body).toMatchObject({ status: "retired", archived_at: null })
    expect(retired.body.retired_at).not.toBeNull()
    // Terminal: nothing changes it any more, and retiring again is harmless.
    expect((await call("PUT", `/api/workflows/${w.id}`, owner, { name: "back?" })).body.code).toBe("WORKFLOW_RETIRED")
    expect((await call("POST", `/api/workflows/${w.id}/regenerate-rule-book`, owner)).status).toBe(409)
    expect(
      (await call("PUT", `/api/workflows/${w.id}/compliance`, owner, { consent_attestation_text: "x" })).status,
    ).toBe(409)
    expect((await call("POST", `/api/workflows/${w.id}/retire`, owner)).status).toBe(200)
  })

  it("soft-deletes: retired with archived_at, hidden from the list unless asked for", async () => {
    const w = await create()
    const res = await call("DELETE", `/api/workflows/${w.id}`, owner)
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ deleted: true, id: w.id, status: "retired" })
    expect(res.body.archived_at).not.toBeNull()
    const list = await call("GET", "/api/workflows", owner)
    expect(list.body.workflows.map((x: Json) => x.id)).not.toContain(w.id)
    const archived = await call("GET", "/api/workflows?include_archived=true", owner)
    expect(archived.body.workflows.map((x: Json) => x.id)).toContain(w.id)
    expect((await call("GET", `/api/workflows/${w.id}`, owner)).body.archived_at).toBe(res.body.archived_at)
    const [row] = await srv.sql`select status, archived_at from workflows where id = ${w.id}`
    expect(row!.status).toBe("retired")
    expect(row!.archived_at).not.toBeNull()
  })

  it("needs admin: a write key gets 403 and changes nothing", async () => {
    const w = await create()
    const key = await a.createKey(owner, { name: "writer", scope: "write" })
    expect((await call("POST", `/api/workflows/${w.id}/retire`, key.secret)).status).toBe(403)
    expect((await call("DELETE", `/api/workflows/${w.id}`, key.secret)).status).toBe(403)
    expect((await call("GET", `/api/workflows/${w.id}`, owner)).body.status).toBe("draft")
  })
})

describe("tenant isolation", () => {
  it("answers 404 for another workspace's workflow on every endpoint and changes nothing", async () => {
    const w = await create(owner)
    const attempts: Array<[string, string, unknown?]> = [
      ["GET", `/api/workflows/${w.id}`],
      ["PUT", `/api/workflows/${w.id}`, { name: "hijacked" }],
      ["POST", `/api/workflows/${w.id}/regenerate-rule-book`, {}],
      ["PUT", `/api/workflows/${w.id}/compliance`, { consent_attestation_text: "not mine" }],
      ["POST", `/api/workflows/${w.id}/retire`],
      ["DELETE", `/api/workflows/${w.id}`],
      ["GET", `/api/workflows/${w.id}/runs`],
    ]
    for (const [method, path, body] of attempts) {
      const res = await call(method, path, other, body)
      expect({ method, path, status: res.status, code: res.body.code }).toEqual({
        method,
        path,
        status: 404,
        code: "NOT_FOUND",
      })
    }
    const list = await call("GET", "/api/workflows", other)
    expect(list.body.workflows.map((x: Json) => x.id)).not.toContain(w.id)
    const after = await call("GET", `/api/workflows/${w.id}`, owner)
    expect(after.body).toMatchObject({
      name: w.name,
      status: "draft",
      rule_book_version: 1,
      compliance: { attested: false },
    })
  })

  it("needs credentials", async () => {
    expect((await a.call("GET", "/api/workflows")).status).toBe(401)
    expect((await a.call("POST", "/api/workflows", { body: { nl_prompt: PROMPT } })).status).toBe(401)
  })
})
