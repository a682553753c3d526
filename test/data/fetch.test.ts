// Fetching a url source through the runtime over the server's bus (NATS when NATS_URL is set, the
// in-process bus otherwise): rows replaced with what changed told in the chat, a failure that keeps
// the old rows, the size cap and refused redirects, and one fetch at a time per source.
import { randomBytes } from "node:crypto"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createSource, type SourceRow } from "../../src/data/sources.repo.js"
import { performFetch } from "../../src/data/sources.service.js"
import { credentialCryptoFor } from "../../src/onboarding/Credentials.js"
import { Bus } from "../../src/platform/Bus.js"
import { DATA_SOURCE_FETCH, type DataSourceFetch } from "../../src/platform/subjects.js"
import { DEMO_CUSTOMER_COUNT } from "../../src/providers/storefront/sim.storefront.js"
import { upsertConnection } from "../../src/storefront/storefront.repo.js"
import { TOKEN_AAD_PROVIDER } from "../../src/storefront/storefront.rows.js"
import { api, type Session } from "../support/clients.js"
import { realServices, startTestServer, type TestServer } from "../support/harness.js"

interface Source {
  id: number
  status: string
  row_count: number
  columns: string[]
  last_fetched_at: string | null
  error: string | null
}

type Handler = (res: import("node:http").ServerResponse) => void
let srv: TestServer
let a: ReturnType<typeof api>
let files: Server
let filesUrl: string
const handlers = new Map<string, Handler>()
const hits = new Map<string, number>()

beforeAll(async () => {
  files = createServer((req, res) => {
    const path = req.url ?? ""
    hits.set(path, (hits.get(path) ?? 0) + 1)
    const h = handlers.get(path)
    if (h === undefined) return void res.writeHead(404).end()
    h(res)
  })
  await new Promise<void>((r) => files.listen(0, "127.0.0.1", r))
  filesUrl = `http://127.0.0.1:${(files.address() as AddressInfo).port}`
  srv = await startTestServer({ env: { ALLOW_PRIVATE_PROVIDER_URLS: "true" } })
  a = api(srv)
})
afterAll(async () => {
  await srv?.stop()
  files?.closeAllConnections()
  await new Promise((r) => files?.close(r))
})

const csv =
  (text: string): Handler =>
  (res) =>
    void res.writeHead(200, { "content-type": "text/csv" }).end(text)

