// Audience attach through the real server: JSON rows and streamed CSV (quoting, BOM, header or
// not, extra columns, blank lines, invalid numbers, duplicates), the filters in their order
// (DNC, national registry, cool-down), idempotent re-upload, failed uploads that change
// nothing, tenant isolation and scopes; and the parser on its own, batching a 20,000-row stream.
import { connect } from "node:net"
import { Readable } from "node:stream"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AudienceRow, parseAudienceCsv } from "../../src/audience/audience.parse.js"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { rawRequest } from "../support/raw-http.js"

// Small enough to pass mid-test, large enough for 10,000 JSON rows (the limit covers JSON here too).
const UPLOAD_LIMIT = 600_000

let srv: TestServer
let a: ReturnType<typeof api>
beforeAll(async () => {
  srv = await startTestServer({ env: { UPLOAD_LIMIT_BYTES: String(UPLOAD_LIMIT) } })
  a = api(srv)
})
afterAll(async () => srv?.stop())

interface Counts {
  accepted: number
  rejected_dnc: number
  rejected_ncpr: number
  rejected_cooldown: number
  rejected_invalid: number
  total_targets: number
  duplicates: number
  invalid_rows: Array<{ line: number; phone: string; reason: string }>
  upload_id: number
}

const errorOf = async (res: Response) => ({
  status: res.status,
  ...((await res.json()) as { code: string; field?: string }),
})

/** A distinct valid US number for each i (415-2xx-xxxx). */
const us = (i: number) => `+1415${2_000_000 + i}`
/** A distinct valid Indian mobile number for each i. */
const india = (i: number) => `+9198${String(10_000_000 + i)}`

async function newWorkflow(
  tenantId: number,
  opts: { status?: string; archived?: boolean; ncprCategory?: number | null } = {},
): Promise<number> {
  const [w] = await srv.sql<[{ id: number }]>`
    insert into workflows (tenant_id, name, persona, nl_prompt, status, archived_at)
    values (${tenantId}, 'Campaign', 'amelia', 'Call people about the sale',
      ${opts.status ?? "draft"}, ${opts.archived ? new Date() : null})
    returning id`
  if (opts.ncprCategory !== undefined) {
    const [rb] = await srv.sql<[{ id: number }]>`
      insert into rule_books (tenant_id, workflow_id, version, body, source)
      values (${tenantId}, ${w.id}, 1,
        ${srv.sql.json({ system_prompt: "x", ncpr_category: opts.ncprCategory })}, 'generated')
      returning id`
    await srv.sql`update workflows set rule_book_id = ${rb.id} where id = ${w.id}`
  }
  return w.id
}

const postJson = (s: Session | string, workflowId: number, rows: unknown[]) =>
  a.call("POST", `/api/workflows/${workflowId}/audience`, {
    token: typeof s === "string" ? s : s.token,
    body: { rows },
  })

function postCsv(s: Session | string, workflowId: number, csv: string | Buffer, filename = "audience.csv") {
  const form = new FormData()
  form.set("note", "a field before the file")
  form.set("file", new Blob([csv], { type: "text/csv" }), filename)
  return fetch(`${srv.url}/api/workflows/${workflowId}/audience`, {
    method: "POST",
    body: form,
    headers: { authorization: `Bearer ${typeof s === "string" ? s : s.token}` },
  })
}

async function ok(res: Response): Promise<Counts> {
  const body = await res.json()
  if (res.status !== 200) throw new Error(`expected 200, got ${res.status}: ${JSON.stringify(body)}`)
  return body as Counts
}

/** Every data row is accounted for exactly once. */
function addsUp(c: Counts, rows: number) {
  expect(c.accepted + c.rejected_dnc + c.rejected_ncpr + c.rejected_cooldown + c.rejected_invalid + c.duplicates).toBe(
    rows,
  )
}

const targets = (workflowId: number) =>
  srv.sql<Array<{ phone_e164: string; name: string | null; fields: Record<string, unknown> }>>`
    select phone_e164, name, fields from audience_targets where workflow_id = ${workflowId} order by phone_e164`

