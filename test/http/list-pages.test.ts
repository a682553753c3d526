// Cursor pages of the lists that used to read every row (GET /api/workflows, /api/workflows/{id}/runs,
// /numbers): limit 1–200 (default 50) and 422 outside, next_cursor beside the list and null on the
// last page, no row repeated or skipped across pages, a malformed cursor refused with 422.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
let a: ReturnType<typeof api>
let s: Session
let other: Session

beforeAll(async () => {
  srv = await sharedTestServer()
  a = api(srv)
  s = await a.signup({ country: "IN" })
  other = await a.signup({ country: "IN" })
})
afterAll(async () => srv?.stop())

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const get = async (path: string, token = s.token) => {
  const res = await a.call("GET", path, { token })
  return { status: res.status, body: (await res.json()) as Json }
}

/** Follows next_cursor from the first page to the last; every page but the last is full. */
async function walk(path: string, field: string, limit?: number): Promise<{ ids: number[]; pages: number[] }> {
  const ids: number[] = []
  const pages: number[] = []
  let cursor: string | null = null
  for (let i = 0; i < 100; i++) {
    const q = new URLSearchParams()
    if (limit !== undefined) q.set("limit", String(limit))
    if (cursor !== null) q.set("cursor", cursor)
    const sep = path.includes("?") ? "&" : "?"
    const res = await get(q.size === 0 ? path : `${path}${sep}${q}`)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    const rows = res.body[field] as Array<{ id: number }>
    expect(res.body).toHaveProperty("next_cursor")
    ids.push(...rows.map((r) => r.id))
    pages.push(rows.length)
    cursor = res.body.next_cursor as string | null
    if (cursor === null) return { ids, pages }
    expect(typeof cursor).toBe("string")
  }
  throw new Error("more than 100 pages")
}

/**
 * The bad limits and cursors every list refuses, each as 422 VALIDATION_FAILED on its field, the good ones
 * for contrast.
 */
async function expectRefusals(path: string) {
  const sep = path.includes("?") ? "&" : "?"
  for (const limit of ["500", "201", "0", "-1", "abc", "1.5", ""]) {
    const res = await get(`${path}${sep}limit=${encodeURIComponent(limit)}`)
    expect(res.status, `limit=${limit}`).toBe(422)
    expect(res.body).toMatchObject({ code: "VALIDATION_FAILED", field: "limit" })
  }
  for (const cursor of [
    "garbage!",
    "bm90LWEtY3Vyc29y",
    "aWQ6MA",
    "aWQ6LTE",
    "2024-01-01T00:00:00Z",
    "x".repeat(200),
    "",
  ]) {
    const res = await get(`${path}${sep}cursor=${encodeURIComponent(cursor)}`)
    expect(res.status, `cursor=${cursor}`).toBe(422)
    expect(res.body).toMatchObject({ code: "VALIDATION_FAILED", field: "cursor" })
  }
  expect((await get(`${path}${sep}limit=200`)).status).toBe(200)
  expect((await get(`${path}${sep}limit=1`)).status).toBe(200)
}

const insertWorkflows = async (tenantId: number, n: number, status = "draft") =>
  (
    await srv.sql<Array<{ id: number }>>`
      insert into workflows (tenant_id, name, persona, nl_prompt, status)
      select ${tenantId}, 'w' || i, 'amelia', 'p', ${status} from generate_series(1, ${n}) as i
      returning id`
  ).map((r) => r.id)