async function body<T>(res: Response, status = 200): Promise<T> {
  const b = await res.json()
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${JSON.stringify(b)}`)
  return b as T
}

async function waitFor(s: Session, id: number, pred: (x: Source) => boolean): Promise<Source> {
  const until = Date.now() + 20_000
  for (;;) {
    const { source } = await body<{ source: Source }>(await a.call("GET", `/data/sources/${id}`, { token: s.token }))
    if (pred(source)) return source
    if (Date.now() > until) throw new Error(`source ${id} stuck at ${JSON.stringify(source)}`)
    await new Promise((r) => setTimeout(r, 40))
  }
}
const settled = (s: Session, id: number) => waitFor(s, id, (x) => x.status === "ready" || x.status === "failed")
const refetch = (s: Session, id: number) => a.call("POST", `/data/sources/${id}/fetch`, { token: s.token })
const messages = (id: number) =>
  srv.sql<Array<{ role: string; text: string; data: Record<string, unknown> }>>`
    select role, text, data from data_source_messages where source_id = ${id} order by id`
const rowData = async (s: Session, id: number) =>
  (
    await body<{ rows: Array<{ data: Record<string, unknown> }> }>(
      await a.call("GET", `/data/sources/${id}/rows?limit=500`, { token: s.token }),
    )
  ).rows.map((r) => r.data)

async function urlSource(s: Session, path: string): Promise<number> {
  const res = await a.call("POST", "/data/sources", {
    token: s.token,
    body: { name: path, kind: "url", url: `${filesUrl}${path}` },
  })
  return (await body<{ source: { id: number } }>(res, 201)).source.id
}

describe(`fetch through the runtime over the ${realServices ? "NATS" : "in-process"} bus`, () => {
  it("replaces the rows atomically and tells the chat how many were added and removed", async () => {
    const s = await a.signup()
    handlers.set("/v.csv", csv("name,phone\nAsha,1\nRavi,2\nMeera,3\n"))
    const id = await urlSource(s, "/v.csv")
    const first = await settled(s, id)
    expect(first).toMatchObject({ status: "ready", row_count: 3, error: null })
    handlers.set("/v.csv", csv("name,phone,city\nAsha,1,Pune\nMeera,3\nRavi,2\nZoya,4\n"))
    const accepted = await body<{ source: Source }>(await refetch(s, id), 202)
    expect(["pending", "fetching", "ready"]).toContain(accepted.source.status)
    const second = await waitFor(s, id, (x) => x.status === "ready" && x.row_count === 4)
    expect(second.columns).toEqual(["name", "phone", "city"])
    expect(new Date(second.last_fetched_at!).getTime()).toBeGreaterThanOrEqual(
      new Date(first.last_fetched_at!).getTime(),
    )
    expect(await rowData(s, id)).toEqual([
      { name: "Asha", phone: "1", city: "Pune" },
      { name: "Meera", phone: "3" },
      { name: "Ravi", phone: "2" },
      { name: "Zoya", phone: "4" },
    ])
    // Asha changed (one removed, one added), Ravi and Meera moved (unchanged), Zoya is new.
    expect(await messages(id)).toEqual([
      {
        role: "system",
        text: "Fetched 3 rows (+3 −0).",
        data: { event: "fetched", row_count: 3, added: 3, removed: 0 },
      },
      {
        role: "system",
        text: "Fetched 4 rows (+2 −1).",
        data: { event: "fetched", row_count: 4, added: 2, removed: 1 },
      },
    ])
    const nos = await srv.sql<Array<{ row_no: number }>>`
      select row_no from data_source_rows where source_id = ${id} order by row_no`
    expect(nos.map((r) => r.row_no)).toEqual([1, 2, 3, 4])
  })

  it("a failed fetch sets failed with the reason and keeps the old rows; the next one recovers", async () => {
    const s = await a.signup()
    handlers.set("/f.csv", csv("name\nAsha\nRavi\n"))
    const id = await urlSource(s, "/f.csv")
    await settled(s, id)
    handlers.set("/f.csv", (res) => void res.writeHead(503).end("down"))
    await body(await refetch(s, id), 202)
    const failed = await waitFor(s, id, (x) => x.status === "failed")
    expect(failed).toMatchObject({ status: "failed", error: "the URL answered HTTP 503", row_count: 2 })
    expect(await rowData(s, id)).toEqual([{ name: "Asha" }, { name: "Ravi" }])
    expect((await messages(id)).at(-1)).toEqual({
      role: "system",
      text: "Fetch failed: the URL answered HTTP 503. The previous 2 rows are kept.",
      data: { event: "fetch_failed", error: "the URL answered HTTP 503", row_count: 2 },
    })
    handlers.set("/f.csv", csv("name\nAsha\n"))
    await body(await refetch(s, id), 202)
    expect(await waitFor(s, id, (x) => x.status === "ready")).toMatchObject({ error: null, row_count: 1 })
    expect((await messages(id)).at(-1)!.text).toBe("Fetched 1 rows (+0 −1).")
  })

  it("refuses an answer past 10 MB, a redirect and more than 200 columns", async () => {
    const s = await a.signup()
    handlers.set("/big.csv", csv(`name\n${"x".repeat(64)}\n`.repeat(170_000)))
    handlers.set("/moved.csv", (res) => void res.writeHead(302, { location: "http://169.254.169.254/" }).end())
    handlers.set("/wide.json", (res) =>
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify([Object.fromEntries(Array.from({ length: 201 }, (_, i) => [`c${i}`, i]))])),
    )
    const big = await urlSource(s, "/big.csv")
    const moved = await urlSource(s, "/moved.csv")
    const wide = await urlSource(s, "/wide.json")
    expect((await settled(s, big)).error).toMatch(/more than 10485760 bytes/)
    expect((await settled(s, moved)).error).toMatch(/redirect/)
    expect(await settled(s, wide)).toMatchObject({ status: "failed", error: "more than 200 columns", row_count: 0 })
  })

  it("runs one fetch at a time per source: a fetch asked for while one runs answers fetching", async () => {
    const s = await a.signup()
    let release: () => void = () => {}
    const gate = new Promise<void>((r) => {
      release = r
    })
    handlers.set("/slow.csv", (res) => void gate.then(() => res.writeHead(200).end("name\nAsha\n")))
    const id = await urlSource(s, "/slow.csv")
    await waitFor(s, id, (x) => x.status === "fetching")
    const again = await body<{ source: Source }>(await refetch(s, id), 202)
    expect(again.source.status).toBe("fetching")
    release()
    expect(await settled(s, id)).toMatchObject({ status: "ready", row_count: 1 })
    expect(hits.get("/slow.csv")).toBe(1)
    expect(await messages(id)).toHaveLength(1)
  })

  it("a fetch message naming another workspace does nothing", async () => {
    const owner = await a.signup()
    const other = await a.signup()
    handlers.set("/own.csv", csv("name\nAsha\n"))
    const id = await urlSource(owner, "/own.csv")
    await settled(owner, id)
    await srv.sql`update data_sources set status = 'pending' where id = ${id}`
    const bus = await srv.running.runtime.runPromise(Bus)
    bus.publish(DATA_SOURCE_FETCH, { source_id: id, tenant_id: other.tenantId } satisfies DataSourceFetch)
    await bus.flush()
    await new Promise((r) => setTimeout(r, 300))
    const [row] = await srv.sql<[{ status: string }]>`select status from data_sources where id = ${id}`
    expect(row.status).toBe("pending")
    expect(hits.get("/own.csv")).toBe(1)
  })
})

describe("performFetch", () => {
  it("claims the source: two concurrent fetches of one source load it once", async () => {
    const s = await a.signup()
    const [src] = await srv.sql<[SourceRow]>`
      insert into data_sources (tenant_id, name, kind, url, status)
      values (${s.tenantId}, 'direct', 'url', 'https://example.invalid/x.csv', 'pending') returning id`
    let loads = 0
    const deps = {
      sql: srv.sql,
      now: () => new Date(),
      loadRows: async () => {
        loads++
        await new Promise((r) => setTimeout(r, 100))
        return { rows: [{ name: "Asha" }], columns: ["name"] }
      },
    }
    const msg = { source_id: src.id, tenant_id: s.tenantId }
    const outcomes = await Promise.all([performFetch(deps, msg), performFetch(deps, msg)])
    expect(outcomes.map((o) => o.kind).sort()).toEqual(["ready", "skipped"])
    expect(loads).toBe(1)
  })
})

describe("a storefront source", () => {
  let shop: TestServer
  let c: ReturnType<typeof api>
  beforeAll(async () => {
    shop = await startTestServer({ env: { CREDENTIALS_MASTER_KEY: randomBytes(32).toString("base64") } })
    c = api(shop)
  })
  afterAll(async () => shop?.stop())

  const fetchOf = async (s: Session) => {
    const source = await createSource(shop.sql, {
      tenantId: s.tenantId,
      name: "Shop customers",
      kind: "storefront",
      url: null,
      status: "pending",
    })
    const bus = await shop.running.runtime.runPromise(Bus)
    bus.publish(DATA_SOURCE_FETCH, { source_id: source.id, tenant_id: s.tenantId } satisfies DataSourceFetch)
    const until = Date.now() + 20_000
    for (;;) {
      const res = await c.call("GET", `/data/sources/${source.id}`, { token: s.token })
      const { source: now } = await body<{ source: Source }>(res)
      if (now.status === "ready" || now.status === "failed") return now
      if (Date.now() > until) throw new Error(`storefront source stuck at ${now.status}`)
      await new Promise((r) => setTimeout(r, 40))
    }
  }

  it("fails with the reason while the shop is not connected", async () => {
    const s = await c.signup()
    const done = await fetchOf(s)
    expect(done.status).toBe("failed")
    expect(done.error).toMatch(/not connected/)
  })

  it("is fetched from the connected shop (the simulator's demo customers)", async () => {
    const s = await c.signup()
    const crypto = credentialCryptoFor(shop.config)!
    await upsertConnection(shop.sql, {
      tenantId: s.tenantId,
      shop: "demo.myshopify.com",
      accessTokenEnc: crypto.encrypt("simtok_test", { tenantId: s.tenantId, provider: TOKEN_AAD_PROVIDER }),
      scopes: "read_customers",
    })
    const done = await fetchOf(s)
    expect(done).toMatchObject({ status: "ready", row_count: DEMO_CUSTOMER_COUNT, error: null })
    expect(done.columns).toContain("name")
  })
})
