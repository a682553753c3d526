// A supervisor takes a live call over (POST /api/calls/{call_id}/take-over) through the real server, its
// in-process runtime and the sim carrier: the patch-in path hands the callee to the operator and the call
// ends handed_off, audited; a replayed Idempotency-Key answers the same; 401, 403, 404, 409 and 422 refuse.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, HELD_RUNTIME_ENV, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

/** 9 asks for a human and holds for a decision (10 s at the suite's scale); 6 declines and hangs up. */
const HELD = "+12025550149"
const DECLINES = "+12025550146"

let srv: TestServer
let a: ReturnType<typeof api>
let owner: Session
let supervisor: Session
let runId: number

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const call = async (method: string, path: string, s?: { token: string }, body?: unknown, headers = {}) => {
  const res = await a.call(method, path, {
    ...(s !== undefined && { token: s.token }),
    ...(body !== undefined && { body }),
    headers,
  })
  return { status: res.status, body: (await res.json()) as Json, headers: res.headers }
}
const takeOver = (callId: number, s: Session | undefined, body?: unknown, headers = {}) =>
  call("POST", `/api/calls/${callId}/take-over`, s, body, headers)

/** Polls `read` until it gives a value (every 100 ms, 15 s at most). */
async function eventually<T>(what: string, read: () => Promise<T | undefined>): Promise<T> {
  for (let i = 0; i < 150; i++) {
    const v = await read()
    if (v !== undefined) return v
    await sleep(100)
  }
  throw new Error(`${what}: not within 15 s`)
}

const callOf = (phone: string, status?: string) =>
  eventually(`a call to ${phone}${status ? ` ${status}` : ""}`, async () => {
    const [c] = await srv.sql<Array<{ id: number; status: string; outcome: string | null }>>`
      select id, status, outcome from calls where run_id = ${runId} and phone_e164 = ${phone}
        ${status === undefined ? srv.sql`` : srv.sql`and status = ${status}`}`
    return c
  })

beforeAll(async () => {
  srv = await sharedTestServer({ env: HELD_RUNTIME_ENV })
  a = api(srv)
  owner = await a.signup({ country: "US" })
  supervisor = await a.addMember(owner, "supervisor")
  const intent = (await call("POST", "/billing/topup", owner, { amount_minor: 1_000_000 })).body
  await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
  const w = (
    await call("POST", "/api/workflows", owner, {
      nl_prompt: "Win back lapsed members with a discount of up to $20; escalate when asked.",
    })
  ).body
  await call("POST", `/api/workflows/${w.id}/audience`, owner, { rows: [{ phone: HELD }, { phone: DECLINES }] })
  await call("PUT", `/api/workflows/${w.id}/compliance`, owner, { consent_attestation_text: "Opted in." })
  runId = (await call("POST", `/api/workflows/${w.id}/run`, owner)).body.run_id
}, 30_000)
afterAll(async () => srv?.stop())

describe("POST /api/calls/{call_id}/take-over", () => {
  it("hands a live call to the operator given, as the patch-in does; audited; a replay answers the same", async () => {
    // Taken over once a person answered and spoke, as the Live page shows it.
    const live = await eventually("an answered live call", async () => {
      const { body } = await call("GET", `/api/runs/live?run_id=${runId}`, supervisor)
      return (body.calls as Json[]).find((c) => c.phone_e164 === HELD && c.answered_at !== null && c.turns > 0)
    })
    const key = { "Idempotency-Key": `take-over-${live.call_id}` }
    const r = await takeOver(live.call_id, supervisor, { operator_number: "+1 (202) 555-0177" }, key)
    expect(r.status).toBe(200)
    expect(r.body).toEqual({
      call_id: live.call_id,
      run_id: runId,
      status: "handed_off",
      conference_id: expect.stringMatching(/^sim-conf-/),
      operator_number: "+12025550177",
      recorded: true,
    })
    // The call settles as the patch-in leaves it: ended, handed off.
    const row = await callOf(HELD, "ended")
    expect(row).toEqual({ id: live.call_id, status: "ended", outcome: "handed_off" })

    const audit = await srv.sql<Json[]>`
      select actor, actor_email, actor_role, action, target, after from audit_events
      where tenant_id = ${owner.tenantId} and starts_with(action, 'call.')`
    expect(audit).toEqual([
      {
        actor: `user:${supervisor.userId}`,
        actor_email: supervisor.email,
        actor_role: "supervisor",
        action: "call.taken_over",
        target: `call:${live.call_id}`,
        after: {
          run_id: runId,
          status: "handed_off",
          conference_id: r.body.conference_id,
          operator_number: "+12025550177",
        },
      },
    ])

    const replay = await takeOver(live.call_id, supervisor, { operator_number: "+1 (202) 555-0177" }, key)
    expect(replay.status).toBe(200)
    expect(replay.headers.get("idempotent-replayed")).toBe("true")
    expect(replay.body).toEqual(r.body)
    const again = await takeOver(live.call_id, owner, {})
    expect(again.status).toBe(409)
    expect(again.body.code).toBe("CALL_HANDED_OFF")
  }, 30_000)

  it("refuses: 401 signed out, 403 an analyst, 404 another workspace's or unknown call, 409 ended, 422", async () => {
    const ended = await callOf(DECLINES, "ended")
    expect(ended.outcome).not.toBe("handed_off")

    expect((await takeOver(ended.id, undefined, {})).status).toBe(401)
    const analyst = await a.addMember(owner, "analyst")
    const refused = await takeOver(ended.id, analyst, {})
    expect(refused.status).toBe(403)
    expect(refused.body).toEqual({ error: expect.any(String), code: "INSUFFICIENT_ROLE" })
    const stranger = await a.signup({ country: "US", verify: false })
    const foreign = await takeOver(ended.id, stranger, {})
    expect(foreign.status).toBe(404)
    expect(foreign.body.code).toBe("NOT_FOUND")
    expect((await takeOver(987_654_321, supervisor, {})).status).toBe(404)

    const over = await takeOver(ended.id, supervisor)
    expect(over.status).toBe(409)
    expect(over.body.code).toBe("CALL_NOT_LIVE")

    for (const operator_number of ["call me", "+1555", "2025550177", 12025550177]) {
      const bad = await takeOver(ended.id, supervisor, { operator_number })
      expect(bad.status, String(operator_number)).toBe(422)
      expect(bad.body).toMatchObject({ code: "VALIDATION_FAILED", field: "operator_number" })
    }
    // Nothing refused was logged.
    const [{ n }] = await srv.sql<[{ n: number }]>`
      select count(*)::int as n from audit_events
      where tenant_id = ${owner.tenantId} and target = ${`call:${ended.id}`}`
    expect(n).toBe(0)
  }, 30_000)
})