const stagingRows = async () => (await srv.sql<[{ n: number }]>`select count(*)::int as n from audience_staging`)[0].n

describe("JSON rows", () => {
  it("normalises, keeps other keys in fields, counts invalid rows and duplicates", async () => {
    const s = await a.signup({ country: "US" })
    const wf = await newWorkflow(s.tenantId)
    const rows = [
      { phone: "(415) 200-0001", name: "Ann", plan: "gold", visits: 3 },
      { phone: 4152000002, name: "Bo" },
      { phone: "+44 20 7946 0958", name: "Cy", city: "London" },
      { phone: "12345", name: "Short" },
      { phone: "not a number" },
      { phone: "+1 415 200 0001", name: "Ann again" },
      { phone: "919876543210", name: "Dropped plus" },
    ]
    const c = await ok(await postJson(s, wf, rows))
    expect(c).toMatchObject({
      accepted: 4,
      rejected_dnc: 0,
      rejected_ncpr: 0,
      rejected_cooldown: 0,
      rejected_invalid: 2,
      duplicates: 1,
      total_targets: 4,
    })
    expect(c.invalid_rows).toEqual([
      { line: 4, phone: "12345", reason: "too_short" },
      { line: 5, phone: "not a number", reason: "not_a_number" },
    ])
    expect(c.upload_id).toBeGreaterThan(0)
    addsUp(c, rows.length)
    expect(await targets(wf)).toEqual([
      { phone_e164: "+14152000001", name: "Ann", fields: { plan: "gold", visits: 3 } },
      { phone_e164: "+14152000002", name: "Bo", fields: {} },
      { phone_e164: "+442079460958", name: "Cy", fields: { city: "London" } },
      { phone_e164: "+919876543210", name: "Dropped plus", fields: {} },
    ])
    const [upload] = await srv.sql`select format, status, counts from audience_uploads where id = ${c.upload_id}`
    expect(upload).toMatchObject({
      format: "json",
      status: "applied",
      counts: { accepted: 4, rows: 7, rejected_invalid: 2 },
    })
  })

  it("reads national numbers in the tenant's country", async () => {
    const s = await a.signup({ country: "IN" })
    const wf = await newWorkflow(s.tenantId)
    const c = await ok(
      await postJson(s, wf, [{ phone: "98765 43210" }, { phone: "098765-43211" }, { phone: "+1 415 200 0003" }]),
    )
    expect(c.accepted).toBe(3)
    expect((await targets(wf)).map((t) => t.phone_e164)).toEqual(["+14152000003", "+919876543210", "+919876543211"])
  })

  it("refuses bodies outside the schema with 422", async () => {
    const s = await a.signup()
    const wf = await newWorkflow(s.tenantId)
    expect(await errorOf(await postJson(s, wf, [{ name: "no phone" }]))).toMatchObject({
      status: 422,
      code: "VALIDATION_FAILED",
      field: "rows.0.phone",
    })
    expect(await errorOf(await postJson(s, wf, [{ phone: us(1), name: "x".repeat(201) }]))).toMatchObject({
      status: 422,
      field: "rows.0.name",
    })
    const tooMany = Array.from({ length: 10_001 }, (_, i) => ({ phone: us(i) }))
    expect(await errorOf(await postJson(s, wf, tooMany))).toMatchObject({ status: 422, field: "rows" })
    expect(
      await errorOf(await a.call("POST", `/api/workflows/${wf}/audience`, { token: s.token, body: { rows: "x" } })),
    ).toMatchObject({ status: 422, field: "rows" })
    expect((await targets(wf)).length).toBe(0)
  })

  it("takes 10,000 rows in one request", async () => {
    const s = await a.signup()
    const wf = await newWorkflow(s.tenantId)
    const c = await ok(
      await postJson(
        s,
        wf,
        Array.from({ length: 10_000 }, (_, i) => ({ phone: us(i), name: `P${i}` })),
      ),
    )
    expect(c).toMatchObject({ accepted: 10_000, total_targets: 10_000, duplicates: 0 })
    expect(await stagingRows()).toBe(0)
  })
})

