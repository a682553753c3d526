// The weekly report: the figures function on its own (rates, minutes, money, every day filled in),
// then the PDF through the real server over real sim runs — a well-formed document whose text
// holds the period's figures, an empty period that still renders, the 422 paths, and tenant
// isolation (another workspace's calls are not counted).
import { inflateSync } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { formatAmount } from "../../src/platform/money.js"
import { type Period, parsePeriod, weeklyFigures } from "../../src/reports/weekly.figures.js"
import { axisScale, pdfMoney, pdfText } from "../../src/reports/weekly.pdf.js"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

// ---------------------------------------------------------------------------------------------
// Reading a PDF's text: inflate each FlateDecode stream, then take the strings of every TJ/Tj.

function pdfStreams(pdf: Buffer): string[] {
  const text = pdf.toString("latin1")
  const out: string[] = []
  const re = /<<((?:[^<>]|<<[^>]*>>|<[^<>]*>)*)>>\s*stream\r?\n/g
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const start = m.index + m[0].length
    const end = text.indexOf("endstream", start)
    let body = pdf.subarray(start, end)
    if (/\/FlateDecode/.test(m[1]!)) body = inflateSync(body)
    out.push(body.toString("latin1"))
    re.lastIndex = end
  }
  return out
}

/** Each text-showing operator's string, in drawing order (hex strings as pdfkit writes them). */
function pdfTexts(pdf: Buffer): string[] {
  const texts: string[] = []
  for (const s of pdfStreams(pdf)) {
    for (const m of s.matchAll(/\[((?:\s*<[0-9a-fA-F]*>\s*-?[\d.]*)*)\s*\]\s*TJ/g)) {
      const hex = [...m[1]!.matchAll(/<([0-9a-fA-F]*)>/g)].map((h) => h[1]).join("")
      texts.push(Buffer.from(hex, "hex").toString("latin1"))
    }
  }
  return texts
}

/** The value drawn right after a label. */
const labelValue = (texts: string[], label: string): string | undefined => {
  const i = texts.indexOf(label)
  return i < 0 ? undefined : texts[i + 1]
}

// ---------------------------------------------------------------------------------------------

describe("the period", () => {
  it("takes inclusive YYYY-MM-DD dates and refuses malformed, reversed and over-long ones", () => {
    expect(parsePeriod("2025-01-01", "2025-01-07")).toMatchObject({
      days: 7,
      range: { start: new Date("2025-01-01T00:00:00Z"), end: new Date("2025-01-08T00:00:00Z") },
    })
    expect(parsePeriod("2025-01-01", "2025-01-01")).toMatchObject({ days: 1 })
    expect(parsePeriod("2024-01-01", "2024-12-31")).toMatchObject({ days: 366 })
    expect(parsePeriod("2024-01-01", "2025-01-01")).toEqual({ errors: [expect.objectContaining({ field: "to" })] })
    expect(parsePeriod("2025-01-02", "2025-01-01")).toEqual({
      errors: [{ field: "to", message: "must not be before from" }],
    })
    for (const bad of ["2025-02-30", "2025-13-01", "2025-1-01", "20250101", "2025-01-01T00:00:00Z", ""]) {
      expect(parsePeriod(bad, "2025-03-01")).toEqual({ errors: [expect.objectContaining({ field: "from" })] })
    }
  })
})

