// Knowledge-base rules through the real server: create (limits, workflow check), list (filters,
// limits 0/1/1000/1001), read, change (status archives and restores), archive by DELETE, the
// timeline rows and bus announcements each change makes, scopes and tenant isolation.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Bus } from "../../src/platform/Bus.js"
import { kbRulesChangedSubject } from "../../src/platform/subjects.js"
import { api, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
let a: ReturnType<typeof api>
beforeAll(async () => {
  srv = await sharedTestServer()
  a = api(srv)
})
afterAll(async () => srv?.stop())

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const call = async (method: string, path: string, s: Session | string, body?: unknown) => {
  const res = await a.call(method, path, {
    token: typeof s === "string" ? s : s.token,
    ...(body !== undefined && { body }),
  })
  return { status: res.status, body: (await res.json()) as Json }
}
const create = async (s: Session, body: Json) => {
  const r = await call("POST", "/kb/rules", s, body)
  if (r.status !== 201) throw new Error(`create ${r.status}: ${JSON.stringify(r.body)}`)
  return r.body
}
const rule = (extra: Json = {}) => ({
  bucket: "objection.price",
  title: "Price",
  body: "Offer the monthly plan.",
  ...extra,
})
const workflow = async (s: Session) => {
  const r = await call("POST", "/api/workflows", s, { nl_prompt: "Sell a yearly gym membership to past members" })
  if (r.status !== 201) throw new Error(`workflow ${r.status}: ${JSON.stringify(r.body)}`)
  return r.body.id as number
}
const events = (tenantId: number) =>
  srv.sql<Array<{ action: string; rule_id: number | null; detail: Json }>>`
    select action, rule_id::int as rule_id, detail from kb_events where tenant_id = ${tenantId} order by id`
const ruleCount = async (tenantId: number) =>
  (await srv.sql<[{ n: number }]>`select count(*)::int as n from kb_rules where tenant_id = ${tenantId}`)[0].n

describe("POST /kb/rules", () => {
  it("creates a rule (201) in the documented shape and records rule_created", async () => {
    const s = await a.signup()
    const r = await call("POST", "/kb/rules", s, rule({ trigger: { phrases: [" too expensive "], category: "price" } }))
    expect(r.status).toBe(201)
    expect(r.body).toMatchObject({
      bucket: "objection.price",
      title: "Price",
      body: "Offer the monthly plan.",
      trigger: { phrases: ["too expensive"], category: "price" },
      workflow_id: null,
      priority: 0,
      status: "active",
      archived: false,
      source_kind: "manual",
      feedback_ids: [],
    })
    expect(r.body.id).toBeGreaterThan(0)
    expect(Date.parse(r.body.created_at)).toBeGreaterThan(Date.now() - 60_000)
    expect(r.body.updated_at).toBe(r.body.created_at)
    expect(await events(s.tenantId)).toEqual([
      {
        action: "rule_created",
        rule_id: r.body.id,
        detail: { bucket: "objection.price", title: "Price", status: "active", actor: `user:${s.userId}` },
      },
    ])
    const got = await call("GET", `/kb/rules/${r.body.id}`, s)
    expect(got).toEqual({ status: 200, body: r.body })
  })

  it("an empty trigger is no trigger; priority and status as given", async () => {
    const s = await a.signup()
    const r = await create(s, rule({ trigger: { phrases: [], category: null }, priority: -1000, status: "paused" }))
    expect(r).toMatchObject({ trigger: null, priority: -1000, status: "paused", archived: false })
  })

  it("refuses what is out of bounds with 422 VALIDATION_FAILED on the field", async () => {
    const s = await a.signup()
    const cases: Array<[Json, string]> = [
      [{ bucket: "Objection" }, "bucket"],
      [{ bucket: "x".repeat(65) }, "bucket"],
      [{ bucket: undefined }, "bucket"],
      [{ title: "" }, "title"],
      [{ title: "t".repeat(201) }, "title"],
      [{ body: "   " }, "body"],
      [{ body: "b".repeat(2001) }, "body"],
      [{ trigger: { phrases: ["a | b"] } }, "trigger.phrases.0"],
      [{ trigger: { phrases: Array.from({ length: 21 }, (_, i) => `p${i}`) } }, "trigger.phrases"],
      [{ trigger: { phrases: ["x".repeat(201)] } }, "trigger.phrases.0"],
      [{ trigger: { category: "Price!" } }, "trigger.category"],
      [{ priority: 1001 }, "priority"],
      [{ priority: 1.5 }, "priority"],
      [{ status: "archived" }, "status"],
      [{ workflow_id: "abc" }, "workflow_id"],
    ]
    for (const [extra, field] of cases) {
      const r = await call("POST", "/kb/rules", s, rule(extra))
      expect({ status: r.status, code: r.body.code, field: r.body.field }, JSON.stringify(extra)).toEqual({
        status: 422,
        code: "VALIDATION_FAILED",
        field,
      })
    }
    expect(await ruleCount(s.tenantId)).toBe(0)
  })

  it("takes a workflow of the workspace; another workspace's workflow is 422 on workflow_id", async () => {
    const s = await a.signup()
    const other = await a.signup()
    const mine = await workflow(s)
    const theirs = await workflow(other)
    expect((await create(s, rule({ workflow_id: mine }))).workflow_id).toBe(mine)
    const r = await call("POST", "/kb/rules", s, rule({ workflow_id: theirs }))
    expect(r.status).toBe(422)
    expect(r.body).toMatchObject({ code: "VALIDATION_FAILED", field: "workflow_id" })
    expect(r.body.errors).toEqual([{ field: "workflow_id", message: "no such workflow in this workspace" }])
    expect((await call("POST", "/kb/rules", s, rule({ workflow_id: 999_999 }))).status).toBe(422)
  })
})

describe("GET /kb/rules", () => {
  let s: Session
  const ids: Record<string, number> = {}
  beforeAll(async () => {
    s = await a.signup()
    ids.a = (await create(s, rule({ bucket: "opening", title: "A" }))).id
    ids.b = (await create(s, rule({ bucket: "closing", title: "B", status: "paused" }))).id
    ids.c = (await create(s, rule({ bucket: "opening", title: "C" }))).id
    ids.d = (await create(s, rule({ bucket: "opening", title: "D" }))).id
    expect((await call("DELETE", `/kb/rules/${ids.d}`, s)).status).toBe(200)
  })
  const titles = async (qs: string) => {
    const r = await call("GET", `/kb/rules${qs}`, s)
    expect(r.status, JSON.stringify(r.body)).toBe(200)
    return (r.body.rules as Json[]).map((x) => x.title)
  }

  it("lists live rules newest first; archived ones only when asked", async () => {
    expect(await titles("")).toEqual(["C", "B", "A"])
    expect(await titles("?include_archived=true")).toEqual(["D", "C", "B", "A"])
    expect(await titles("?include_archived=false")).toEqual(["C", "B", "A"])
  })

  it("filters by bucket and status", async () => {
    expect(await titles("?bucket=opening")).toEqual(["C", "A"])
    expect(await titles("?bucket=opening&include_archived=1")).toEqual(["D", "C", "A"])
    expect(await titles("?status=paused")).toEqual(["B"])
    expect(await titles("?status=archived")).toEqual(["D"])
    expect(await titles("?bucket=nothing")).toEqual([])
    const bad = await call("GET", "/kb/rules?status=gone", s)
    expect(bad).toMatchObject({ status: 422, body: { code: "VALIDATION_FAILED", field: "status" } })
    expect((await call("GET", "/kb/rules?include_archived=maybe", s)).status).toBe(422)
  })

  it("limit: 1 and 1000 work, 0 and 1001 are 422, 200 by default", async () => {
    const t = await a.signup()
    const csv = ["bucket,title,body", ...Array.from({ length: 1001 }, (_, i) => `bulk,Rule ${i},Body ${i}`)].join("\n")
    const imp = await fetch(`${srv.url}/kb/import`, {
      method: "POST",
      body: csv,
      headers: { authorization: `Bearer ${t.token}`, "content-type": "text/csv" },
    })
    expect(imp.status).toBe(200)
    const count = async (qs: string) => {
      const r = await call("GET", `/kb/rules${qs}`, t)
      return r.status === 200 ? (r.body.rules as Json[]).length : r.status
    }
    expect(await count("?limit=1")).toBe(1)
    expect(await count("?limit=1000")).toBe(1000)
    expect(await count("")).toBe(200)
    expect(await count("?limit=0")).toBe(422)
    expect(await count("?limit=1001")).toBe(422)
    const r = await call("GET", "/kb/rules?limit=0", t)
    expect(r.body).toMatchObject({ code: "VALIDATION_FAILED", field: "limit" })
    // next_cursor pages on from the last rule shown; null once nothing follows.
    const first = await call("GET", "/kb/rules?limit=1000", t)
    expect(first.body.next_cursor).toEqual(expect.any(String))
    const rest = await call("GET", `/kb/rules?limit=1000&cursor=${first.body.next_cursor}`, t)
    expect(rest.body.rules.map((x: Json) => x.title)).toEqual(["Rule 0"])
    expect(rest.body.next_cursor).toBeNull()
    expect((await call("GET", "/kb/rules?cursor=nonsense", t)).body).toMatchObject({ field: "cursor" })
  })
})

describe("PUT and DELETE /kb/rules/{rule_id}", () => {
  it("PUT changes the fields given and records rule_updated", async () => {
    const s = await a.signup()
    const wf = await workflow(s)
    const r = await create(s, rule({ trigger: { phrases: ["price"] } }))
    await new Promise((done) => setTimeout(done, 5))
    const put = await call("PUT", `/kb/rules/${r.id}`, s, { title: "New", priority: 7, workflow_id: wf })
    expect(put.status).toBe(200)
    expect(put.body).toMatchObject({
      id: r.id,
      title: "New",
      priority: 7,
      workflow_id: wf,
      body: r.body,
      trigger: r.trigger,
    })
    expect(Date.parse(put.body.updated_at)).toBeGreaterThan(Date.parse(r.updated_at))
    const cleared = await call("PUT", `/kb/rules/${r.id}`, s, { trigger: null, workflow_id: null })
    expect(cleared.body).toMatchObject({ trigger: null, workflow_id: null, title: "New" })
    expect((await events(s.tenantId)).slice(1)).toEqual([
      {
        action: "rule_updated",
        rule_id: r.id,
        detail: {
          bucket: r.bucket,
          title: "New",
          fields: ["title", "workflow_id", "priority"],
          actor: `user:${s.userId}`,
        },
      },
      {
        action: "rule_updated",
        rule_id: r.id,
        detail: { bucket: r.bucket, title: "New", fields: ["trigger", "workflow_id"], actor: `user:${s.userId}` },
      },
    ])
  })

  it("PUT refuses an empty change, bad fields and a foreign workflow (422), an unknown rule (404)", async () => {
    const s = await a.signup()
    const other = await a.signup()
    const r = await create(s, rule())
    expect((await call("PUT", `/kb/rules/${r.id}`, s, {})).status).toBe(422)
    expect((await call("PUT", `/kb/rules/${r.id}`, s, { title: "" })).body).toMatchObject({ field: "title" })
    expect((await call("PUT", `/kb/rules/${r.id}`, s, { status: "deleted" })).body).toMatchObject({ field: "status" })
    const foreign = await call("PUT", `/kb/rules/${r.id}`, s, { workflow_id: await workflow(other) })
    expect(foreign).toMatchObject({ status: 422, body: { field: "workflow_id" } })
    expect((await call("PUT", "/kb/rules/999999", s, { title: "x" })).status).toBe(404)
    expect((await call("PUT", "/kb/rules/abc", s, { title: "x" })).status).toBe(422)
    expect((await call("GET", `/kb/rules/${r.id}`, s)).body.title).toBe("Price")
  })

  it("PUT status archived archives; PUT status active or paused restores", async () => {
    const s = await a.signup()
    const r = await create(s, rule())
    const archived = await call("PUT", `/kb/rules/${r.id}`, s, { status: "archived" })
    expect(archived.body).toMatchObject({ status: "archived", archived: true })
    expect((await call("GET", "/kb/rules", s)).body.rules).toEqual([])
    const paused = await call("PUT", `/kb/rules/${r.id}`, s, { status: "paused" })
    expect(paused.body).toMatchObject({ status: "paused", archived: false })
    const active = await call("PUT", `/kb/rules/${r.id}`, s, { status: "active" })
    expect(active.body).toMatchObject({ status: "active", archived: false })
    expect((await events(s.tenantId)).map((e) => [e.action, e.detail.status_from, e.detail.status_to])).toEqual([
      ["rule_created", undefined, undefined],
      ["rule_archived", "active", "archived"],
      ["rule_updated", "archived", "paused"],
      ["rule_updated", "paused", "active"],
    ])
  })

  it("DELETE archives (still readable), a second DELETE is 404", async () => {
    const s = await a.signup()
    const r = await create(s, rule())
    const del = await call("DELETE", `/kb/rules/${r.id}`, s)
    expect(del.status).toBe(200)
    expect(del.body).toMatchObject({ id: r.id, status: "archived", archived: true })
    expect((await call("DELETE", `/kb/rules/${r.id}`, s)).status).toBe(404)
    const got = await call("GET", `/kb/rules/${r.id}`, s)
    expect(got.body).toMatchObject({ status: "archived", archived: true, title: "Price" })
    expect(await ruleCount(s.tenantId)).toBe(1)
    expect((await events(s.tenantId)).map((e) => e.action)).toEqual(["rule_created", "rule_archived"])
    expect((await call("DELETE", "/kb/rules/999999", s)).status).toBe(404)
  })

  it("announces every change on kb.rules.<tenant> with the workflow it touched", async () => {
    const s = await a.signup()
    const wf = await workflow(s)
    const bus = await srv.running.runtime.runPromise(Bus)
    const heard: Json[] = []
    const sub = bus.subscribe(kbRulesChangedSubject(s.tenantId), (m) => {
      heard.push(m.json())
    })
    try {
      await bus.flush()
      const r = await create(s, rule({ workflow_id: wf }))
      await call("PUT", `/kb/rules/${r.id}`, s, { priority: 3 })
      await call("DELETE", `/kb/rules/${r.id}`, s)
      await create(s, rule())
      await expect.poll(() => heard.length).toBe(4)
      expect(heard).toEqual([
        { tenant_id: s.tenantId, workflow_id: wf },
        { tenant_id: s.tenantId, workflow_id: wf },
        { tenant_id: s.tenantId, workflow_id: wf },
        { tenant_id: s.tenantId, workflow_id: null },
      ])
    } finally {
      sub.unsubscribe()
    }
  })
})

describe("tenants and scopes", () => {
  it("another workspace's rule is 404 on GET, PUT and DELETE and never listed", async () => {
    const s = await a.signup()
    const other = await a.signup()
    const r = await create(s, rule())
    expect((await call("GET", `/kb/rules/${r.id}`, other)).status).toBe(404)
    expect((await call("PUT", `/kb/rules/${r.id}`, other, { title: "mine now" })).status).toBe(404)
    expect((await call("DELETE", `/kb/rules/${r.id}`, other)).status).toBe(404)
    expect((await call("GET", "/kb/rules?include_archived=true", other)).body).toEqual({ rules: [], next_cursor: null })
    expect((await call("GET", `/kb/rules/${r.id}`, s)).body).toMatchObject({ title: "Price", status: "active" })
  })

  it("read keys read, write keys create and change, only admin keys archive", async () => {
    const s = await a.signup()
    const r = await create(s, rule())
    const read = await a.createKey(s, { name: "r", scope: "read" })
    const write = await a.createKey(s, { name: "w", scope: "write" })
    const admin = await a.createKey(s, { name: "a", scope: "admin" })
    expect((await call("GET", "/kb/rules", read.secret)).status).toBe(200)
    expect((await call("GET", `/kb/rules/${r.id}`, read.secret)).status).toBe(200)
    const denied = await call("POST", "/kb/rules", read.secret, rule())
    expect(denied).toMatchObject({ status: 403, body: { code: "INSUFFICIENT_SCOPE" } })
    expect((await call("PUT", `/kb/rules/${r.id}`, read.secret, { title: "x" })).status).toBe(403)
    expect((await call("POST", "/kb/rules", write.secret, rule())).status).toBe(201)
    expect((await call("PUT", `/kb/rules/${r.id}`, write.secret, { title: "by key" })).status).toBe(200)
    const noDelete = await call("DELETE", `/kb/rules/${r.id}`, write.secret)
    expect(noDelete).toMatchObject({ status: 403, body: { code: "INSUFFICIENT_SCOPE" } })
    expect((await call("DELETE", `/kb/rules/${r.id}`, admin.secret)).status).toBe(200)
    expect((await a.call("GET", "/kb/rules")).status).toBe(401)
  })
})
