// The contact timeline through the real server, over a real run of the sim: identifiers (400 for
// none or several), n limits, the before cursor paging without overlap or loss across events that
// share a timestamp, newest first, the shape of every kind of event, and tenant isolation.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, FAST_RUNTIME_ENV, type Session, uniqueEmail } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

// The sim callee behaves by the last digit: 7 asks for a discount (concession approval),
// 0 never answers (three attempts), 3 agrees, 5 agrees.
const P_DISCOUNT = "+12025550107"
const P_NO_ANSWER = "+12025550110"
const P_DNC = "+12025550123"
const P_PAGED = "+12025550135"
const P_OTHER = "+12025550147"

let srv: TestServer
let a: ReturnType<typeof api>
let owner: Session
let other: Session
let workflowId: number
let runId: number
let keyId: number

const call = async (method: string, path: string, s: { token: string }, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

const timeline = (s: Session, q: Record<string, string | number | undefined>) => {
  const params = new URLSearchParams()
  for (const [k, v] of Object.entries(q)) if (v !== undefined) params.set(k, String(v))
  return call("GET", `/api/timeline?${params.toString()}`, s)
}

async function fund(s: Session, amountMinor = 1_000_000) {
  const intent = (await call("POST", "/billing/topup", s, { amount_minor: amountMinor })).body
  const res = await a.call("POST", "/billing/webhooks/stub", {
    body: { external_id: intent.external_id, status: "succeeded" },
  })
  expect(res.status).toBe(200)
}

async function waitForRun(s: Session, wid: number, rid: number, timeoutMs = 30_000): Promise<Json> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const { body } = await call("GET", `/api/workflows/${wid}/runs`, s)
    const run = (body.runs as Json[]).find((r) => r.id === rid)
    if (run?.status === "completed") return run
    if (Date.now() > deadline) throw new Error(`run ${rid} did not complete: ${JSON.stringify(run)}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

beforeAll(async () => {
  srv = await sharedTestServer({ env: FAST_RUNTIME_ENV })
  a = api(srv)
  owner = await a.signup({ country: "US" })
  other = await a.signup({ country: "US" })
  await fund(owner)

  const w = (
    await call("POST", "/api/workflows", owner, {
      nl_prompt: "Call members whose membership lapsed and offer a discount of up to $20 to rejoin.",
    })
  ).body
  workflowId = w.id
  const aud = await call("POST", `/api/workflows/${w.id}/audience`, owner, {
    rows: [P_DISCOUNT, P_NO_ANSWER, P_DNC].map((phone) => ({ phone })),
  })
  expect(aud.body.accepted).toBe(3)
  expect(
    (
      await call("PUT", `/api/workflows/${w.id}/compliance`, owner, {
        consent_attestation_text: "All numbers opted in.",
      })
    ).status,
  ).toBe(200)
  // Listed after the audience was attached: the dialer skips it.
  expect((await call("POST", "/dnc/add", owner, { phone_e164: P_DNC, reason: "asked by email" })).status).toBe(200)
  const started = await call("POST", `/api/workflows/${w.id}/run`, owner)
  expect(started.status).toBe(201)
  runId = started.body.run_id
  await waitForRun(owner, workflowId, runId)

  // A decision by the owner on the concession (the decide endpoint belongs to another change).
  await srv.sql`update approvals
    set status = 'approved', decided_at = now(), decided_by = ${owner.userId}, note = 'fine'
    where run_id = ${runId} and proposed_action = 'concession'`
  await srv.sql`update users set email_verified = true, email_verified_at = now() where id = ${owner.userId}`
  const key = await a.createKey(owner, { name: "reporting", scope: "read" })
  keyId = key.id
  expect((await call("POST", `/api-keys/${key.id}/revoke`, owner, { reason: "rotated" })).status).toBe(200)

  // 60 approvals about one number, twelve of them created at the very same instant.
  const same = new Date(Date.now() - 3_600_000)
  for (let i = 0; i < 60; i++) {
    const at = i < 12 ? same : new Date(same.getTime() - (i + 1) * 1000)
    await srv.sql`
      insert into approvals (tenant_id, workflow_id, target_phone, proposed_action, proposed_value_minor, currency,
        rationale, created_at, expires_at)
      values (${owner.tenantId}, ${workflowId}, ${P_PAGED}, 'callback', null, 'USD',
        ${`paged ${i}`}, ${at}, now() + interval '1 day')`
  }

  // The other workspace touches the owner's numbers in its own space.
  expect((await call("POST", "/dnc/add", other, { phone_e164: P_DISCOUNT })).status).toBe(200)
  expect((await call("POST", "/dnc/add", other, { phone_e164: P_OTHER })).status).toBe(200)
}, 90_000)
afterAll(async () => srv?.stop())

describe("identifiers and limits", () => {
  it("answers 400 IDENTIFIER_REQUIRED without an identifier", async () => {
    const res = await timeline(owner, {})
    expect(res.status).toBe(400)
    expect(res.body).toMatchObject({ code: "IDENTIFIER_REQUIRED" })
    expect(typeof res.body.error).toBe("string")
    expect((await timeline(owner, { n: 5 })).body.code).toBe("IDENTIFIER_REQUIRED")
  })

  it("answers 400 TOO_MANY_IDENTIFIERS for more than one", async () => {
    const res = await timeline(owner, { phone: P_DISCOUNT, email: owner.email })
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("TOO_MANY_IDENTIFIERS")
    expect((await timeline(owner, { user_id: owner.userId, email: owner.email })).status).toBe(400)
  })

  it("answers 422 for n outside 1..500, a malformed identifier or before", async () => {
    for (const n of [0, 501, -1, "x"]) {
      const res = await timeline(owner, { phone: P_PAGED, n })
      expect(res.status).toBe(422)
      expect(res.body).toMatchObject({ code: "VALIDATION_FAILED", field: "n" })
    }
    expect((await timeline(owner, { phone: "12" })).body).toMatchObject({ code: "VALIDATION_FAILED", field: "phone" })
    expect((await timeline(owner, { user_id: "abc" })).status).toBe(422)
    expect((await timeline(owner, { email: "not-an-email" })).status).toBe(422)
    expect((await timeline(owner, { phone: P_PAGED, before: "yesterday" })).body).toMatchObject({
      code: "VALIDATION_FAILED",
      field: "before",
    })
    expect((await timeline(owner, { phone: P_PAGED, before: "2025-01-01T00:00:00Z~x" })).status).toBe(422)
  })

  it("gives 50 events by default and up to 500 on request", async () => {
    const def = await timeline(owner, { phone: P_PAGED })
    expect(def.status).toBe(200)
    expect(def.body.count).toBe(50)
    expect(def.body.events).toHaveLength(50)
    expect(def.body.next_before).toEqual(expect.any(String))
    const all = await timeline(owner, { phone: P_PAGED, n: 500 })
    expect(all.body.count).toBe(60)
    expect(all.body.next_before).toBeNull()
    expect((await timeline(owner, { phone: P_PAGED, n: 1 })).body.count).toBe(1)
  })
})

describe("paging", () => {
  it("returns events newest first", async () => {
    for (const q of [{ phone: P_PAGED }, { phone: P_DISCOUNT }, { phone: P_NO_ANSWER }, { user_id: owner.userId }]) {
      const { body } = await timeline(owner, { ...q, n: 500 })
      const times = (body.events as Json[]).map((e) => Date.parse(e.at))
      expect(times.length).toBeGreaterThan(1)
      for (let i = 1; i < times.length; i++) expect(times[i]!).toBeLessThanOrEqual(times[i - 1]!)
    }
  })

  it("pages with next_before without overlap or loss, across events that share a timestamp", async () => {
    const all = (await timeline(owner, { phone: P_PAGED, n: 500 })).body.events as Json[]
    for (const n of [5, 7, 12]) {
      const seen: Json[] = []
      let before: string | null = null
      for (let pages = 0; pages < 100; pages++) {
        const res: { body: Json } = await timeline(owner, { phone: P_PAGED, n, ...(before !== null && { before }) })
        expect(res.body.count).toBeLessThanOrEqual(n)
        seen.push(...(res.body.events as Json[]))
        before = res.body.next_before
        if (before === null) break
      }
      expect(seen.map((e) => e.payload.approval_id)).toEqual(all.map((e) => e.payload.approval_id))
      expect(new Set(seen.map((e) => e.cursor)).size).toBe(seen.length)
    }
    // The twelve at one instant are the newest and come out in one stable order.
    const first12 = all.slice(0, 12)
    expect(new Set(first12.map((e) => e.at)).size).toBe(1)
  })

  it("pages across sources of a phone (calls, turns, decisions) the same way", async () => {
    const all = (await timeline(owner, { phone: P_DISCOUNT, n: 500 })).body.events as Json[]
    const seen: Json[] = []
    let before: string | null = null
    do {
      const res: { body: Json } = await timeline(owner, { phone: P_DISCOUNT, n: 1, ...(before !== null && { before }) })
      seen.push(...(res.body.events as Json[]))
      before = res.body.next_before
    } while (before !== null)
    expect(seen).toEqual(all)
  })

  it("reads a bare timestamp in before strictly: only events older than it", async () => {
    const all = (await timeline(owner, { phone: P_PAGED, n: 500 })).body.events as Json[]
    const tiedAt = all[0]!.at as string
    const older = (await timeline(owner, { phone: P_PAGED, n: 500, before: tiedAt })).body.events as Json[]
    expect(older).toHaveLength(all.length - 12)
    for (const e of older) expect(Date.parse(e.at)).toBeLessThan(Date.parse(tiedAt))
    // An unencoded + in a zone offset survives the query string.
    const res = await a.call(
      "GET",
      `/api/timeline?phone=${encodeURIComponent(P_PAGED)}&n=500&before=2999-01-01T00:00:00+00:00`,
      { token: owner.token },
    )
    expect(((await res.json()) as Json).count).toBe(all.length)
  })
})

describe("a phone number's events", () => {
  it("finds the number however it is written (E.164 in the tenant's country)", async () => {
    const e164 = (await timeline(owner, { phone: P_DISCOUNT, n: 500 })).body
    const national = (await timeline(owner, { phone: "(202) 555-0107", n: 500 })).body
    expect(national).toEqual(e164)
    // An unencoded + arrives as a space.
    const raw = await a.call("GET", `/api/timeline?phone=+12025550107&n=500`, { token: owner.token })
    expect(await raw.json()).toEqual(e164)
  })

  it("has the call, its turn summary, and the approval requested and resolved", async () => {
    const { body } = await timeline(owner, { phone: P_DISCOUNT, n: 500 })
    const kinds = (body.events as Json[]).map((e) => e.kind)
    expect(kinds.filter((k) => k === "call")).toHaveLength(1)
    expect(kinds.filter((k) => k === "turns")).toHaveLength(1)
    expect(kinds.filter((k) => k === "decision")).toHaveLength(2)
    for (const e of body.events as Json[]) {
      expect(Object.keys(e).sort()).toEqual([
        "at",
        "cursor",
        "direction",
        "kind",
        "payload",
        "run_id",
        "summary",
        "workflow_id",
      ])
      expect(e.at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
      expect(["inbound", "outbound"]).toContain(e.direction)
      expect(e).toMatchObject({ workflow_id: workflowId, run_id: runId })
    }

    const [dbCall] = await srv.sql<[Json]>`select * from calls where run_id = ${runId} and phone_e164 = ${P_DISCOUNT}`
    const callEv = (body.events as Json[]).find((e) => e.kind === "call")!
    expect(callEv.direction).toBe("outbound")
    expect(callEv.payload).toMatchObject({
      call_id: dbCall.id,
      attempt: 1,
      outcome: dbCall.outcome,
      connected_seconds: dbCall.connected_seconds,
      cost_minor: dbCall.cost_minor,
      target_id: dbCall.target_id,
    })
    expect(callEv.summary).toMatch(/^Call answered — .+, (\d+ min( \d+ s)?|\d+ s)$/)
    expect(callEv.at).toBe(new Date(dbCall.started_at).toISOString())

    const turnsEv = (body.events as Json[]).find((e) => e.kind === "turns")!
    const turns = await srv.sql<
      { speaker: string; text: string }[]
    >`select speaker, text from turns where call_id = ${dbCall.id} order by turn_index`
    expect(turnsEv.payload).toMatchObject({
      call_id: dbCall.id,
      count: turns.length,
      first_agent_line: turns.find((t) => t.speaker === "agent")!.text,
      last_callee_line: turns.filter((t) => t.speaker === "callee").at(-1)!.text,
    })
    expect(turnsEv.summary).toMatch(new RegExp(`^${turns.length} turns — agent: `))

    const requested = (body.events as Json[]).find((e) => e.kind === "decision" && e.payload.stage === "requested")!
    const resolved = (body.events as Json[]).find((e) => e.kind === "decision" && e.payload.stage === "resolved")!
    expect(requested).toMatchObject({
      direction: "outbound",
      payload: { proposed_action: "concession", status: "approved", target_phone: P_DISCOUNT, call_id: dbCall.id },
    })
    expect(requested.summary).toMatch(/^Approval requested for a concession of \$\d+\.\d{2}$/)
    expect(resolved).toMatchObject({
      direction: "inbound",
      payload: { approval_id: requested.payload.approval_id, decided_by: owner.userId, note: "fine" },
    })
    expect(resolved.summary).toContain(`Approved a concession`)
    expect(resolved.summary).toContain(owner.email)
    expect(Date.parse(resolved.at)).toBeGreaterThanOrEqual(Date.parse(requested.at))
  })

  it("tells each unanswered attempt", async () => {
    const { body } = await timeline(owner, { phone: P_NO_ANSWER, n: 500 })
    const calls = (body.events as Json[]).filter((e) => e.kind === "call")
    // How many attempts is the dialer's retry policy; each is told, newest first.
    const [{ n }] = await srv.sql<
      [{ n: number }]
    >`select count(*)::int as n from calls where run_id = ${runId} and phone_e164 = ${P_NO_ANSWER}`
    expect(n).toBeGreaterThanOrEqual(2)
    const attempts = Array.from({ length: n }, (_, i) => n - i)
    expect(calls.map((c) => c.summary)).toEqual(attempts.map((k) => `No answer (attempt ${k})`))
    expect(calls.map((c) => c.payload.attempt)).toEqual(attempts)
    for (const c of calls) expect(c.payload).toMatchObject({ outcome: "no_answer", connected_seconds: 0 })
    expect((body.events as Json[]).filter((e) => e.kind === "turns")).toHaveLength(0)
  })

  it("has the DNC addition and the dialer's skip", async () => {
    const { body } = await timeline(owner, { phone: P_DNC, n: 500 })
    const events = body.events as Json[]
    expect(events.map((e) => e.kind)).toEqual(["dialer", "dnc"])
    const [dialer, dnc] = events as [Json, Json]
    expect(dnc).toMatchObject({
      direction: "outbound",
      workflow_id: null,
      run_id: null,
      payload: { phone_e164: P_DNC, source: "manual", reason: "asked by email" },
    })
    expect(dnc.summary).toBe("Added to the do-not-call list (manual): asked by email")
    expect(dialer).toMatchObject({
      direction: "outbound",
      workflow_id: workflowId,
      run_id: runId,
      payload: { decision: "skip", reason: "dnc_listed" },
    })
    expect(dialer.summary).toBe("Dialer skipped the number: dnc listed")
  })
})

describe("a user's events", () => {
  it("has signup, verification email, verification, workflow, consent, API keys and decisions", async () => {
    const { status, body } = await timeline(owner, { user_id: owner.userId, n: 500 })
    expect(status).toBe(200)
    const events = body.events as Json[]
    const byKind = (k: string) => events.filter((e) => e.kind === k)

    const account = byKind("account")
    expect(account.map((e) => e.payload.stage).sort()).toEqual(["email_verified", "signup"])
    expect(account.find((e) => e.payload.stage === "signup")).toMatchObject({
      direction: "inbound",
      summary: "Signed up and created the workspace",
      payload: { user_id: owner.userId, email: owner.email, role: "owner" },
    })

    const [email] = byKind("email")
    expect(email).toMatchObject({
      direction: "outbound",
      workflow_id: null,
      summary: `Verification email sent to ${owner.email}`,
      payload: { to: owner.email, purpose: "verify_email" },
    })

    expect(byKind("workflow")).toEqual([
      expect.objectContaining({
        direction: "inbound",
        workflow_id: workflowId,
        run_id: null,
        payload: expect.objectContaining({ workflow_id: workflowId }),
      }),
    ])
    expect(byKind("consent")).toEqual([
      expect.objectContaining({
        direction: "inbound",
        workflow_id: workflowId,
        payload: expect.objectContaining({ consent_attestation_text: "All numbers opted in." }),
      }),
    ])

    const keys = byKind("api_key")
    expect(keys.map((k) => k.payload.action)).toEqual(["revoked", "created"])
    for (const k of keys)
      expect(k).toMatchObject({ direction: "inbound", payload: { key_id: keyId, name: "reporting", scope: "read" } })
    expect(keys[0]!.payload.revoked_reason).toBe("rotated")
    expect(keys[1]!.summary).toMatch(/^Created API key “reporting” \(svc_live_\w+…\)$/)

    const decisions = byKind("decision")
    expect(decisions).toHaveLength(1)
    expect(decisions[0]).toMatchObject({
      direction: "inbound",
      workflow_id: workflowId,
      run_id: runId,
      payload: { stage: "resolved", status: "approved", decided_by: owner.userId, target_phone: P_DISCOUNT },
    })

    // The account began it all.
    expect(events.at(-1)!.payload.stage === "signup" || events.at(-1)!.kind === "email").toBe(true)
  })

  it("finds the same user by email, in any case", async () => {
    const byId = (await timeline(owner, { user_id: owner.userId, n: 500 })).body
    const byEmail = (await timeline(owner, { email: owner.email.toUpperCase(), n: 500 })).body
    expect(byEmail).toEqual(byId)
  })

  it("pages a user's events like a phone's", async () => {
    const all = (await timeline(owner, { user_id: owner.userId, n: 500 })).body.events as Json[]
    const seen: Json[] = []
    let before: string | null = null
    do {
      const res: { body: Json } = await timeline(owner, {
        user_id: owner.userId,
        n: 2,
        ...(before !== null && { before }),
      })
      seen.push(...(res.body.events as Json[]))
      before = res.body.next_before
    } while (before !== null)
    expect(seen).toEqual(all)
  })

  it("is empty for an unknown email, not an error", async () => {
    const res = await timeline(owner, { email: uniqueEmail("nobody") })
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ count: 0, events: [], next_before: null })
  })
})

describe("tenant isolation", () => {
  it("shows another workspace nothing of this one's phone numbers", async () => {
    for (const phone of [P_DISCOUNT, P_NO_ANSWER, P_DNC, P_PAGED]) {
      const { body } = await timeline(other, { phone, n: 500 })
      for (const e of body.events as Json[]) expect(e.kind).toBe("dnc")
    }
    // Its own DNC entry for P_DISCOUNT, and nothing else.
    const mine = (await timeline(other, { phone: P_DISCOUNT })).body
    expect(mine.count).toBe(1)
    expect(mine.events[0].payload.source).toBe("manual")
    expect((await timeline(other, { phone: P_PAGED })).body.count).toBe(0)
    // And this workspace sees none of the other's entries.
    const owners = (await timeline(owner, { phone: P_DISCOUNT, n: 500 })).body.events as Json[]
    expect(owners.filter((e) => e.kind === "dnc")).toHaveLength(0)
    expect((await timeline(owner, { phone: P_OTHER })).body.count).toBe(0)
  })

  it("treats another workspace's user as unknown: an empty list", async () => {
    for (const q of [{ user_id: owner.userId }, { email: owner.email }]) {
      const res = await timeline(other, q)
      expect(res.status).toBe(200)
      expect(res.body).toEqual({ count: 0, events: [], next_before: null })
    }
    expect((await timeline(owner, { user_id: other.userId })).body.count).toBe(0)
    expect((await timeline(owner, { email: other.email })).body.count).toBe(0)
  })

  it("serves a read-scoped API key of the workspace", async () => {
    const key = await a.createKey(owner, { name: "reader", scope: "read" })
    const res = await a.call("GET", `/api/timeline?phone=${encodeURIComponent(P_DISCOUNT)}`, {
      headers: { authorization: `Bearer ${key.secret}` },
    })
    expect(res.status).toBe(200)
    expect(((await res.json()) as Json).count).toBeGreaterThan(0)
    expect((await a.call("GET", `/api/timeline?phone=${encodeURIComponent(P_DISCOUNT)}`)).status).toBe(401)
  })
})
