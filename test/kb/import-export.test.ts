// Knowledge-base files through the real server: export (CSV and JSON, attachment, formula cells
// escaped), import back unchanged in both formats, strict all-or-nothing validation with rows
// numbered as in the file, dry runs, mode=replace, 10,000 rules at once, scopes and tenants.

import { parse } from "csv-parse/sync"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
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

const token = (s: Session | string) => (typeof s === "string" ? s : s.token)
const call = async (method: string, path: string, s: Session | string, body?: unknown) => {
  const res = await a.call(method, path, { token: token(s), ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}
const create = async (s: Session, body: Json) => {
  const r = await call("POST", "/kb/rules", s, body)
  if (r.status !== 201) throw new Error(`create ${r.status}: ${JSON.stringify(r.body)}`)
  return r.body
}
const exportFile = (s: Session | string, qs = "") =>
  fetch(`${srv.url}/kb/export${qs}`, { headers: { authorization: `Bearer ${token(s)}` } })
const importFile = async (s: Session | string, content: string, qs = "") => {
  const res = await fetch(`${srv.url}/kb/import${qs}`, {
    method: "POST",
    body: content,
    headers: {
      authorization: `Bearer ${token(s)}`,
      "content-type": qs.includes("format=json") ? "application/json" : "text/csv",
    },
  })
  return { status: res.status, body: (await res.json()) as Json }
}
const rulesOf = (tenantId: number) =>
  srv.sql<Array<Json>>`
    select bucket, title, body, trigger, workflow_id::int as workflow_id, priority, status, source_kind
    from kb_rules where tenant_id = ${tenantId} order by id`
const count = async (tenantId: number) =>
  (await srv.sql<[{ n: number }]>`select count(*)::int as n from kb_rules where tenant_id = ${tenantId}`)[0].n
const portable = ({ source_kind: _, ...r }: Json) => r
const workflow = async (s: Session) => {
  const r = await call("POST", "/api/workflows", s, { nl_prompt: "Sell a yearly gym membership to past members" })
  if (r.status !== 201) throw new Error(`workflow ${r.status}: ${JSON.stringify(r.body)}`)
  return r.body.id as number
}

/** Rules whose cells exercise quoting, commas, newlines and every kind of formula cell. */
async function awkwardRules(s: Session): Promise<void> {
  const wf = await workflow(s)
  await create(s, {
    bucket: "objection.price",
    title: 'He said "too much", then hung up',
    body: 'Line one, with a comma\nLine two "quoted"\r\nLine three',
    trigger: { phrases: ["=SUM(A1)", "too, expensive", 'it\'s "pricey"'], category: "price" },
    priority: -5,
  })
  await create(s, { bucket: "compliance", title: "=SUM(A1)", body: "-5", workflow_id: wf, status: "paused" })
  await create(s, { bucket: "opening", title: "'=x", body: "@x", trigger: { phrases: ["-5"] } })
  await create(s, { bucket: "closing", title: "'plain", body: "+1 for the plan", priority: 1000 })
  const gone = await create(s, { bucket: "closing", title: "old", body: "\t=tabbed? no: trimmed" })
  expect((await call("DELETE", `/kb/rules/${gone.id}`, s)).status).toBe(200)
}

describe("GET /kb/export", () => {
  it("downloads CSV by default as an attachment, formula cells prefixed with one quote", async () => {
    const s = await a.signup()
    await awkwardRules(s)
    const res = await exportFile(s)
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toBe("text/csv; charset=utf-8")
    expect(res.headers.get("content-disposition")).toMatch(/^attachment; filename="kb-rules-\d{4}-\d{2}-\d{2}\.csv"$/)
    const text = await res.text()
    const [header, ...rows] = parse(text) as string[][]
    expect(header).toEqual([
      "bucket",
      "title",
      "body",
      "trigger_phrases",
      "trigger_category",
      "workflow_id",
      "priority",
      "status",
    ])
    expect(rows).toHaveLength(4)
    expect(rows[0]).toEqual([
      "objection.price",
      'He said "too much", then hung up',
      'Line one, with a comma\nLine two "quoted"\r\nLine three',
      "'=SUM(A1) | too, expensive | it's \"pricey\"",
      "price",
      "",
      "'-5",
      "active",
    ])
    expect(rows[1]!.slice(1, 3)).toEqual(["'=SUM(A1)", "'-5"])
    expect(rows[2]!.slice(1, 4)).toEqual(["''=x", "'@x", "'-5"])
    expect(rows[3]!.slice(1, 3)).toEqual(["'plain", "'+1 for the plan"])
    const all = parse(await (await exportFile(s, "?format=csv&include_archived=true")).text()) as string[][]
    expect(all).toHaveLength(6)
    expect(all[5]!.slice(1, 3)).toEqual(["old", "'=tabbed? no: trimmed"])
  })

  it("downloads JSON {rules: [...]} without ids, archived ones when asked", async () => {
    const s = await a.signup()
    await awkwardRules(s)
    const res = await exportFile(s, "?format=json")
    expect(res.headers.get("content-type")).toBe("application/json")
    expect(res.headers.get("content-disposition")).toMatch(/^attachment; filename="kb-rules-\d{4}-\d{2}-\d{2}\.json"$/)
    const doc = (await res.json()) as { rules: Json[] }
    expect(doc.rules.map((r) => r.title)).toEqual(['He said "too much", then hung up', "=SUM(A1)", "'=x", "'plain"])
    expect(doc.rules[2]).toEqual({
      bucket: "opening",
      title: "'=x",
      body: "@x",
      trigger: { phrases: ["-5"], category: null },
      workflow_id: null,
      priority: 0,
      status: "active",
    })
    const all = (await (await exportFile(s, "?format=json&include_archived=true")).json()) as { rules: Json[] }
    expect(all.rules.at(-1)).toMatchObject({ title: "old", status: "archived" })
    expect((await exportFile(s, "?format=xml")).status).toBe(422)
  })

  it("never shows another workspace's rules", async () => {
    const s = await a.signup()
    const other = await a.signup()
    await create(s, { bucket: "opening", title: "mine", body: "hello" })
    expect(parse(await (await exportFile(other, "?include_archived=true")).text())).toHaveLength(1)
    expect(await (await exportFile(other, "?format=json")).json()).toEqual({ rules: [] })
  })
})

describe("export → import round trip", () => {
  for (const format of ["csv", "json"] as const) {
    it(`${format}: merge adds equal rules (quotes, commas, newlines, formula cells intact)`, async () => {
      const s = await a.signup()
      await awkwardRules(s)
      const before = await rulesOf(s.tenantId)
      const file = await (await exportFile(s, `?format=${format}&include_archived=true`)).text()
      const r = await importFile(s, file, `?format=${format}&mode=merge`)
      expect(r).toEqual({ status: 200, body: { created: 5, archived: 0 } })
      const after = await rulesOf(s.tenantId)
      expect(after).toHaveLength(10)
      expect(after.slice(5).map(portable)).toEqual(before.map(portable))
      expect(after.slice(5).every((x) => x.source_kind === "import")).toBe(true)
      // And the re-export of the copies is byte for byte the export of the originals.
      const again = await (await exportFile(s, `?format=${format}&include_archived=true`)).text()
      if (format === "csv") expect(parse(again).slice(6)).toEqual(parse(file).slice(1))
      else expect((JSON.parse(again) as Json).rules.slice(5)).toEqual((JSON.parse(file) as Json).rules)
    })
  }

  it("json: a bare array is taken too; unknown keys are ignored", async () => {
    const s = await a.signup()
    const r = await importFile(
      s,
      JSON.stringify([{ bucket: "opening", title: "T", body: "B", id: 4, archived: false }]),
      "?format=json",
    )
    expect(r).toEqual({ status: 200, body: { created: 1, archived: 0 } })
    expect(await rulesOf(s.tenantId)).toEqual([
      {
        bucket: "opening",
        title: "T",
        body: "B",
        trigger: null,
        workflow_id: null,
        priority: 0,
        status: "active",
        source_kind: "import",
      },
    ])
  })

  it("records rules_imported with its counts", async () => {
    const s = await a.signup()
    await importFile(s, "bucket,title,body\nopening,A,a\nclosing,B,b\n", "?mode=replace")
    const ev = await srv.sql<Json[]>`select action, detail from kb_events where tenant_id = ${s.tenantId}`
    expect(ev).toEqual([
      {
        action: "rules_imported",
        detail: {
          format: "csv",
          mode: "replace",
          created: 2,
          archived: 0,
          buckets: ["opening", "closing"],
          actor: `user:${s.userId}`,
        },
      },
    ])
  })
})

describe("strict validation", () => {
  it("one invalid row among 1,000 rejects them all and names its line", async () => {
    const s = await a.signup()
    await create(s, { bucket: "opening", title: "keep", body: "me" })
    const lines = ["bucket,title,body,priority"]
    for (let i = 0; i < 1000; i++) {
      if (i === 10)
        lines.push(`opening,Multi,"a\nb\nc",1`) // three lines: later rows start lower down
      else if (i === 700) lines.push(`Bad Bucket,Row,body,1`)
      else lines.push(`bulk,Rule ${i},Body ${i},${i % 50}`)
    }
    const r = await importFile(s, lines.join("\n"))
    expect(r.status).toBe(422)
    expect(r.body).toMatchObject({ code: "IMPORT_INVALID", field: "bucket" })
    // Line 1 is the header, row i is on line i + 2, plus two for the three-line record.
    expect(r.body.errors).toEqual([{ row: 704, field: "bucket", message: expect.any(String) }])
    expect(await count(s.tenantId)).toBe(1)
    expect(
      await srv.sql`select 1 from kb_events where tenant_id = ${s.tenantId} and action = 'rules_imported'`,
    ).toHaveLength(0)
  })

  it("reports every failing row and field, in file order", async () => {
    const s = await a.signup()
    const other = await a.signup()
    const foreign = await workflow(other)
    const csv = [
      "bucket,title,body,trigger_phrases,trigger_category,workflow_id,priority,status",
      "ok,fine,fine,,,,,",
      `ok,,fine,,,${foreign},2000,gone`,
      "ok,fine,fine,a | | b,Not A Category,x,1.5,paused",
      `ok,fine,fine,,,${foreign},,`,
      "ok,short",
    ].join("\n")
    const r = await importFile(s, csv)
    expect(r.status).toBe(422)
    const fields = (r.body.errors as Json[]).map((e) => `${e.row}:${e.field}`)
    expect(fields).toEqual([
      "3:title",
      "3:priority",
      "3:status",
      "4:trigger_phrases",
      "4:trigger_category",
      "4:workflow_id",
      "4:priority",
      "6:row",
    ])
    expect(await count(s.tenantId)).toBe(0)
    // Foreign workflows are checked only once the rows are well formed; then they are errors too.
    const r2 = await importFile(s, `bucket,title,body,workflow_id\nok,a,b,${foreign}\nok,a,b,\nok,a,b,${foreign}\n`)
    expect(r2.body.errors).toEqual([
      { row: 2, field: "workflow_id", message: "no such workflow in this workspace" },
      { row: 4, field: "workflow_id", message: "no such workflow in this workspace" },
    ])
  })

  it("json rows are numbered from 1 and named by their field path", async () => {
    const s = await a.signup()
    const rules = [
      { bucket: "ok", title: "a", body: "b" },
      { bucket: "ok", title: "a", body: "b", trigger: { phrases: ["x|y"] } },
      "not a rule",
    ]
    const r = await importFile(s, JSON.stringify({ rules }), "?format=json")
    expect(r.status).toBe(422)
    expect((r.body.errors as Json[]).map((e) => `${e.row}:${e.field}`)).toEqual(["2:trigger.phrases.0", "3:row"])
  })

  it("header problems are errors on row 1; unreadable files name the parser's complaint", async () => {
    const s = await a.signup()
    const unknown = await importFile(s, "bucket,title,body,colour\nok,a,b,red\n")
    expect(unknown.body.errors).toEqual([
      { row: 1, field: "colour", message: expect.stringContaining("unknown column") },
    ])
    const missing = await importFile(s, "bucket,title\nok,a\n")
    expect(missing.body.errors).toEqual([{ row: 1, field: "body", message: "missing column (required)" }])
    const quote = await importFile(s, 'bucket,title,body\nok,a,b\nok,"never closed,b\nok,a,b\n')
    expect(quote.status).toBe(422)
    expect(quote.body.errors).toEqual([{ row: 3, field: "file", message: expect.stringContaining("Quote Not Closed") }])
    const empty = await importFile(s, "")
    expect(empty).toMatchObject({ status: 422, body: { code: "IMPORT_INVALID", errors: [{ row: 1, field: "file" }] } })
    const badJson = await importFile(s, "{rules: [", "?format=json")
    expect(badJson).toMatchObject({
      status: 422,
      body: { code: "IMPORT_INVALID", errors: [{ row: 0, field: "file" }] },
    })
    const notRules = await importFile(s, '{"rows": []}', "?format=json")
    expect(notRules.body.errors).toEqual([{ row: 0, field: "rules", message: expect.any(String) }])
    expect((await importFile(s, "bucket,title,body\n", "?mode=sideways")).status).toBe(422)
    expect(await count(s.tenantId)).toBe(0)
  })

  it("more than 10,000 rows is one error on row 0, field rows", async () => {
    const s = await a.signup()
    const csv = ["bucket,title,body", ...Array.from({ length: 10_001 }, (_, i) => `b,t${i},x`)].join("\n")
    const r = await importFile(s, csv)
    expect(r).toMatchObject({ status: 422, body: { code: "IMPORT_INVALID" } })
    expect(r.body.errors).toEqual([{ row: 0, field: "rows", message: "at most 10000 rules per import" }])
    const json = JSON.stringify(Array.from({ length: 10_001 }, (_, i) => ({ bucket: "b", title: `t${i}`, body: "x" })))
    expect((await importFile(s, json, "?format=json")).body.errors).toEqual(r.body.errors)
    expect(await count(s.tenantId)).toBe(0)
  })
})

describe("dry runs and modes", () => {
  it("dry_run reports what would happen and writes nothing", async () => {
    const s = await a.signup()
    await create(s, { bucket: "opening", title: "old", body: "x" })
    const csv = "bucket,title,body\nopening,A,a\nclosing,B,b\n"
    expect(await importFile(s, csv, "?dry_run=true&mode=replace")).toEqual({
      status: 200,
      body: { would_create: 2, would_archive: 1, errors: [] },
    })
    expect(await importFile(s, csv, "?dry_run=true")).toEqual({
      status: 200,
      body: { would_create: 2, would_archive: 0, errors: [] },
    })
    const bad = await importFile(s, "bucket,title,body\nopening,,a\n", "?dry_run=true")
    expect(bad).toEqual({
      status: 200,
      body: { would_create: 0, would_archive: 0, errors: [{ row: 2, field: "title", message: "is required" }] },
    })
    expect(await rulesOf(s.tenantId)).toMatchObject([{ title: "old", status: "active" }])
    expect(
      await srv.sql`select 1 from kb_events where tenant_id = ${s.tenantId} and action = 'rules_imported'`,
    ).toHaveLength(0)
  })

  it("replace archives the active and paused rules of the imported buckets only", async () => {
    const s = await a.signup()
    const opening1 = await create(s, { bucket: "opening", title: "o1", body: "x" })
    const opening2 = await create(s, { bucket: "opening", title: "o2", body: "x", status: "paused" })
    const opening3 = await create(s, { bucket: "opening", title: "o3", body: "x" })
    await call("DELETE", `/kb/rules/${opening3.id}`, s)
    const closing = await create(s, { bucket: "closing", title: "c", body: "x" })
    const price = await create(s, { bucket: "objection.price", title: "p", body: "x" })
    const r = await importFile(s, "bucket,title,body\nopening,new o,y\nobjection.price,new p,y\n", "?mode=replace")
    expect(r).toEqual({ status: 200, body: { created: 2, archived: 3 } })
    const status = async (id: number) => (await call("GET", `/kb/rules/${id}`, s)).body.status
    expect(await status(opening1.id)).toBe("archived")
    expect(await status(opening2.id)).toBe("archived")
    expect(await status(opening3.id)).toBe("archived")
    expect(await status(price.id)).toBe("archived")
    expect(await status(closing.id)).toBe("active")
    const live = (await call("GET", "/kb/rules", s)).body.rules as Json[]
    expect(live.map((x) => x.title)).toEqual(["new p", "new o", "c"])
  })

  it("imports 10,000 rules in one go", async () => {
    const s = await a.signup()
    const csv = [
      "bucket,title,body,trigger_phrases,priority",
      ...Array.from(
        { length: 10_000 },
        (_, i) => `bucket.${i % 10},Rule ${i},"Say this, ${i}",p${i} | q${i},${i % 1000}`,
      ),
    ].join("\r\n")
    const r = await importFile(s, csv)
    expect(r).toEqual({ status: 200, body: { created: 10_000, archived: 0 } })
    expect(await count(s.tenantId)).toBe(10_000)
    const [last] = await srv.sql<Json[]>`
      select title, body, trigger, priority from kb_rules where tenant_id = ${s.tenantId} order by id desc limit 1`
    expect(last).toEqual({
      title: "Rule 9999",
      body: "Say this, 9999",
      trigger: { phrases: ["p9999", "q9999"], category: null },
      priority: 999,
    })
  }, 60_000)
})

describe("scopes and tenants", () => {
  it("a read key exports but cannot import; a write key imports", async () => {
    const s = await a.signup()
    const read = await a.createKey(s, { name: "r", scope: "read" })
    const write = await a.createKey(s, { name: "w", scope: "write" })
    expect((await exportFile(read.secret)).status).toBe(200)
    const denied = await importFile(read.secret, "bucket,title,body\nopening,a,b\n")
    expect(denied).toMatchObject({ status: 403, body: { code: "INSUFFICIENT_SCOPE" } })
    expect((await importFile(write.secret, "bucket,title,body\nopening,a,b\n")).status).toBe(200)
    expect(await count(s.tenantId)).toBe(1)
  })

  it("archiving is an admin's, as DELETE is: a write key may not replace (a dry run reads) nor PUT", async () => {
    const s = await a.signup()
    const kept = await create(s, { bucket: "opening", title: "kept", body: "x" })
    const write = await a.createKey(s, { name: "w", scope: "write" })
    const admin = await a.createKey(s, { name: "a", scope: "admin" })
    const file = "bucket,title,body\nopening,new,y\n"
    expect(await importFile(write.secret, file, "?mode=replace")).toMatchObject({
      status: 403,
      body: { code: "INSUFFICIENT_SCOPE" },
    })
    expect((await importFile(write.secret, file, "?mode=replace&dry_run=true")).body).toMatchObject({
      would_archive: 1,
    })
    const put = await call("PUT", `/kb/rules/${kept.id}`, write.secret, { status: "archived" })
    expect(put).toMatchObject({ status: 403, body: { code: "INSUFFICIENT_SCOPE" } })
    expect(await rulesOf(s.tenantId)).toMatchObject([{ title: "kept", status: "active" }])
    // Other changes by PUT stay a write key's; an admin key archives either way.
    expect((await call("PUT", `/kb/rules/${kept.id}`, write.secret, { status: "paused" })).status).toBe(200)
    expect((await call("PUT", `/kb/rules/${kept.id}`, admin.secret, { status: "archived" })).status).toBe(200)
    expect((await importFile(admin.secret, file, "?mode=replace")).status).toBe(200)
  })

  it("an import writes only into the caller's workspace; replace leaves other workspaces alone", async () => {
    const s = await a.signup()
    const other = await a.signup()
    const theirs = await create(other, { bucket: "opening", title: "theirs", body: "x" })
    expect((await importFile(s, "bucket,title,body\nopening,mine,y\n", "?mode=replace")).body).toEqual({
      created: 1,
      archived: 0,
    })
    expect((await call("GET", `/kb/rules/${theirs.id}`, other)).body.status).toBe("active")
    expect(await count(other.tenantId)).toBe(1)
  })
})
