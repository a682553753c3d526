// Data sources through the real server: a CSV upload stored at once, a URL source fetched by the
// runtime, the rows page and its limits, delete (rows and chat go too), the 422s, URLs refused
// for loopback and private hosts, scopes and workspace isolation.
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { appendMessage } from "../../src/data/sources.repo.js"
import { setHostResolver } from "../../src/providers/outbound.js"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

interface Source {
  id: number
  name: string
  kind: string
  status: string
  row_count: number
  columns: string[]
  last_fetched_at: string | null
  error: string | null
  url?: string
  created_at: string
}

let srv: TestServer
let a: ReturnType<typeof api>
let files: Server
let filesUrl: string
const served = new Map<string, { type: string; body: string }>()

beforeAll(async () => {
  files = createServer((req, res) => {
    const f = served.get(req.url ?? "")
    if (f === undefined) return void res.writeHead(404).end("missing")
    res.writeHead(200, { "content-type": f.type }).end(f.body)
  })
  await new Promise<void>((r) => files.listen(0, "127.0.0.1", r))
  filesUrl = `http://127.0.0.1:${(files.address() as AddressInfo).port}`
  srv = await startTestServer({ env: { ALLOW_PRIVATE_PROVIDER_URLS: "true" } })
  a = api(srv)
})
afterAll(async () => {
  await srv?.stop()
  await new Promise((r) => files?.close(r))
})

