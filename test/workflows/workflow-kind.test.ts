// What a workflow is for (workflows.kind, migrations/0045): each of the four made through its own
// endpoint carries its kind, and GET /api/workflows lists only the workspace's campaigns. The
// migration's upgrade of older workflows is in workflow-kind.migration.test.ts.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

const SYSTEM_KEY = "system-key-for-workflow-kind-tests"

let srv: TestServer
let a: ReturnType<typeof api>
beforeAll(async () => {
  srv = await startTestServer({ env: { ...FAST_RUNTIME_ENV, SYSTEM_KEY, TRUSTED_PROXIES: "127.0.0.1" } })
  a = api(srv)
})
afterAll(async () => srv?.stop())

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const call = async (method: string, path: string, s: Session, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

const kindOf = async (workflowId: number): Promise<string> =>
  (await srv.sql<[{ kind: string }]>`select kind from workflows where id = ${workflowId}`)[0].kind

const workflowOfRun = async (runId: number): Promise<number> =>
  Number((await srv.sql<[{ workflow_id: number }]>`select workflow_id from runs where id = ${runId}`)[0].workflow_id)

describe("workflows.kind", () => {
  it("is set for a campaign, a rehearsal, an outreach call and a demo call; only campaigns are listed", async () => {
    const s = await a.signup({ country: "US" })
    const intent = (await call("POST", "/billing/topup", s, { amount_minor: 1_000_000 })).body
    await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
    const created = await call("POST", "/api/workflows", s, {
      nl_prompt: "Win back lapsed members with a discount of up to $20; book callbacks; escalate when asked.",
    })
    expect(created.status).toBe(201)
    const campaign = created.body.id as number
    await call("PUT", `/api/workflows/${campaign}/compliance`, s, { consent_attestation_text: "Opted in." })
    expect(await kindOf(campaign)).toBe("campaign")

    const rehearsal = await call("POST", "/api/sim/campaigns", s, { workflow_id: campaign, size: 1 })
    expect(rehearsal.status).toBe(201)
    const [sim] = await srv.sql<[{ sim_workflow_id: number }]>`
      select sim_workflow_id from sim_campaigns where id = ${rehearsal.body.id}`
    expect(await kindOf(Number(sim.sim_workflow_id))).toBe("rehearsal")

    const outreach = await fetch(`${srv.url}/api/internal/outreach/call`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-system-key": SYSTEM_KEY, "x-tenant-id": String(s.tenantId) },
      body: JSON.stringify({ phone: "+12025550105", workflow_id: campaign }),
    })
    const placed = (await outreach.json()) as Json
    expect(outreach.status, JSON.stringify(placed)).toBe(202)
    expect(await kindOf(await workflowOfRun(placed.run_id))).toBe("outreach")

    const demo = await fetch(`${srv.url}/demo/call`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-forwarded-for": "203.0.113.7" },
      body: JSON.stringify({ phone: "+12025551013" }),
    })
    const queued = (await demo.json()) as Json
    expect(demo.status, JSON.stringify(queued)).toBe(202)
    const [demoCall] = await srv.sql<[{ run_id: number }]>`select run_id from demo_calls where id = ${queued.call_id}`
    expect(await kindOf(await workflowOfRun(Number(demoCall.run_id)))).toBe("demo")

    const list = await call("GET", "/api/workflows", s)
    expect(list.status).toBe(200)
    expect((list.body.workflows as Json[]).map((w) => w.id)).toEqual([campaign])
  })
})
