// POST /api/internal/outreach/call through the real server and its in-process runtime: one call to
// one person on the workspace's workflow (named, or the default), dialed by the runtime with the
// workspace's rules and billed to its wallet; refusals answered at once; and a patch-in on it.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, HELD_RUNTIME_ENV, type Session, SYSTEM_KEY } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

const ENV = HELD_RUNTIME_ENV

let srv: TestServer
let a: ReturnType<typeof api>

beforeAll(async () => {
  srv = await sharedTestServer({ env: ENV })
  a = api(srv)
})
afterAll(async () => srv?.stop())

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const call = async (method: string, path: string, s: { token: string }, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

const system = async (path: string, tenantId: number, body: Json) => {
  const res = await fetch(`${srv.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-system-key": SYSTEM_KEY, "x-tenant-id": String(tenantId) },
    body: JSON.stringify(body),
  })
  return { status: res.status, body: (await res.json()) as Json }
}
const outreach = (tenantId: number, body: Json) => system("/api/internal/outreach/call", tenantId, body)

async function funded(): Promise<Session> {
  const s = await a.signup({ country: "US" })
  const intent = (await call("POST", "/billing/topup", s, { amount_minor: 1_000_000 })).body
  await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
  return s
}

/** A workflow with a rule book and a consent attestation (no audience: the outreach call brings its callee). */
async function workflow(s: Session): Promise<number> {
  const w = (
    await call("POST", "/api/workflows", s, {
      nl_prompt: "Win back lapsed members with a discount of up to $20; book callbacks; escalate when asked.",
    })
  ).body
  await call("PUT", `/api/workflows/${w.id}/compliance`, s, { consent_attestation_text: "Opted in." })
  return w.id as number
}

async function endedCall(runId: number): Promise<Json> {
  for (let i = 0; i < 150; i++) {
    const [c] = await srv.sql<Json[]>`
      select id, tenant_id, phone_e164, status, outcome, connected_seconds, cost_minor from calls
      where run_id = ${runId} and status = 'ended'`
    if (c) return c
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`run ${runId} made no call`)
}

describe("an outreach call", () => {
  it("202: dials the one callee on the named workflow, with the workspace's rules and billing", async () => {
    const s = await funded()
    const wf = await workflow(s)
    const r = await outreach(s.tenantId, { phone: "+12025550105", name: "Dana", workflow_id: wf })
    expect(r.status).toBe(202)
    expect(r.body).toMatchObject({
      call_id: null,
      run_id: expect.any(Number),
      source_workflow_id: wf,
      phone_e164: "+12025550105",
      status: "queued",
    })
    const c = await endedCall(r.body.run_id)
    expect(c).toMatchObject({ tenant_id: s.tenantId, phone_e164: "+12025550105", status: "ended" })
    expect(c.connected_seconds).toBeGreaterThan(0)
    expect(Number(c.cost_minor)).toBeGreaterThan(0)
    const [run] = await srv.sql<Json[]>`
      select r.tenant_id, r.targets_total, w.compliance->>'outreach_of' as outreach_of, w.status
      from runs r join workflows w on w.id = r.workflow_id where r.id = ${r.body.run_id}`
    expect(run).toMatchObject({ tenant_id: s.tenantId, targets_total: 1, outreach_of: String(wf) })
    // The one-target copy is the call's, not a workflow of the workspace's list.
    const list = await call("GET", "/api/workflows", s)
    expect((list.body.workflows as Json[]).map((x) => x.id)).toEqual([wf])
  })

  it("defaults to the workspace's callable workflow; a call on it can be patched through to the operator", async () => {
    const s = await funded()
    const wf = await workflow(s)
    const r = await outreach(s.tenantId, { phone: "+12025550149" })
    expect(r.status).toBe(202)
    expect(r.body.source_workflow_id).toBe(wf)
    let live: Json | undefined
    for (let i = 0; i < 150 && live === undefined; i++) {
      const { body } = await call("GET", `/api/runs/live?run_id=${r.body.run_id}`, s)
      live = (body.calls as Json[]).find((x) => x.answered_at !== null && x.turns > 0)
      if (live === undefined) await new Promise((res) => setTimeout(res, 100))
    }
    expect(live).toBeDefined()
    const p = await system("/api/internal/outreach/patch-in", s.tenantId, { call_uuid: live!.call_id })
    expect(p.status).toBe(200)
    expect(p.body).toMatchObject({ status: "handed_off", operator_number: "+12025550189" })
    expect((await endedCall(r.body.run_id)).outcome).toBe("handed_off")
    // A second outreach call defaults to the workspace's own workflow again, not the first call's copy.
    const again = await outreach(s.tenantId, { phone: "+12025550148" })
    expect(again.body.source_workflow_id).toBe(wf)
  })

  it("refuses at once: bad number, DNC, unknown or another workspace's workflow, none ready, no funds", async () => {
    const s = await funded()
    const other = await funded()
    const wf = await workflow(s)
    const bad = await outreach(s.tenantId, { phone: "not a phone", workflow_id: wf })
    expect(bad.status).toBe(422)
    expect(bad.body.code).toBe("VALIDATION_FAILED")
    expect((await call("POST", "/dnc/add", s, { phone_e164: "+12025550143" })).status).toBe(200)
    const dnc = await outreach(s.tenantId, { phone: "+12025550143", workflow_id: wf })
    expect(dnc.status).toBe(422)
    expect(dnc.body.error).toMatch(/do-not-call/)
    expect((await outreach(s.tenantId, { phone: "+12025550105", workflow_id: 987_654_321 })).status).toBe(404)
    expect((await outreach(other.tenantId, { phone: "+12025550105", workflow_id: wf })).status).toBe(404)
    const none = await outreach(other.tenantId, { phone: "+12025550105" })
    expect(none.status).toBe(409)
    expect(none.body.code).toBe("WORKFLOW_NOT_READY")
    const broke = await a.signup({ country: "US" })
    const brokeWf = await workflow(broke)
    await srv.sql`update tenants set trial_expires_at = now() - interval '1 day' where id = ${broke.tenantId}`
    const poor = await outreach(broke.tenantId, { phone: "+12025550105", workflow_id: brokeWf })
    expect(poor.status).toBe(402)
    expect((await outreach(s.tenantId, {})).status).toBe(422)
  })
})
