// The do-not-call list through the real server: add (normalised, idempotent), list (pages,
// source filter), delete (+ encoded, literal or missing), check (DNC, registry, cool-down),
// import (CSV stream or JSON, with its counts), the 422s, scopes and tenant isolation.
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

const errorOf = async (res: Response) => ({
  status: res.status,
  ...((await res.json()) as { code: string; field?: string }),
})
const us = (i: number) => `+1415${2_000_000 + i}`
const india = (i: number) => `+9198${String(10_000_000 + i)}`

interface Entry {
  id: number
  phone_e164: string
  reason: string | null
  source: string
  added_at: string
}

async function body<T>(res: Response, status = 200): Promise<T> {
  const b = await res.json()
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${JSON.stringify(b)}`)
  return b as T
}

const add = (s: Session | string, phone_e164: unknown, reason?: unknown) =>
  a.call("POST", "/dnc/add", {
    token: typeof s === "string" ? s : s.token,
    body: { phone_e164, ...(reason !== undefined && { reason }) },
  })
const list = (s: Session, qs = "") => a.call("GET", `/dnc${qs}`, { token: s.token })
const check = (s: Session | string, raw: string) =>
  a.call("GET", `/dnc/check?phone_e164=${raw}`, { token: typeof s === "string" ? s : s.token })
const rowsOf = (tenantId: number) => srv.sql<Array<{ phone_e164: string; reason: string | null; source: string }>>`
  select phone_e164, reason, source from dnc_entries where tenant_id = ${tenantId} order by phone_e164`

function importCsv(s: Session | string, csv: string) {
  const form = new FormData()
  form.set("file", new Blob([csv], { type: "text/csv" }), "dnc.csv")
  return fetch(`${srv.url}/dnc/import`, {
    method: "POST",
    body: form,
    headers: { authorization: `Bearer ${typeof s === "string" ? s : s.token}` },
  })
}

describe("POST /dnc/add", () => {
  it("normalises the number in the tenant's country and answers the entry", async () => {
    const s = await a.signup({ country: "IN" })
    const { entry } = await body<{ entry: Entry }>(await add(s, "098765 43210", "asked on the call"))
    expect(entry).toMatchObject({ phone_e164: "+919876543210", reason: "asked on the call", source: "manual" })
    expect(entry.id).toBeGreaterThan(0)
    expect(Math.abs(new Date(entry.added_at).getTime() - Date.now())).toBeLessThan(60_000)
    const { entry: foreign } = await body<{ entry: Entry }>(await add(s, "+1 (415) 200-0001"))
    expect(foreign).toMatchObject({ phone_e164: us(1), reason: null })
  })

  it("is idempotent: adding again keeps one row and refreshes added_at and reason", async () => {
    const s = await a.signup({ country: "US" })
    const first = (await body<{ entry: Entry }>(await add(s, us(5), "first"))).entry
    await new Promise((r) => setTimeout(r, 20))
    const again = (await body<{ entry: Entry }>(await add(s, "415-200-0005", "second"))).entry
    expect(again.id).toBe(first.id)
    expect(again.reason).toBe("second")
    expect(new Date(again.added_at).getTime()).toBeGreaterThan(new Date(first.added_at).getTime())
    expect(await rowsOf(s.tenantId)).toEqual([{ phone_e164: us(5), reason: "second", source: "manual" }])
    const third = (await body<{ entry: Entry }>(await add(s, us(5)))).entry
    expect(third.reason).toBeNull()
  })

  it("answers bad input with 422 on the field", async () => {
    const s = await a.signup()
    expect(await errorOf(await add(s, us(1), "x".repeat(201)))).toMatchObject({
      status: 422,
      code: "VALIDATION_FAILED",
      field: "reason",
    })
    expect(await errorOf(await add(s, "12345"))).toMatchObject({
      status: 422,
      code: "VALIDATION_FAILED",
      field: "phone_e164",
    })
    expect(await errorOf(await add(s, "not a phone"))).toMatchObject({ status: 422, field: "phone_e164" })
    expect(await errorOf(await add(s, ""))).toMatchObject({ status: 422, field: "phone_e164" })
    expect(await errorOf(await add(s, 14152000001))).toMatchObject({ status: 422, field: "phone_e164" })
    expect(await errorOf(await a.call("POST", "/dnc/add", { token: s.token, body: {} }))).toMatchObject({
      status: 422,
      field: "phone_e164",
    })
    expect(await rowsOf(s.tenantId)).toEqual([])
    // 200 characters exactly is fine.
    expect((await add(s, us(1), "x".repeat(200))).status).toBe(200)
  })
})

describe("GET /dnc", () => {
  let s: Session
  beforeAll(async () => {
    s = await a.signup({ country: "US" })
    for (let i = 0; i < 7; i++) await body(await add(s, us(i), `r${i}`))
    await srv.sql`insert into dnc_entries (tenant_id, phone_e164, source, added_at)
      values (${s.tenantId}, ${us(100)}, 'call', now() - interval '1 day')`
  })

  it("lists newest first with the total, a page at a time", async () => {
    const all = await body<{ entries: Entry[]; total: number; limit: number; offset: number }>(await list(s))
    expect(all).toMatchObject({ total: 8, limit: 50, offset: 0 })
    expect(all.entries.map((e) => e.phone_e164)).toEqual([us(6), us(5), us(4), us(3), us(2), us(1), us(0), us(100)])
    expect(Object.keys(all.entries[0]!).sort()).toEqual(["added_at", "id", "phone_e164", "reason", "source"])
    const page = await body<{ entries: Entry[]; total: number }>(await list(s, "?limit=3&offset=2"))
    expect(page).toMatchObject({ total: 8, limit: 3, offset: 2 })
    expect(page.entries.map((e) => e.phone_e164)).toEqual([us(4), us(3), us(2)])
    expect((await body<{ entries: Entry[] }>(await list(s, "?offset=8"))).entries).toEqual([])
  })

  it("filters by source", async () => {
    const calls = await body<{ entries: Entry[]; total: number }>(await list(s, "?source=call"))
    expect(calls.total).toBe(1)
    expect(calls.entries).toMatchObject([{ phone_e164: us(100), source: "call", reason: null }])
    expect((await body<{ total: number }>(await list(s, "?source=erasure"))).total).toBe(0)
  })

  it("refuses limits and offsets out of range", async () => {
    for (const [qs, field] of [
      ["?limit=0", "limit"],
      ["?limit=501", "limit"],
      ["?limit=abc", "limit"],
      ["?offset=-1", "offset"],
      ["?source=robot", "source"],
    ] as const)
      expect(await errorOf(await list(s, qs))).toMatchObject({ status: 422, field })
    expect((await list(s, "?limit=500")).status).toBe(200)
  })

  it("shows only the caller's tenant", async () => {
    const other = await a.signup()
    expect(await body(await list(other))).toMatchObject({ entries: [], total: 0 })
  })
})

describe("DELETE /dnc/{phone_e164}", () => {
  it("takes %2B-encoded, literal + and +-less numbers; 404 when not listed", async () => {
    const s = await a.signup({ country: "US" })
    for (const i of [1, 2, 3, 4]) await body(await add(s, us(i)))
    await body(await add(s, india(1)))
    expect(await body(await a.call("DELETE", `/dnc/${encodeURIComponent(us(1))}`, { token: s.token }))).toEqual({
      deleted: true,
      phone_e164: us(1),
    })
    expect(await body(await a.call("DELETE", `/dnc/${us(2)}`, { token: s.token }))).toEqual({
      deleted: true,
      phone_e164: us(2),
    })
    expect(await body(await a.call("DELETE", `/dnc/${us(3).slice(1)}`, { token: s.token }))).toEqual({
      deleted: true,
      phone_e164: us(3),
    })
    expect(
      await body(await a.call("DELETE", `/v1/dnc/${encodeURIComponent("(415) 200-0004")}`, { token: s.token })),
    ).toEqual({ deleted: true, phone_e164: us(4) })
    // International digits whose + was lost, for a US tenant.
    expect(await body(await a.call("DELETE", `/dnc/${india(1).slice(1)}`, { token: s.token }))).toEqual({
      deleted: true,
      phone_e164: india(1),
    })
    expect(
      await errorOf(await a.call("DELETE", `/dnc/${encodeURIComponent(us(1))}`, { token: s.token })),
    ).toMatchObject({ status: 404, code: "NOT_FOUND" })
    expect(await errorOf(await a.call("DELETE", "/dnc/garbage", { token: s.token }))).toMatchObject({
      status: 422,
      field: "phone_e164",
    })
    expect(await rowsOf(s.tenantId)).toEqual([])
  })

  it("cannot touch another tenant's entry", async () => {
    const s = await a.signup({ country: "US" })
    const other = await a.signup({ country: "US" })
    await body(await add(other, us(9)))
    expect(
      await errorOf(await a.call("DELETE", `/dnc/${encodeURIComponent(us(9))}`, { token: s.token })),
    ).toMatchObject({ status: 404, code: "NOT_FOUND" })
    expect((await rowsOf(other.tenantId)).length).toBe(1)
  })
})

describe("GET /dnc/check", () => {
  let s: Session
  beforeAll(async () => {
    s = await a.signup({ country: "IN" })
    await body(await add(s, india(1)))
    await srv.sql`insert into ncpr_registry (phone_e164, preference) values (${india(2)}, '1,2') on conflict do nothing`
    await srv.sql`insert into recent_contacts (tenant_id, phone_e164, last_contacted_at) values
      (${s.tenantId}, ${india(3)}, now() - interval '2 days'), (${s.tenantId}, ${india(4)}, now() - interval '8 days')`
  })
  const flags = async (raw: string, who: Session = s) =>
    body<{ phone_e164: string; on_dnc: boolean; on_ncpr: boolean; in_cooldown: boolean; would_be_filtered: boolean }>(
      await check(who, raw),
    )

  it("flags each reason a number would be filtered", async () => {
    expect(await flags(encodeURIComponent(india(1)))).toEqual({
      phone_e164: india(1),
      on_dnc: true,
      on_ncpr: false,
      in_cooldown: false,
      erased: false,
      would_be_filtered: true,
    })
    expect(await flags(encodeURIComponent(india(2)))).toEqual({
      phone_e164: india(2),
      on_dnc: false,
      on_ncpr: true,
      in_cooldown: false,
      erased: false,
      would_be_filtered: true,
    })
    expect(await flags(encodeURIComponent(india(3)))).toEqual({
      phone_e164: india(3),
      on_dnc: false,
      on_ncpr: false,
      in_cooldown: true,
      erased: false,
      would_be_filtered: true,
    })
    expect(await flags(encodeURIComponent(india(4)))).toEqual({
      phone_e164: india(4),
      on_dnc: false,
      on_ncpr: false,
      in_cooldown: false,
      erased: false,
      would_be_filtered: false,
    })
  })

  it("reads an unencoded + (a space once decoded), no + at all, and national numbers", async () => {
    expect((await flags(india(1))).phone_e164).toBe(india(1)) // "+" in a query string is a space
    expect((await flags(india(1).slice(1))).on_dnc).toBe(true)
    expect((await flags(encodeURIComponent("098100 00001"))).on_dnc).toBe(true)
    expect(await errorOf(await check(s, "12"))).toMatchObject({ status: 422, field: "phone_e164" })
    expect(await errorOf(await a.call("GET", "/dnc/check", { token: s.token }))).toMatchObject({
      status: 422,
      field: "phone_e164",
    })
  })

  it("never checks other countries against the registry, and sees only the caller's list and contacts", async () => {
    expect(await flags(encodeURIComponent(us(1)))).toMatchObject({ on_ncpr: false, would_be_filtered: false })
    const other = await a.signup({ country: "IN" })
    expect(await flags(encodeURIComponent(india(1)), other)).toMatchObject({ on_dnc: false, would_be_filtered: false })
    expect(await flags(encodeURIComponent(india(3)), other)).toMatchObject({ in_cooldown: false })
    // The registry is national: every tenant sees it.
    expect(await flags(encodeURIComponent(india(2)), other)).toMatchObject({ on_ncpr: true })
  })
})

describe("POST /dnc/import", () => {
  it("imports JSON rows with their counts; duplicates in the file count as existing", async () => {
    const s = await a.signup({ country: "US" })
    await body(await add(s, us(1), "kept"))
    const res = await a.call("POST", "/dnc/import", {
      token: s.token,
      body: {
        rows: [
          { phone_e164: us(1), reason: "ignored" },
          { phone_e164: "415 200 0002", reason: "new" },
          { phone_e164: "(415) 200-0002" },
          { phone_e164: "nope" },
          { phone_e164: us(3) },
        ],
      },
    })
    expect(await body(res)).toEqual({ added: 2, skipped_existing: 2, skipped_invalid: 1 })
    expect(await rowsOf(s.tenantId)).toEqual([
      { phone_e164: us(1), reason: "kept", source: "manual" },
      { phone_e164: us(2), reason: "new", source: "import" },
      { phone_e164: us(3), reason: null, source: "import" },
    ])
  })

  it("streams a CSV, with or without a header", async () => {
    const s = await a.signup({ country: "IN" })
    const withHeader =
      '\uFEFFreason,Phone_E164\n"said ""stop"", twice",+91 98100 00001\n' +
      '\n,9810000002\nx,12\n"multi\nline",09810000001\n'
    expect(await body(await importCsv(s, withHeader))).toEqual({ added: 2, skipped_existing: 1, skipped_invalid: 1 })
    expect(await body(await importCsv(s, `${india(3)},from a list\n${india(1)}\n`))).toEqual({
      added: 1,
      skipped_existing: 1,
      skipped_invalid: 0,
    })
    expect(await rowsOf(s.tenantId)).toEqual([
      { phone_e164: india(1), reason: 'said "stop", twice', source: "import" },
      { phone_e164: india(2), reason: null, source: "import" },
      { phone_e164: india(3), reason: "from a list", source: "import" },
    ])
  })

  it("imports in batches: 2,500 numbers in one file", async () => {
    const s = await a.signup({ country: "US" })
    const csv = `phone\n${Array.from({ length: 2500 }, (_, i) => us(i)).join("\n")}\n${us(0)}\n`
    expect(await body(await importCsv(s, csv))).toEqual({ added: 2500, skipped_existing: 1, skipped_invalid: 0 })
    expect(await body(await list(s, "?limit=1"))).toMatchObject({ total: 2500 })
  })

  it("counts only the caller's own list as existing; each tenant's add is its own entry", async () => {
    const s = await a.signup({ country: "US" })
    const other = await a.signup({ country: "US" })
    await body(await add(other, us(1), "theirs"))
    expect(await body(await importCsv(s, `phone\n${us(1)}\n${us(2)}\n`))).toEqual({
      added: 2,
      skipped_existing: 0,
      skipped_invalid: 0,
    })
    const mine = (await body<{ entry: Entry }>(await add(s, us(1), "mine"))).entry
    expect(await rowsOf(other.tenantId)).toEqual([{ phone_e164: us(1), reason: "theirs", source: "manual" }])
    expect(mine).toMatchObject({ phone_e164: us(1), reason: "mine", source: "import" })
  })

  it("refuses bad bodies and files with 422", async () => {
    const s = await a.signup()
    expect(await errorOf(await importCsv(s, "name,email\nAnn,a@b.c\n"))).toMatchObject({ status: 422, field: "file" })
    expect(
      await errorOf(await a.call("POST", "/dnc/import", { token: s.token, body: { rows: [{ reason: "no phone" }] } })),
    ).toMatchObject({ status: 422, field: "rows.0.phone_e164" })
    expect(
      await errorOf(
        await a.call("POST", "/dnc/import", {
          token: s.token,
          body: { rows: [{ phone_e164: us(1), reason: "x".repeat(201) }] },
        }),
      ),
    ).toMatchObject({
      status: 422,
      field: "rows.0.reason",
    })
    const tooMany = Array.from({ length: 10_001 }, (_, i) => ({ phone_e164: us(i) }))
    expect(
      await errorOf(await a.call("POST", "/dnc/import", { token: s.token, body: { rows: tooMany } })),
    ).toMatchObject({ status: 422, field: "rows" })
    expect(await rowsOf(s.tenantId)).toEqual([])
  })
})

describe("scopes", () => {
  it("a read key lists and checks but cannot add, import or delete; a write key can", async () => {
    const s = await a.signup({ country: "US" })
    await body(await add(s, us(1)))
    const read = await a.createKey(s, { name: "r", scope: "read" })
    expect((await a.call("GET", "/dnc", { token: read.secret })).status).toBe(200)
    expect((await check(read.secret, encodeURIComponent(us(1)))).status).toBe(200)
    expect(await errorOf(await add(read.secret, us(2)))).toMatchObject({ status: 403 })
    expect(await errorOf(await importCsv(read.secret, `phone\n${us(3)}\n`))).toMatchObject({ status: 403 })
    expect(
      await errorOf(await a.call("DELETE", `/dnc/${encodeURIComponent(us(1))}`, { token: read.secret })),
    ).toMatchObject({ status: 403 })
    const write = await a.createKey(s, { name: "w", scope: "write" })
    expect((await add(write.secret, us(2))).status).toBe(200)
    expect((await a.call("DELETE", `/dnc/${encodeURIComponent(us(1))}`, { token: write.secret })).status).toBe(200)
    expect((await a.call("GET", "/dnc")).status).toBe(401)
  })
})