describe("CSV files", () => {
  it("reads quoted fields, a BOM, extra columns, blank lines, invalid numbers and duplicates", async () => {
    const s = await a.signup({ country: "US" })
    const wf = await newWorkflow(s.tenantId)
    const csv =
      "\uFEFFPhone Number,Full Name,City,Notes\r\n" +
      '"+1 415 200 0001","Doe, ""Jay""",San Francisco,"first line\nsecond line"\r\n' +
      "\r\n" +
      "   \r\n" +
      "415-200-0002,Bo,,\r\n" +
      "nope,Bad Row,Nowhere\r\n" +
      "4152000003,Cy,Oakland,x,surplus 1,surplus 2\r\n" +
      ",,,\r\n" +
      "(415) 200-0001,Jay duplicate,Elsewhere,\r\n" +
      "4152000004" // no final newline
    const c = await ok(await postCsv(s, wf, csv))
    expect(c).toMatchObject({ accepted: 4, rejected_invalid: 1, duplicates: 1, total_targets: 4 })
    expect(c.invalid_rows).toEqual([{ line: 7, phone: "nope", reason: "not_a_number" }])
    addsUp(c, 6)
    expect(await targets(wf)).toEqual([
      {
        phone_e164: "+14152000001",
        name: 'Doe, "Jay"',
        fields: { City: "San Francisco", Notes: "first line\nsecond line" },
      },
      { phone_e164: "+14152000002", name: "Bo", fields: {} },
      {
        phone_e164: "+14152000003",
        name: "Cy",
        fields: { City: "Oakland", Notes: "x", col_5: "surplus 1", col_6: "surplus 2" },
      },
      { phone_e164: "+14152000004", name: null, fields: {} },
    ])
    expect(await stagingRows()).toBe(0)
  })

  it("without a header: column 1 is the phone, column 2 the name, the rest col_3, col_4, …", async () => {
    const s = await a.signup({ country: "US" })
    const wf = await newWorkflow(s.tenantId)
    const c = await ok(await postCsv(s, wf, `${us(10)},Ann,gold,3\n${us(11)}\n${us(12)},,silver\n`))
    expect(c).toMatchObject({ accepted: 3, rejected_invalid: 0 })
    expect(await targets(wf)).toEqual([
      { phone_e164: us(10), name: "Ann", fields: { col_3: "gold", col_4: "3" } },
      { phone_e164: us(11), name: null, fields: {} },
      { phone_e164: us(12), name: null, fields: { col_3: "silver" } },
    ])
  })

  it("finds the phone column wherever the header puts it, by any of its usual names", async () => {
    const s = await a.signup({ country: "US" })
    const wf = await newWorkflow(s.tenantId)
    const c = await ok(await postCsv(s, wf, `id,First Name,MSISDN\n7,Ann,${us(20)}\n8,Bo,${us(21)}\n`))
    expect(c.accepted).toBe(2)
    expect(await targets(wf)).toEqual([
      { phone_e164: us(20), name: "Ann", fields: { id: "7" } },
      { phone_e164: us(21), name: "Bo", fields: { id: "8" } },
    ])
  })

  it(
    "refuses a file with no phone column, an empty file, " + "unreadable CSV and a form with no file (422, field file)",
    async () => {
      const s = await a.signup()
      const wf = await newWorkflow(s.tenantId)
      for (const csv of ["name,email\nAnn,ann@example.com\n", "", "\n\n", `phone,name\n"${us(1)},unclosed\n`]) {
        expect(await errorOf(await postCsv(s, wf, csv))).toMatchObject({
          status: 422,
          code: "VALIDATION_FAILED",
          field: "file",
        })
      }
      const form = new FormData()
      form.set("note", "no file here")
      const res = await fetch(`${srv.url}/api/workflows/${wf}/audience`, {
        method: "POST",
        body: form,
        headers: { authorization: `Bearer ${s.token}` },
      })
      expect(await errorOf(res)).toMatchObject({ status: 422, field: "file" })
      expect((await targets(wf)).length).toBe(0)
      expect(await stagingRows()).toBe(0)
      const uploads = await srv.sql`select status from audience_uploads where workflow_id = ${wf}`
      expect(uploads.every((u) => u.status === "failed")).toBe(true)
    },
  )

  it("drops NUL characters (which Postgres refuses) and never answers a binary file with a 500", async () => {
    const s = await a.signup({ country: "US" })
    const wf = await newWorkflow(s.tenantId)
    expect(await ok(await postCsv(s, wf, `phone,name,note\n${us(1)},A\u0000nn,x\u0000y\n`))).toMatchObject({
      accepted: 1,
    })
    expect(
      await ok(await postJson(s, wf, [{ phone: us(2), name: "B\u0000o", tags: ["a\u0000b"], "k\u0000": 1 }])),
    ).toMatchObject({ accepted: 1 })
    expect(await targets(wf)).toEqual([
      { phone_e164: us(1), name: "Ann", fields: { note: "xy" } },
      { phone_e164: us(2), name: "Bo", fields: { tags: ["ab"], k: 1 } },
    ])
    const zip = Buffer.concat([
      Buffer.from("PK\x03\x04\x14\x00\x06\x00"),
      Buffer.from(Array.from({ length: 4000 }, (_, i) => (i * 37) % 256)),
    ])
    expect([200, 422]).toContain((await postCsv(s, wf, zip, "audience.xlsx")).status)
  })

  it("accepts a header-only file as an attach of nothing", async () => {
    const s = await a.signup()
    const wf = await newWorkflow(s.tenantId)
    expect(await ok(await postCsv(s, wf, "phone,name\n"))).toMatchObject({
      accepted: 0,
      total_targets: 0,
      rejected_invalid: 0,
    })
  })

  it("keeps only the first 100 invalid rows in the answer, and counts them all", async () => {
    const s = await a.signup()
    const wf = await newWorkflow(s.tenantId)
    const lines = ["phone"]
    for (let i = 0; i < 150; i++) lines.push(`bad-${i}`, us(100 + i))
    const c = await ok(await postCsv(s, wf, lines.join("\n")))
    expect(c).toMatchObject({ accepted: 150, rejected_invalid: 150 })
    expect(c.invalid_rows.length).toBe(100)
    expect(c.invalid_rows[99]).toEqual({ line: 200, phone: "bad-99", reason: "not_a_number" })
  })
})