async function body<T>(res: Response, status = 200): Promise<T> {
  const b = await res.json()
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${JSON.stringify(b)}`)
  return b as T
}
const errorOf = async (res: Response) => ({
  status: res.status,
  ...((await res.json()) as { code: string; field?: string; error: string }),
})

function upload(s: Session | string, csv: string, name?: string, base = srv.url) {
  const form = new FormData()
  if (name !== undefined) form.set("name", name)
  form.set("file", new Blob([csv], { type: "text/csv" }), "customers.csv")
  return fetch(`${base}/data/sources`, {
    method: "POST",
    body: form,
    headers: { authorization: `Bearer ${typeof s === "string" ? s : s.token}` },
  })
}
const tokenOf = (s: Session | string) => (typeof s === "string" ? s : s.token)
const createUrl = (s: Session | string, url: string, name = "feed", c = a) =>
  c.call("POST", "/data/sources", { token: tokenOf(s), body: { name, kind: "url", url } })
const get = (s: Session | string, id: number) => a.call("GET", `/data/sources/${id}`, { token: tokenOf(s) })
const rows = (s: Session | string, id: number, qs = "") =>
  a.call("GET", `/data/sources/${id}/rows${qs}`, { token: tokenOf(s) })

async function settled(s: Session, id: number): Promise<Source> {
  const until = Date.now() + 15_000
  for (;;) {
    const { source } = await body<{ source: Source }>(await get(s, id))
    if (source.status === "ready" || source.status === "failed") return source
    if (Date.now() > until) throw new Error(`source ${id} still ${source.status}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

const CSV = "name,phone,city\nAsha,+14155550101,Pune\nRavi,+14155550102,\nMeera,+14155550103,Delhi\n"

describe("a csv source", () => {
  it("is parsed at once: 201 ready, columns in header order, rows in file order, blank cells left out", async () => {
    const s = await a.signup()
    const { source } = await body<{ source: Source }>(await upload(s, CSV, "Spring list"), 201)
    expect(source).toMatchObject({
      name: "Spring list",
      kind: "csv",
      status: "ready",
      row_count: 3,
      columns: ["name", "phone", "city"],
      error: null,
    })
    expect(source.url).toBeUndefined()
    expect(source.last_fetched_at).not.toBeNull()
    const page = await body<{ rows: Array<{ row_no: number; data: Record<string, unknown> }>; total: number }>(
      await rows(s, source.id),
    )
    expect(page).toEqual({
      rows: [
        { row_no: 1, data: { name: "Asha", phone: "+14155550101", city: "Pune" } },
        { row_no: 2, data: { name: "Ravi", phone: "+14155550102" } },
        { row_no: 3, data: { name: "Meera", phone: "+14155550103", city: "Delhi" } },
      ],
      total: 3,
      limit: 50,
      offset: 0,
    })
    const [db] = await srv.sql<[{ tenant_id: number; row_count: number }]>`
      select tenant_id, row_count from data_sources where id = ${source.id}`
    expect(db).toEqual({ tenant_id: s.tenantId, row_count: 3 })
    const list = await body<{ sources: Source[] }>(await a.call("GET", "/data/sources", { token: s.token }))
    expect(list.sources.map((x) => x.id)).toEqual([source.id])
  })

  it("names itself after the file without a name; repeated and blank headers get distinct names", async () => {
    const s = await a.signup()
    const { source } = await body<{ source: Source }>(await upload(s, "a,a,,b\n1,2,3,4\n"), 201)
    expect(source.name).toBe("customers.csv")
    expect(source.columns).toEqual(["a", "a_2", "col_3", "b"])
    const page = await body<{ rows: Array<{ data: unknown }> }>(await rows(s, source.id))
    expect(page.rows[0]!.data).toEqual({ a: "1", a_2: "2", col_3: "3", b: "4" })
  })

  it("refuses an empty file, a form without a file and more than 200 columns (422 on file)", async () => {
    const s = await a.signup()
    expect(await errorOf(await upload(s, ""))).toMatchObject({ status: 422, code: "VALIDATION_FAILED", field: "file" })
    const wide = `${Array.from({ length: 201 }, (_, i) => `c${i}`).join(",")}\n${"1,".repeat(200)}1\n`
    expect(await errorOf(await upload(s, wide))).toMatchObject({ status: 422, field: "file" })
    const form = new FormData()
    form.set("name", "no file")
    const res = await fetch(`${srv.url}/data/sources`, {
      method: "POST",
      body: form,
      headers: { authorization: `Bearer ${s.token}` },
    })
    expect(await errorOf(res)).toMatchObject({ status: 422, field: "file" })
    expect(await srv.sql`select 1 from data_sources where tenant_id = ${s.tenantId}`).toHaveLength(0)
  })
})

describe("the JSON body", () => {
  it("422s a storefront or csv kind, a missing url and a missing name", async () => {
    const s = await a.signup()
    const post = (b: unknown) => a.call("POST", "/data/sources", { token: s.token, body: b })
    expect(await errorOf(await post({ name: "shop", kind: "storefront" }))).toMatchObject({
      status: 422,
      field: "kind",
    })
    expect(await errorOf(await post({ name: "x", kind: "csv", url: "https://e.com/a.csv" }))).toMatchObject({
      status: 422,
      field: "kind",
    })
    expect(await errorOf(await post({ name: "x", kind: "url" }))).toMatchObject({ status: 422, field: "url" })
    expect(await errorOf(await post({ kind: "url", url: "https://e.com/a.csv" }))).toMatchObject({
      status: 422,
      field: "name",
    })
    expect(await errorOf(await post({ name: "x", kind: "url", url: "not a url" }))).toMatchObject({
      status: 422,
      field: "url",
    })
  })
})

describe("a url source", () => {
  it("is created pending and fetched by the runtime: CSV and a JSON array of objects", async () => {
    served.set("/list.csv", { type: "text/csv", body: CSV })
    served.set("/list.json", {
      type: "application/json",
      body: JSON.stringify([
        { name: "Asha", orders: 3, vip: true },
        { name: "Ravi", city: "Goa" },
      ]),
    })
    const s = await a.signup()
    const { source } = await body<{ source: Source }>(await createUrl(s, `${filesUrl}/list.csv`, "csv feed"), 201)
    expect(source).toMatchObject({ kind: "url", status: "pending", url: `${filesUrl}/list.csv`, row_count: 0 })
    expect(await settled(s, source.id)).toMatchObject({
      status: "ready",
      row_count: 3,
      columns: ["name", "phone", "city"],
    })
    const j = (await body<{ source: Source }>(await createUrl(s, `${filesUrl}/list.json`), 201)).source
    const done = await settled(s, j.id)
    expect(done).toMatchObject({ status: "ready", row_count: 2, columns: ["name", "orders", "vip", "city"] })
    const page = await body<{ rows: Array<{ data: unknown }> }>(await rows(s, j.id))
    expect(page.rows.map((r) => r.data)).toEqual([
      { name: "Asha", orders: 3, vip: true },
      { name: "Ravi", city: "Goa" },
    ])
    const chat = await srv.sql<Array<{ role: string; text: string }>>`
      select role, text from data_source_messages where source_id = ${j.id} order by id`
    expect(chat).toEqual([{ role: "system", text: "Fetched 2 rows (+2 −0)." }])
  })

  it("fails with the reason when the URL answers an error or is not rows", async () => {
    served.set("/object.json", { type: "application/json", body: '{"customers": []}' })
    const s = await a.signup()
    const missing = (await body<{ source: Source }>(await createUrl(s, `${filesUrl}/nothing.csv`), 201)).source
    expect(await settled(s, missing.id)).toMatchObject({ status: "failed", error: "the URL answered HTTP 404" })
    const obj = (await body<{ source: Source }>(await createUrl(s, `${filesUrl}/object.json`), 201)).source
    expect(await settled(s, obj.id)).toMatchObject({ status: "failed", error: "the JSON is not an array of objects" })
  })
})

describe("GET /data/sources/{id}/rows", () => {
  it("pages in file order with total; limit 1–500 (default 50), offset ≥ 0, else 422", async () => {
    const s = await a.signup()
    const csv = `n,phone\n${Array.from({ length: 620 }, (_, i) => `${i + 1},+1415${2_000_000 + i}`).join("\n")}\n`
    const { source } = await body<{ source: Source }>(await upload(s, csv), 201)
    expect(source.row_count).toBe(620)
    type Page = { rows: Array<{ row_no: number; data: { n: string } }>; total: number; limit: number; offset: number }
    const first = await body<Page>(await rows(s, source.id))
    expect(first.rows).toHaveLength(50)
    expect(first).toMatchObject({ total: 620, limit: 50, offset: 0 })
    const one = await body<Page>(await rows(s, source.id, "?limit=1&offset=619"))
    expect(one.rows).toEqual([{ row_no: 620, data: { n: "620", phone: "+14152000619" } }])
    const max = await body<Page>(await rows(s, source.id, "?limit=500&offset=100"))
    expect(max.rows).toHaveLength(500)
    expect(max.rows.map((r) => r.row_no)).toEqual(Array.from({ length: 500 }, (_, i) => 101 + i))
    const past = await body<Page>(await rows(s, source.id, "?offset=5000"))
    expect(past).toMatchObject({ rows: [], total: 620, offset: 5000 })
    for (const qs of ["?limit=0", "?limit=501", "?offset=-1", "?limit=abc", "?limit=1.5"]) {
      expect(await errorOf(await rows(s, source.id, qs)), qs).toMatchObject({ status: 422, code: "VALIDATION_FAILED" })
    }
  })
})

describe("POST /data/sources/{id}/fetch", () => {
  it("is 409 for a csv source (nothing to fetch) and 202 pending for a url source", async () => {
    served.set("/again.csv", { type: "text/csv", body: CSV })
    const s = await a.signup()
    const csv = (await body<{ source: Source }>(await upload(s, CSV), 201)).source
    expect(await errorOf(await a.call("POST", `/data/sources/${csv.id}/fetch`, { token: s.token }))).toMatchObject({
      status: 409,
      code: "CONFLICT",
    })
    const url = (await body<{ source: Source }>(await createUrl(s, `${filesUrl}/again.csv`), 201)).source
    await settled(s, url.id)
    const res = await body<{ source: Source }>(
      await a.call("POST", `/data/sources/${url.id}/fetch`, { token: s.token }),
      202,
    )
    expect(res.source.status).toBe("pending")
    expect(await settled(s, url.id)).toMatchObject({ status: "ready", row_count: 3 })
  })
})

describe("DELETE /data/sources/{id}", () => {
  it("removes the source with its rows and chat; a second delete is 404", async () => {
    const s = await a.signup()
    const { source } = await body<{ source: Source }>(await upload(s, CSV), 201)
    await appendMessage(srv.sql, { tenantId: s.tenantId, sourceId: source.id, role: "user", text: "hi", data: {} })
    expect(await body(await a.call("DELETE", `/data/sources/${source.id}`, { token: s.token }))).toEqual({
      deleted: true,
      id: source.id,
    })
    expect(await srv.sql`select 1 from data_source_rows where source_id = ${source.id}`).toHaveLength(0)
    expect(await srv.sql`select 1 from data_source_messages where source_id = ${source.id}`).toHaveLength(0)
    expect((await get(s, source.id)).status).toBe(404)
    expect((await a.call("DELETE", `/data/sources/${source.id}`, { token: s.token })).status).toBe(404)
  })
})

describe("isolation and scopes", () => {
  it("another workspace's source is 404 everywhere and missing from its list", async () => {
    const owner = await a.signup()
    const other = await a.signup()
    const { source } = await body<{ source: Source }>(await upload(owner, CSV), 201)
    expect((await get(other, source.id)).status).toBe(404)
    expect((await rows(other, source.id)).status).toBe(404)
    expect((await a.call("POST", `/data/sources/${source.id}/fetch`, { token: other.token })).status).toBe(404)
    expect((await a.call("DELETE", `/data/sources/${source.id}`, { token: other.token })).status).toBe(404)
    expect(
      (await body<{ sources: Source[] }>(await a.call("GET", "/data/sources", { token: other.token }))).sources,
    ).toEqual([])
    expect((await get(owner, source.id)).status).toBe(200)
    expect((await get(owner, 999_999_999)).status).toBe(404)
    expect((await a.call("GET", "/data/sources")).status).toBe(401)
  })

  it("read keys read; write keys create and fetch; only admin deletes", async () => {
    served.set("/scoped.csv", { type: "text/csv", body: CSV })
    const s = await a.signup()
    const { source } = await body<{ source: Source }>(await upload(s, CSV), 201)
    const read = (await a.createKey(s, { name: "r", scope: "read" })).secret
    const write = (await a.createKey(s, { name: "w", scope: "write" })).secret
    const admin = (await a.createKey(s, { name: "a", scope: "admin" })).secret
    expect((await a.call("GET", "/data/sources", { token: read })).status).toBe(200)
    expect((await get(read, source.id)).status).toBe(200)
    expect((await rows(read, source.id)).status).toBe(200)
    expect((await upload(read, CSV)).status).toBe(403)
    expect((await createUrl(read, `${filesUrl}/scoped.csv`)).status).toBe(403)
    expect((await a.call("POST", `/data/sources/${source.id}/fetch`, { token: read })).status).toBe(403)
    expect((await a.call("DELETE", `/data/sources/${source.id}`, { token: read })).status).toBe(403)
    expect((await upload(write, CSV)).status).toBe(201)
    const url = (await body<{ source: Source }>(await createUrl(write, `${filesUrl}/scoped.csv`), 201)).source
    await settled(s, url.id)
    expect((await a.call("POST", `/data/sources/${url.id}/fetch`, { token: write })).status).toBe(202)
    expect((await a.call("DELETE", `/data/sources/${source.id}`, { token: write })).status).toBe(403)
    expect((await a.call("DELETE", `/data/sources/${source.id}`, { token: admin })).status).toBe(200)
  })
})

describe("URLs refused without ALLOW_PRIVATE_PROVIDER_URLS", () => {
  let strict: TestServer
  let b: ReturnType<typeof api>
  beforeAll(async () => {
    strict = await startTestServer({ env: { ALLOW_PRIVATE_PROVIDER_URLS: "false" } })
    b = api(strict)
  })
  afterAll(async () => strict?.stop())
  afterEach(() => setHostResolver(undefined))

  it("422s http, loopback, private and link-local hosts, and names that resolve to them", async () => {
    setHostResolver(async (host) => {
      if (host === "inside.example") return [{ address: "10.1.2.3", family: 4 }]
      if (host === "public.example") return [{ address: "93.184.216.34", family: 4 }]
      throw new Error("ENOTFOUND")
    })
    const s = await b.signup()
    for (const url of [
      "http://public.example/list.csv",
      "https://127.0.0.1/list.csv",
      "https://[::1]/list.csv",
      "https://10.0.0.8/list.csv",
      "https://192.168.1.1/list.csv",
      "https://169.254.169.254/latest/meta-data",
      "https://inside.example/list.csv",
      "https://nowhere.example/list.csv",
      "https://user:pw@public.example/list.csv",
    ]) {
      const res = await createUrl(s, url, "feed", b)
      expect(await errorOf(res), url).toMatchObject({ status: 422, code: "VALIDATION_FAILED", field: "url" })
    }
    expect(await strict.sql`select 1 from data_sources where tenant_id = ${s.tenantId}`).toHaveLength(0)
  })

  it("a name public when saved and checked but private at connect fails the fetch at the guard", async () => {
    // The save-time check and the fetch's own check see a public address; the connect a private one.
    let lookups = 0
    setHostResolver(async (host) =>
      host === "rebind.example" ? [{ address: ++lookups <= 2 ? "93.184.216.34" : "127.0.0.1", family: 4 }] : [],
    )
    const s = await b.signup()
    const origin = `https://rebind.example:${(files.address() as AddressInfo).port}/list.csv`
    const res = await b.call("POST", "/data/sources", {
      token: s.token,
      body: { name: "rebind", kind: "url", url: origin },
    })
    const { source } = await body<{ source: Source }>(res, 201)
    const until = Date.now() + 15_000
    let now: Source = source
    while (now.status !== "failed" && now.status !== "ready" && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 50))
      now = (await body<{ source: Source }>(await b.call("GET", `/data/sources/${source.id}`, { token: s.token })))
        .source
    }
    expect(now.status).toBe("failed")
    expect(now.error).toMatch(/^could not fetch the URL: .*refused to connect to rebind\.example: .*127\.0\.0\.1/)
    expect(lookups).toBe(3)
  })
})