describe("the figures", () => {
  const period = parsePeriod("2025-03-01", "2025-03-05") as Period
  const base = {
    workspace: "Acme",
    currency: "USD" as const,
    period,
    approvals: { requested: 4, approved: 1, denied: 1, expired: 1, pending: 1 },
    generatedAt: new Date("2025-03-06T08:00:00Z"),
  }

  it("computes the connect rate, minutes (one decimal), spend and a bar for every day", () => {
    const f = weeklyFigures({
      ...base,
      totals: { placed: 8, connected: 7, connected_seconds: 95 + 400, spend_minor: 1234 },
      outcomes: [
        { outcome: "agreed", calls: 3 },
        { outcome: "declined", calls: 1 },
        { outcome: "no_answer", calls: 1 },
        { outcome: "voicemail", calls: 3 },
      ],
      perDay: [
        { day: "2025-03-02", calls: 5 },
        { day: "2025-03-05", calls: 3 },
      ],
    })
    expect(f.calls).toEqual({
      placed: 8,
      connected: 7,
      connect_rate_pct: 87.5,
      connected_seconds: 495,
      minutes_talked: 8.3,
      spend_minor: 1234,
    })
    expect(f.display).toEqual({
      placed: "8",
      connected: "7",
      connect_rate: "87.5%",
      minutes_talked: "8.3",
      spend: "$12.34",
    })
    expect(f.per_day).toEqual([
      { day: "2025-03-01", calls: 0 },
      { day: "2025-03-02", calls: 5 },
      { day: "2025-03-03", calls: 0 },
      { day: "2025-03-04", calls: 0 },
      { day: "2025-03-05", calls: 3 },
    ])
    expect(f.outcomes.map((o) => o.outcome)).toEqual(["agreed", "voicemail", "declined", "no_answer"])
    expect(f.outcomes.reduce((n, o) => n + o.calls, 0)).toBe(f.calls.placed)
    expect(f.outcomes[0]!.share_pct).toBe(37.5)
    expect(f.period).toEqual({ from: "2025-03-01", to: "2025-03-05", days: 5 })
  })

  it("has no connect rate for an empty period, and formats rupees like the rest of the product", () => {
    const f = weeklyFigures({
      ...base,
      currency: "INR",
      totals: { placed: 0, connected: 0, connected_seconds: 0, spend_minor: 0 },
      outcomes: [],
      perDay: [],
    })
    expect(f.calls.connect_rate_pct).toBeNull()
    expect(f.display.connect_rate).toBe("n/a")
    expect(f.display.spend).toBe(formatAmount(0, "INR"))
    expect(f.per_day).toHaveLength(5)
    expect(f.per_day.every((d) => d.calls === 0)).toBe(true)
    const big = weeklyFigures({
      ...base,
      currency: "INR",
      totals: { placed: 1, connected: 1, connected_seconds: 59, spend_minor: 12_345_678 },
      outcomes: [],
      perDay: [],
    })
    expect(big.display.spend).toBe("₹1,23,456.78")
    expect(big.display.minutes_talked).toBe("1.0")
    // The standard PDF fonts have no rupee sign.
    expect(pdfMoney(big.display.spend)).toBe("INR 1,23,456.78")
    expect(pdfText("प्रिया Co — ok")).toBe("?????? Co — ok")
  })

  it("picks round chart axes", () => {
    expect(axisScale(0)).toEqual({ top: 4, step: 1 })
    expect(axisScale(3)).toEqual({ top: 3, step: 1 })
    expect(axisScale(7)).toEqual({ top: 8, step: 2 })
    expect(axisScale(93)).toEqual({ top: 100, step: 25 })
  })
})

// ---------------------------------------------------------------------------------------------

let srv: TestServer
let a: ReturnType<typeof api>
let owner: Session
let other: Session

