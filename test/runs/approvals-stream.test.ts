// GET /api/approvals/stream through the real server and its in-process runtime: an event for each
// approval created by a live call, decided (by another session of the workspace), expired, or
// cancelled by a data-subject erase, each sent only to that workspace's streams; and who may listen.
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { expireAndAnnounce } from "../../src/approvals/approval-changes.js"
import { insertApproval } from "../../src/approvals/approvals.repo.js"
import { Bus } from "../../src/platform/Bus.js"
import { Log } from "../../src/platform/Log.js"
import { api, HELD_RUNTIME_ENV, type Session } from "../support/clients.js"
import { sharedTestServer, startTestServer, type TestServer } from "../support/harness.js"
import { type SseClient, sse } from "../support/sse-client.js"

// A call holds for a decision 1000 s × 0.01 = 10 s, time enough to decide it while it is live.
const ENV = HELD_RUNTIME_ENV

let srv: TestServer
let a: ReturnType<typeof api>
beforeAll(async () => {
  srv = await sharedTestServer({ env: ENV })
  a = api(srv)
})
afterAll(async () => srv?.stop())

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any
interface Change {
  approval_id: number
  status: string
  at: string
}

const call = async (method: string, path: string, s: { token: string }, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

const streamUrl = () => `${srv.url}/api/approvals/stream`

async function funded(): Promise<Session> {
  const s = await a.signup({ country: "US" })
  const intent = (await call("POST", "/billing/topup", s, { amount_minor: 1_000_000 })).body
  await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
  return s
}

/** Waits for the stream to carry an event for `id` with `status`. */
async function changeOf(c: SseClient, id: number, status: string, ms = 15_000): Promise<Change> {
  const deadline = Date.now() + ms
  for (;;) {
    const found = c.json<Change>().find((e) => e.approval_id === id && e.status === status)
    if (found) return found
    if (Date.now() > deadline) throw new Error(`no ${status} event for approval ${id}: ${JSON.stringify(c.events)}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

async function open(headers: Record<string, string>): Promise<SseClient> {
  const c = sse(streamUrl(), headers)
  expect(await c.status).toBe(200)
  // The first frame (retry:) says the subscription is up.
  await new Promise((r) => setTimeout(r, 50))
  return c
}

describe("GET /api/approvals/stream", () => {
  it("tells each session of the workspace of approvals created, decided, expired, cancelled; no one else", async () => {
    const owner = await funded()
    // The same supervisor signed in a second time (another browser): the stream goes by its cookie.
    const second = await a.login(owner.email, owner.password)
    const outsider = await funded()
    const mine = await open({ cookie: second.cookie })
    const theirs = await open({ authorization: `Bearer ${outsider.token}` })

    const w = (
      await call("POST", "/api/workflows", owner, {
        nl_prompt: "Win back lapsed members with a discount of up to $20; book callbacks; escalate when asked.",
      })
    ).body
    await call("POST", `/api/workflows/${w.id}/audience`, owner, {
      rows: [{ phone: "+12025550107" }, { phone: "+12025550117" }],
    })
    await call("PUT", `/api/workflows/${w.id}/compliance`, owner, { consent_attestation_text: "Opted in." })
    expect((await call("POST", `/api/workflows/${w.id}/run`, owner)).status).toBe(201)

    // Both callees ask for a discount: two proposals, each announced once its row is committed.
    let pending: Json[] = []
    for (let i = 0; i < 300 && pending.length < 2; i++) {
      pending = (await call("GET", `/api/approvals?workflow_id=${w.id}&status=pending`, owner)).body.approvals
      if (pending.length < 2) await new Promise((r) => setTimeout(r, 100))
    }
    expect(pending).toHaveLength(2)
    const [first, second_] = pending.sort((x, y) => x.id - y.id) as [Json, Json]
    for (const p of [first, second_]) {
      const created = await changeOf(mine, p.id, "pending")
      expect(Date.parse(created.at)).toBe(Date.parse(p.created_at))
    }

    // Decided in the first session: the second session's stream hears it at once.
    expect((await call("POST", `/api/approvals/${first.id}/decide`, owner, { decision: "approve" })).status).toBe(200)
    const decided = await changeOf(mine, first.id, "approved")
    const [row] = await srv.sql<[{ decided_at: Date }]>`select decided_at from approvals where id = ${first.id}`
    expect(Date.parse(decided.at)).toBe(row.decided_at.getTime())

    // The other callee is erased: the pending approval is cancelled (denied), and said so.
    const erased = await a.call("POST", "/dsr/erase", {
      token: owner.token,
      body: { contact_identifier: second_.target_phone },
    })
    expect(erased.status).toBe(200)
    await changeOf(mine, second_.id, "denied")

    // An approval past its expiry, expired by its actor's timer (the same function), is announced too.
    const [c] = await srv.sql<[{ id: number; run_id: number }]>`select id, run_id from calls
      where workflow_id = ${w.id} order by id limit 1`
    const stale = await insertApproval(srv.sql, {
      tenantId: owner.tenantId,
      workflowId: w.id,
      runId: c.run_id,
      callId: c.id,
      phone: "+12025550107",
      action: "callback",
      valueMinor: null,
      currency: "USD",
      rationale: "asked to be called tomorrow",
      context: {},
      ttlMs: 1,
    })
    await new Promise((r) => setTimeout(r, 5))
    const deps = await srv.running.runtime.runPromise(Effect.all({ sql: Effect.succeed(srv.sql), bus: Bus, log: Log }))
    expect(await expireAndAnnounce(deps, stale.id)).toBe(1)
    const expired = await changeOf(mine, stale.id, "expired")
    expect(Date.parse(expired.at)).toBe(stale.expires_at.getTime())

    // Exactly the fields of the contract, as unnamed events; beside them only the named pending counts.
    const changes = mine.events.filter((e) => e.event === undefined)
    expect(mine.events.filter((e) => e.event !== undefined).every((e) => e.event === "pending")).toBe(true)
    for (const e of changes) expect(Object.keys(JSON.parse(e.data)).sort()).toEqual(["approval_id", "at", "status"])
    // Another workspace heard none of it: its only count, on connect, is its own (none pending).
    await new Promise((r) => setTimeout(r, 200))
    expect(theirs.events.map((e) => [e.event, JSON.parse(e.data).pending])).toEqual([["pending", 0]])
    mine.close()
    theirs.close()
  }, 60_000)

  it("needs credentials: a session (cookie or bearer) or an API key with read scope", async () => {
    const s = await a.signup()
    const unauthenticated = await fetch(streamUrl())
    expect(unauthenticated.status).toBe(401)
    expect(((await unauthenticated.json()) as Json).code).toBe("UNAUTHENTICATED")
    const key = await a.createKey(s, { name: "queue watcher", scope: "read" })
    const ways: Record<string, string>[] = [
      { authorization: `Bearer ${key.secret}` },
      { authorization: `Bearer ${s.token}` },
      { cookie: s.cookie },
    ]
    for (const headers of ways) {
      const c = sse(streamUrl(), headers)
      expect(await c.status).toBe(200)
      c.close()
    }
    const res = await fetch(streamUrl(), { headers: { authorization: `Bearer ${s.token}` } })
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8")
    await res.body?.cancel()
  })

  it("keeps a quiet stream open with keepalive comments", async () => {
    const fast = await startTestServer({ env: { SSE_KEEPALIVE_MS: "150" } })
    try {
      const s = await api(fast).signup()
      const c = sse(`${fast.url}/api/approvals/stream`, { authorization: `Bearer ${s.token}` })
      expect(await c.status).toBe(200)
      await new Promise((r) => setTimeout(r, 700))
      expect(c.comments.filter((x) => x === "keepalive").length).toBeGreaterThanOrEqual(2)
      c.close()
    } finally {
      await fast.stop()
    }
  })

  it("tells its watchers to reconnect elsewhere when the api process stops", async () => {
    const leaving = await startTestServer()
    const s = await api(leaving).signup()
    const c = sse(`${leaving.url}/api/approvals/stream`, { authorization: `Bearer ${s.token}` })
    expect(await c.status).toBe(200)
    await new Promise((r) => setTimeout(r, 50))
    await leaving.stop()
    await c.ended
    const last = c.events.at(-1)
    expect(last?.event).toBe("reconnect")
    expect(JSON.parse(last!.data)).toMatchObject({ reason: "server_shutting_down" })
  })

  it("is documented in the OpenAPI document", async () => {
    const doc = (await (await fetch(`${srv.url}/openapi.json`)).json()) as Json
    const op = doc.paths["/api/approvals/stream"].get
    expect(op.responses["200"].description).toContain("approval_id")
    expect(Object.keys(op.responses["200"].content)).toContain("text/event-stream")
  })
})
