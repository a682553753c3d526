// GET /api/reports/calls-per-day (the console's Reports chart): every day of the window listed,
// today's calls counted as the database holds them, only the caller's workspace, bad windows 422.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

let srv: TestServer
let a: ReturnType<typeof api>
let owner: Session
let other: Session

const call = async (method: string, path: string, s: { token: string } | undefined, body?: unknown) => {
  const res = await a.call(method, path, { ...(s && { token: s.token }), ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

/** A campaign over these numbers, run to completion on the simulator. */
async function completedRun(s: Session, phones: string[]) {
  const intent = (await call("POST", "/billing/topup", s, { amount_minor: 1_000_000 })).body
  await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
  const w = (await call("POST", "/api/workflows", s, { nl_prompt: "Call lapsed members and invite them back." })).body
  await call("POST", `/api/workflows/${w.id}/audience`, s, { rows: phones.map((phone) => ({ phone })) })
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

const today = () => new Date().toISOString().slice(0, 10)

beforeAll(async () => {
  srv = await sharedTestServer({ env: FAST_RUNTIME_ENV })
  a = api(srv)
  ;[owner, other] = await Promise.all([a.signup({ country: "US" }), a.signup({ country: "US" })])
  await completedRun(owner, ["+12025550103", "+12025550114", "+12025550126"])
}, 90_000)
afterAll(async () => srv?.stop())

describe("GET /api/reports/calls-per-day", () => {
  it("lists every day of the last 30 by default, oldest first, with today's calls", async () => {
    const { status, body } = await call("GET", "/api/reports/calls-per-day", owner)
    expect(status).toBe(200)
    const days = body.days as Array<{ day: string; calls: number }>
    expect(days).toHaveLength(30)
    expect(body.to).toBe(today())
    expect(body.from).toBe(days[0]!.day)
    for (let i = 1; i < days.length; i++) {
      expect(Date.parse(days[i]!.day) - Date.parse(days[i - 1]!.day)).toBe(86_400_000)
    }
    // The workspace is minutes old: every call it placed is in the window, on the day it started.
    const rows = await srv.sql<{ day: string; n: number }[]>`
      select to_char(started_at at time zone 'UTC', 'YYYY-MM-DD') as day, count(*)::int as n from calls
      where tenant_id = ${owner.tenantId} and outcome is distinct from 'insufficient_funds' group by 1`
    expect(rows.reduce((t, r) => t + r.n, 0)).toBeGreaterThanOrEqual(3)
    const want = new Map(rows.map((r) => [r.day, r.n]))
    for (const d of days) expect(d.calls).toBe(want.get(d.day) ?? 0)
    expect(days.reduce((t, d) => t + d.calls, 0)).toBe(rows.reduce((t, r) => t + r.n, 0))
  })

  it("takes a window of 1 to 366 days and refuses anything else with 422", async () => {
    const one = await call("GET", "/api/reports/calls-per-day?days=1", owner)
    expect(one.status).toBe(200)
    expect(one.body.days).toHaveLength(1)
    expect((await call("GET", "/api/reports/calls-per-day?days=366", owner)).body.days).toHaveLength(366)
    for (const bad of ["0", "367", "-3", "abc", "1e3", "99999999999999999999"]) {
      const res = await call("GET", `/api/reports/calls-per-day?days=${bad}`, owner)
      expect(res.status).toBe(422)
      expect(res.body).toMatchObject({ code: "VALIDATION_FAILED", field: "days" })
    }
  })

  it("counts only the caller's workspace and needs a caller", async () => {
    const { status, body } = await call("GET", "/api/reports/calls-per-day?days=7", other)
    expect(status).toBe(200)
    expect((body.days as Array<{ calls: number }>).every((d) => d.calls === 0)).toBe(true)
    const anon = await call("GET", "/api/reports/calls-per-day", undefined)
    expect(anon.status).toBe(401)
    expect(anon.body.code).toBeTypeOf("string")
    // Documented with the rest of the API.
    const doc = (await call("GET", "/openapi.json", undefined)).body
    expect(doc.paths["/api/reports/calls-per-day"]?.get).toBeDefined()
  })
})