describe("filters", () => {
  it("drops numbers in the 7-day cool-down, and only the tenant's own contacts count", async () => {
    const s = await a.signup({ country: "US" })
    const other = await a.signup({ country: "US" })
    const wf = await newWorkflow(s.tenantId)
    await srv.sql`insert into recent_contacts (tenant_id, phone_e164, last_contacted_at) values
      (${s.tenantId}, ${us(1)}, now() - interval '2 days'),
      (${s.tenantId}, ${us(2)}, now() - interval '8 days'),
      (${other.tenantId}, ${us(3)}, now() - interval '1 day')`
    const c = await ok(await postJson(s, wf, [{ phone: us(1) }, { phone: us(2) }, { phone: us(3) }]))
    expect(c).toMatchObject({ accepted: 2, rejected_cooldown: 1 })
    expect((await targets(wf)).map((t) => t.phone_e164)).toEqual([us(2), us(3)])
  })

  it("drops numbers on the tenant's DNC list (not another tenant's), before the other filters", async () => {
    const s = await a.signup({ country: "IN" })
    const other = await a.signup({ country: "IN" })
    const wf = await newWorkflow(s.tenantId, { ncprCategory: null })
    await srv.sql`insert into dnc_entries (tenant_id, phone_e164, source) values
      (${s.tenantId}, ${india(1)}, 'manual'), (${s.tenantId}, ${india(2)}, 'call'),
      (${other.tenantId}, ${india(3)}, 'manual')`
    // india(2) is also on the registry and in the cool-down: DNC comes first.
    await srv.sql`insert into ncpr_registry (phone_e164, preference) values (${india(2)}, '0') on conflict do nothing`
    await srv.sql`insert into recent_contacts (tenant_id, phone_e164, last_contacted_at)
      values (${s.tenantId}, ${india(2)}, now())`
    const c = await ok(await postJson(s, wf, [{ phone: india(1) }, { phone: india(2) }, { phone: india(3) }]))
    expect(c).toMatchObject({ accepted: 1, rejected_dnc: 2, rejected_ncpr: 0, rejected_cooldown: 0 })
    addsUp(c, 3)
  })

  it(
    "drops Indian numbers on the national registry by the workflow's category; " + "other countries are never checked",
    async () => {
      const s = await a.signup({ country: "US" })
      await srv.sql`insert into ncpr_registry (phone_e164, preference) values
      (${india(101)}, '0'), (${india(102)}, '1,2,5'), (${india(103)}, '3')
      on conflict (phone_e164) do update set preference = excluded.preference`
      const rows = [
        { phone: india(101) },
        { phone: india(102) },
        { phone: india(103) },
        { phone: india(104) },
        { phone: us(1) },
      ]

      // Category 2: the full block and the number accepting only 3 are dropped; 1,2,5 accepts 2.
      const cat2 = await newWorkflow(s.tenantId, { ncprCategory: 2 })
      const c2 = await ok(await postJson(s, cat2, rows))
      expect(c2).toMatchObject({ accepted: 3, rejected_ncpr: 2 })
      expect((await targets(cat2)).map((t) => t.phone_e164)).toEqual([us(1), india(102), india(104)])

      // Category 3: only the number accepting 3 gets through.
      const cat3 = await newWorkflow(s.tenantId, { ncprCategory: 3 })
      expect((await ok(await postJson(s, cat3, rows))).rejected_ncpr).toBe(2)
      expect((await targets(cat3)).map((t) => t.phone_e164)).toEqual([us(1), india(103), india(104)])

      // No category (or no rule book): any registration blocks.
      for (const wf of [await newWorkflow(s.tenantId, { ncprCategory: null }), await newWorkflow(s.tenantId)]) {
        const c = await ok(await postJson(s, wf, rows))
        expect(c).toMatchObject({ accepted: 2, rejected_ncpr: 3 })
        addsUp(c, rows.length)
      }
    },
  )
})