describe("GET /api/workflows", () => {
  let ids: number[]
  beforeAll(async () => {
    ids = await insertWorkflows(s.tenantId, 120)
    await insertWorkflows(other.tenantId, 3)
  })

  it("gives 120 workflows in pages of 50, 50 and 20, newest first, none repeated or skipped", async () => {
    const first = await get("/api/workflows")
    expect(first.body.tenant_id).toBe(s.tenantId)
    expect(first.body.workflows).toHaveLength(50)
    expect(typeof first.body.next_cursor).toBe("string")
    const { ids: seen, pages } = await walk("/api/workflows", "workflows")
    expect(pages).toEqual([50, 50, 20])
    expect(new Set(seen).size).toBe(120)
    expect(seen).toEqual([...ids].sort((x, y) => y - x))
  })

  it("pages by any limit, with the status filter applied on every page", async () => {
    const { ids: by7, pages } = await walk("/api/workflows", "workflows", 7)
    expect(pages.slice(0, -1).every((n) => n === 7)).toBe(true)
    expect(by7).toEqual([...ids].sort((x, y) => y - x))
    // An exact multiple: the last full page already says there is no more.
    const exact = await get("/api/workflows?limit=120")
    expect(exact.body.workflows).toHaveLength(120)
    expect(exact.body.next_cursor).toBeNull()

    const live = await insertWorkflows(s.tenantId, 5, "live")
    const { ids: liveSeen, pages: livePages } = await walk("/api/workflows?status=live", "workflows", 2)
    expect(livePages).toEqual([2, 2, 1])
    expect(liveSeen).toEqual([...live].sort((x, y) => y - x))
    await srv.sql`delete from workflows where id = any(${live})`
  })

  it("refuses limits outside 1–200 and cursors it did not issue with 422", async () => {
    await expectRefusals("/api/workflows")
  })

  it("keeps workspaces apart: another workspace's cursor shows only its own rows", async () => {
    const page = await get("/api/workflows?limit=1")
    const theirs = await get(`/api/workflows?cursor=${encodeURIComponent(page.body.next_cursor)}`, other.token)
    expect(theirs.status).toBe(200)
    expect(theirs.body.workflows.every((w: Json) => !ids.includes(w.id))).toBe(true)
  })
})

describe("GET /api/workflows/{id}/runs", () => {
  let workflowId: number
  let runs: number[]
  beforeAll(async () => {
    ;[workflowId] = (await insertWorkflows(s.tenantId, 1)) as [number]
    runs = (
      await srv.sql<Array<{ id: number }>>`
        insert into runs (tenant_id, workflow_id, status, ended_at)
        select ${s.tenantId}, ${workflowId}, 'completed', now() from generate_series(1, 5)
        returning id`
    ).map((r) => r.id)
    const [otherWorkflow] = await insertWorkflows(s.tenantId, 1)
    await srv.sql`insert into runs (tenant_id, workflow_id, status, ended_at)
      values (${s.tenantId}, ${otherWorkflow!}, 'completed', now())`
  })

  it("pages the workflow's runs with limit=1 and =2, newest first, none repeated or skipped", async () => {
    const all = await get(`/api/workflows/${workflowId}/runs`)
    expect(all.body.runs).toHaveLength(5)
    expect(all.body.next_cursor).toBeNull()
    for (const limit of [1, 2]) {
      const { ids, pages } = await walk(`/api/workflows/${workflowId}/runs`, "runs", limit)
      expect(pages).toEqual(limit === 1 ? [1, 1, 1, 1, 1] : [2, 2, 1])
      expect(ids).toEqual([...runs].sort((x, y) => y - x))
    }
  })

  it("refuses bad limits and cursors with 422, and another workspace's workflow is still 404", async () => {
    await expectRefusals(`/api/workflows/${workflowId}/runs`)
    expect((await get(`/api/workflows/${workflowId}/runs?limit=1`, other.token)).status).toBe(404)
  })
})

describe("GET /numbers", () => {
  let numbers: number[]
  beforeAll(async () => {
    numbers = (
      await srv.sql<Array<{ id: number }>>`
        insert into phone_numbers (tenant_id, phone_e164, country, source, provider, account, status, currency)
        select ${s.tenantId}, '+9198765' || lpad(i::text, 5, '0') || ${String(s.tenantId % 10)},
               'IN', 'provisioned', 'sim', 'platform',
               case when i % 2 = 0 then 'released' else 'active' end, 'INR'
        from generate_series(1, 5) as i
        returning id`
    ).map((r) => r.id)
    // A claim in flight is not listed, on any page.
    await srv.sql`
      insert into phone_numbers (tenant_id, phone_e164, country, source, provider, account, status, currency)
      values (${s.tenantId}, ${`+91987650000${s.tenantId % 10}`},
              'IN', 'provisioned', 'sim', 'platform', 'pending', 'INR')`
  })

  it("pages the workspace's numbers with limit=2, newest first, none repeated or skipped", async () => {
    const { ids, pages } = await walk("/numbers", "numbers", 2)
    expect(pages).toEqual([2, 2, 1])
    expect(ids).toEqual([...numbers].sort((x, y) => y - x))
    const { ids: active } = await walk("/numbers?status=active", "numbers", 1)
    expect(active).toHaveLength(3)
    const first = await get("/numbers")
    expect(first.body.numbers).toHaveLength(5)
    expect(first.body.next_cursor).toBeNull()
  })

  it("refuses bad limits and cursors with 422", async () => {
    await expectRefusals("/numbers")
  })
})