const call = async (method: string, path: string, s: { token: string }, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

const report = (s: { token: string }, from: string, to: string) =>
  a.call("GET", `/api/reports/weekly?from=${from}&to=${to}`, { token: s.token })

/** Runs a campaign over these numbers to completion, as a customer would. */
async function completedRun(s: Session, phones: string[]) {
  const intent = (await call("POST", "/billing/topup", s, { amount_minor: 1_000_000 })).body
  await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
  const w = (
    await call("POST", "/api/workflows", s, {
      nl_prompt: "Call members whose membership lapsed and offer a discount of up to $20 to rejoin.",
    })
  ).body
  expect(
    (await call("POST", `/api/workflows/${w.id}/audience`, s, { rows: phones.map((phone) => ({ phone })) })).body
      .accepted,
  ).toBe(phones.length)
  await call("PUT", `/api/workflows/${w.id}/compliance`, s, { consent_attestation_text: "All numbers opted in." })
  const runId = (await call("POST", `/api/workflows/${w.id}/run`, s)).body.run_id as number
  const deadline = Date.now() + 40_000
  for (;;) {
    const run = ((await call("GET", `/api/workflows/${w.id}/runs`, s)).body.runs as Json[]).find((r) => r.id === runId)
    if (run?.status === "completed") return
    if (Date.now() > deadline) throw new Error(`run ${runId} did not complete: ${JSON.stringify(run)}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

const day = (offsetDays: number) => new Date(Date.now() + offsetDays * 86_400_000).toISOString().slice(0, 10)
// Around today, so a run that crosses midnight UTC is still inside.
const FROM = day(-1)
const TO = day(1)

/** What the database holds for a workspace: the figures the PDF must show. */
async function expected(tenantId: number) {
  const [row] = await srv.sql<[{ placed: number; connected: number; seconds: number; spend: number }]>`
    select count(*)::int as placed, count(*) filter (where answered_at is not null)::int as connected,
           coalesce(sum(connected_seconds), 0)::int as seconds, coalesce(sum(cost_minor), 0)::int as spend
    from calls where tenant_id = ${tenantId} and outcome is distinct from 'insufficient_funds'`
  return row
}

beforeAll(async () => {
  srv = await sharedTestServer({ env: FAST_RUNTIME_ENV })
  a = api(srv)
  ;[owner, other] = await Promise.all([a.signup({ country: "US", full_name: "Owner" }), a.signup({ country: "US" })])
  // Digits: 0 no answer (three attempts), 3–5 agree, 6 declines, 7 concession, 8 callback.
  await Promise.all([
    completedRun(owner, [
      "+12025550100",
      "+12025550113",
      "+12025550124",
      "+12025550136",
      "+12025550147",
      "+12025550158",
    ]),
    completedRun(other, ["+13035550103"]),
  ])
}, 120_000)
afterAll(async () => srv?.stop())

describe("GET /api/reports/weekly", () => {
  it("streams a PDF attachment holding the period's figures", async () => {
    const res = await report(owner, FROM, TO)
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toBe("application/pdf")
    expect(res.headers.get("content-disposition")).toBe(`attachment; filename="parley-report-${FROM}-to-${TO}.pdf"`)
    const pdf = Buffer.from(await res.arrayBuffer())
    expect(pdf.subarray(0, 5).toString("latin1")).toBe("%PDF-")
    expect(pdf.toString("latin1").trimEnd().endsWith("%%EOF")).toBe(true)

    const want = await expected(owner.tenantId)
    // Six numbers; the unanswered one is dialed again (how often is the rule book's retry policy).
    expect(want.placed).toBeGreaterThanOrEqual(7)
    expect(want.connected).toBe(5)
    const texts = pdfTexts(pdf)
    expect(labelValue(texts, "Calls placed")).toBe(String(want.placed))
    expect(labelValue(texts, "Calls connected")).toBe(String(want.connected))
    expect(labelValue(texts, "Connect rate")).toBe(`${((want.connected / want.placed) * 100).toFixed(1)}%`)
    expect(labelValue(texts, "Minutes talked")).toBe((Math.round((want.seconds / 60) * 10) / 10).toFixed(1))
    expect(want.spend).toBeGreaterThan(0)
    expect(labelValue(texts, "Spend")).toBe(formatAmount(want.spend, "USD"))

    const [ws] = await srv.sql<[{ name: string }]>`select name from tenants where id = ${owner.tenantId}`
    expect(texts).toContain(`Workspace: ${ws.name}`)
    expect(texts.some((t) => t.startsWith("Period: "))).toBe(true)

    // Approvals: concession (7) and callback (8), nobody decided yet.
    expect(labelValue(texts, "Requested")).toBe("2")
    expect(labelValue(texts, "Approved")).toBe("0")
    // Outcomes: the table's rows, most frequent first.
    const outcomes = await srv.sql<{ outcome: string; n: number }[]>`select outcome, count(*)::int as n from calls
      where tenant_id = ${owner.tenantId} and outcome is distinct from 'insufficient_funds' group by outcome`
    for (const o of outcomes) expect(labelValue(texts, o.outcome.replace(/_/g, " "))).toBe(String(o.n))
    // The chart: a labelled axis and one label per day.
    expect(texts).toContain("Day (UTC)")
    expect(texts).toContain("Calls")
    for (const d of [FROM, day(0), TO]) expect(texts).toContain(d.slice(5))
  })

  it("counts only the caller's workspace", async () => {
    const pdf = Buffer.from(await (await report(other, FROM, TO)).arrayBuffer())
    const texts = pdfTexts(pdf)
    const want = await expected(other.tenantId)
    expect(want.placed).toBe(1)
    expect(labelValue(texts, "Calls placed")).toBe("1")
    expect(labelValue(texts, "Calls connected")).toBe("1")
    expect(labelValue(texts, "Spend")).toBe(formatAmount(want.spend, "USD"))
    expect(labelValue(texts, "Requested")).toBe("0")
  })

  it("renders an empty period", async () => {
    const res = await report(owner, "2020-02-01", "2020-02-29")
    expect(res.status).toBe(200)
    const pdf = Buffer.from(await res.arrayBuffer())
    expect(pdf.subarray(0, 5).toString("latin1")).toBe("%PDF-")
    expect(pdf.toString("latin1").trimEnd().endsWith("%%EOF")).toBe(true)
    const texts = pdfTexts(pdf)
    expect(labelValue(texts, "Calls placed")).toBe("0")
    expect(labelValue(texts, "Connect rate")).toBe("n/a")
    expect(labelValue(texts, "Minutes talked")).toBe("0.0")
    expect(labelValue(texts, "Spend")).toBe("$0.00")
    expect(texts).toContain("No calls were placed in this period.")
  })

  it("answers 422 for malformed dates, to before from, and more than 366 days", async () => {
    const cases: Array<[string, string, string]> = [
      ["2025-13-01", "2025-12-31", "from"],
      ["2025-02-30", "2025-03-31", "from"],
      ["2025-01-01", "tomorrow", "to"],
      ["2025-01-08", "2025-01-01", "to"],
      ["2024-01-01", "2025-01-01", "to"],
    ]
    for (const [from, to, field] of cases) {
      const res = await report(owner, from, to)
      expect(res.status).toBe(422)
      expect(await res.json()).toMatchObject({ code: "VALIDATION_FAILED", field })
    }
    expect((await a.call("GET", "/api/reports/weekly?from=2025-01-01", { token: owner.token })).status).toBe(422)
    expect((await report(owner, "2024-01-01", "2024-12-31")).status).toBe(200) // 366 days
  })

  it("needs a caller, and serves a read-scoped API key", async () => {
    expect((await a.call("GET", `/api/reports/weekly?from=${FROM}&to=${TO}`)).status).toBe(401)
    const key = await a.createKey(owner, { name: "reports", scope: "read" })
    const res = await a.call("GET", `/api/reports/weekly?from=${FROM}&to=${TO}`, {
      headers: { authorization: `Bearer ${key.secret}` },
    })
    expect(res.status).toBe(200)
    expect(labelValue(pdfTexts(Buffer.from(await res.arrayBuffer())), "Calls placed")).toBe(
      String((await expected(owner.tenantId)).placed),
    )
  })
})