describe("re-uploads", () => {
  it("are idempotent: the same file again refreshes the rows and leaves total_targets unchanged", async () => {
    const s = await a.signup({ country: "US" })
    const wf = await newWorkflow(s.tenantId)
    const csv = `phone,name,tier\n${us(1)},Ann,gold\n${us(2)},Bo,silver\n${us(3)},Cy,\n`
    const first = await ok(await postCsv(s, wf, csv))
    const again = await ok(await postCsv(s, wf, csv))
    expect(first).toMatchObject({ accepted: 3, total_targets: 3 })
    expect(again).toMatchObject({ accepted: 3, total_targets: 3 })
    expect(again.upload_id).not.toBe(first.upload_id)

    // A later upload's name and fields win; what it does not give is kept.
    const third = await ok(
      await postJson(s, wf, [
        { phone: us(1), name: "Ann B", city: "SF" },
        { phone: us(2) },
        { phone: us(4), name: "Di" },
      ]),
    )
    expect(third).toMatchObject({ accepted: 3, total_targets: 4 })
    expect(await targets(wf)).toEqual([
      { phone_e164: us(1), name: "Ann B", fields: { tier: "gold", city: "SF" } },
      { phone_e164: us(2), name: "Bo", fields: { tier: "silver" } },
      { phone_e164: us(3), name: "Cy", fields: {} },
      { phone_e164: us(4), name: "Di", fields: {} },
    ])
  })
})

describe("failed uploads change nothing", () => {
  let s: Session
  let wf: number
  const before = async () => JSON.stringify(await targets(wf))
  beforeAll(async () => {
    s = await a.signup({ country: "US" })
    wf = await newWorkflow(s.tenantId)
    await ok(await postJson(s, wf, [{ phone: us(1), name: "Kept" }]))
  })

  async function settled(): Promise<void> {
    // The handler cleans up after the answer may already be out (client gone): wait for it.
    for (let i = 0; i < 100; i++) {
      const [u] = await srv.sql<
        [{ n: number }]
      >`select count(*)::int as n from audience_uploads where workflow_id = ${wf} and status = 'receiving'`
      if (u.n === 0 && (await stagingRows()) === 0) return
      await new Promise((r) => setTimeout(r, 50))
    }
    throw new Error("upload never settled")
  }

  it("past the upload limit, mid-stream, after batches were staged: 413", async () => {
    const snapshot = await before()
    const head =
      `POST /api/workflows/${wf}/audience HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer ${s.token}\r\n` +
      "Content-Type: multipart/form-data; boundary=b\r\nTransfer-Encoding: chunked\r\n\r\n"
    const piece = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`
    const pieces = [
      head,
      piece('--b\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\nphone,name\n'),
    ]
    let n = 1000
    for (let p = 0; p < 16; p++) {
      const rows: string[] = []
      for (let i = 0; i < 2000; i++) rows.push(`${us(n++)},Person ${n}`)
      pieces.push(piece(`${rows.join("\n")}\n`)) // ~50 kB each: the twelfth passes 600 kB
    }
    pieces.push(piece("\r\n--b--\r\n"), "0\r\n\r\n")
    const res = await rawRequest(srv.port, pieces, { timeoutMs: 10_000 })
    expect(res.status).toBe(413)
    await settled()
    expect(await before()).toBe(snapshot)
    const [u] =
      await srv.sql`select status, finished_at from audience_uploads where workflow_id = ${wf} order by id desc limit 1`
    expect(u).toMatchObject({ status: "failed" })
  })

  it("a form cut off before its end: 400 BAD_MULTIPART", async () => {
    const snapshot = await before()
    const part = `--b\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\n`
    const body = `${part}phone\n${us(50)}\n${us(51)}\n`
    const res = await fetch(`${srv.url}/api/workflows/${wf}/audience`, {
      method: "POST",
      body,
      headers: { authorization: `Bearer ${s.token}`, "content-type": "multipart/form-data; boundary=b" },
    })
    expect(await errorOf(res)).toMatchObject({ status: 400, code: "BAD_MULTIPART" })
    await settled()
    expect(await before()).toBe(snapshot)
  })

  it("a declared length past the limit is refused before anything is read", async () => {
    const snapshot = await before()
    const big = `phone\n${Array.from({ length: 50_000 }, (_, i) => us(100_000 + i)).join("\n")}\n`
    expect(Buffer.byteLength(big)).toBeGreaterThan(UPLOAD_LIMIT)
    expect(await errorOf(await postCsv(s, wf, big))).toMatchObject({ status: 413, code: "PAYLOAD_TOO_LARGE" })
    expect(await before()).toBe(snapshot)
  })

  it("a client that goes away mid-upload", async () => {
    const snapshot = await before()
    const rows = Array.from({ length: 3000 }, (_, i) => `${us(20_000 + i)},P`).join("\n")
    const body = `--b\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\nphone,name\n${rows}\n`
    const socket = connect(srv.port, "127.0.0.1")
    await new Promise<void>((resolve) => socket.once("connect", resolve))
    socket.write(
      `POST /api/workflows/${wf}/audience HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer ${s.token}\r\n` +
        `Content-Type: multipart/form-data; boundary=b\r\n` +
        `Content-Length: ${Buffer.byteLength(body) + 100}\r\n\r\n${body}`,
    )
    await new Promise((r) => setTimeout(r, 300))
    socket.destroy()
    await settled()
    expect(await before()).toBe(snapshot)
    const [u] = await srv.sql`select status from audience_uploads where workflow_id = ${wf} order by id desc limit 1`
    expect(u).toMatchObject({ status: "failed" })
  })

  it("and the workflow still takes an upload afterwards", async () => {
    expect(await ok(await postCsv(s, wf, `phone\n${us(2)}\n`))).toMatchObject({ accepted: 1, total_targets: 2 })
  })
})

describe("who may attach", () => {
  it("another tenant's, a deleted or an unknown workflow is 404; a retired one 409", async () => {
    const s = await a.signup()
    const other = await a.signup()
    const theirs = await newWorkflow(other.tenantId)
    for (const wf of [theirs, await newWorkflow(s.tenantId, { archived: true }), 987_654_321]) {
      expect(await errorOf(await postJson(s, wf, [{ phone: us(1) }]))).toMatchObject({ status: 404, code: "NOT_FOUND" })
      expect(await errorOf(await postCsv(s, wf, `phone\n${us(1)}\n`))).toMatchObject({ status: 404, code: "NOT_FOUND" })
    }
    const retired = await newWorkflow(s.tenantId, { status: "retired" })
    expect(await errorOf(await postJson(s, retired, [{ phone: us(1) }]))).toMatchObject({
      status: 409,
      code: "WORKFLOW_RETIRED",
    })
    expect(await errorOf(await postCsv(s, retired, `phone\n${us(1)}\n`))).toMatchObject({
      status: 409,
      code: "WORKFLOW_RETIRED",
    })
    expect((await targets(theirs)).length).toBe(0)
    expect(
      await errorOf(await a.call("POST", "/api/workflows/abc/audience", { token: s.token, body: { rows: [] } })),
    ).toMatchObject({ status: 422, field: "id" })
  })

  it("needs credentials, and an API key of write scope", async () => {
    const s = await a.signup()
    const wf = await newWorkflow(s.tenantId)
    expect((await a.call("POST", `/api/workflows/${wf}/audience`, { body: { rows: [] } })).status).toBe(401)
    const read = await a.createKey(s, { name: "r", scope: "read" })
    expect(await errorOf(await postJson(read.secret, wf, [{ phone: us(1) }]))).toMatchObject({ status: 403 })
    expect(await errorOf(await postCsv(read.secret, wf, `phone\n${us(1)}\n`))).toMatchObject({ status: 403 })
    const write = await a.createKey(s, { name: "w", scope: "write" })
    expect(await ok(await postCsv(write.secret, wf, `phone\n${us(1)}\n`))).toMatchObject({ accepted: 1 })
    const [u] =
      await srv.sql`select created_by_user_id from audience_uploads where workflow_id = ${wf} and status = 'applied'`
    expect(u).toEqual({ created_by_user_id: null })
  })
})

describe("the parser on its own", () => {
  it("streams 20,000 rows through in batches of at most the batch size, before the source is done", async () => {
    const total = 20_000
    let produced = 0
    async function* source(): AsyncGenerator<Buffer> {
      yield Buffer.from("phone,name,segment\n")
      for (let i = 0; i < total; i += 100) {
        const rows: string[] = []
        for (let j = i; j < i + 100; j++)
          rows.push(j % 1000 === 999 ? `bad${j},X,s` : `${us(j)},"Person, ${j}",s${j % 7}`)
        produced += 100
        yield Buffer.from(`${rows.join("\n")}\n`)
      }
    }
    const sizes: number[] = []
    let producedAtFirstBatch = -1
    let seen = 0
    const tally = await parseAudienceCsv(source(), "US", {
      batchSize: 500,
      onBatch: async (rows: AudienceRow[]) => {
        if (producedAtFirstBatch < 0) producedAtFirstBatch = produced
        sizes.push(rows.length)
        seen += rows.length
        expect(rows[0]!.phone).toMatch(/^\+1415\d{7}$/)
        await new Promise((r) => setImmediate(r))
      },
    })
    expect(tally).toMatchObject({ rows: total, invalid: 20 })
    expect(seen).toBe(total - 20)
    expect(sizes.length).toBeGreaterThanOrEqual(39)
    expect(Math.max(...sizes)).toBeLessThanOrEqual(500)
    // The first batch went out while most of the file was still to come.
    expect(producedAtFirstBatch).toBeLessThan(total / 4)
  })

  it("reads a Node stream and reports lines as the file numbers them", async () => {
    const rows: AudienceRow[] = []
    const tally = await parseAudienceCsv(Readable.from(['phone\n"', `${us(1)}"\n\n`, `${us(2)}\nxx\n`]), "US", {
      batchSize: 10,
      onBatch: async (b) => void rows.push(...b),
    })
    expect(rows.map((r) => [r.line, r.phone])).toEqual([
      [2, us(1)],
      [4, us(2)],
    ])
    expect(tally.invalidRows).toEqual([{ line: 5, phone: "xx", reason: "not_a_number" }])
  })
})
