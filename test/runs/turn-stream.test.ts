import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Bus } from "../../src/platform/Bus.js"
import { turnSubject } from "../../src/platform/subjects.js"
import { TurnStreams } from "../../src/turns/TurnStreams.js"
import type { TurnMessage } from "../../src/turns/turn.message.js"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { sse } from "../support/sse-client.js"

const SYSTEM_KEY = "system-key-for-turn-tests"
let srv: TestServer
let a: ReturnType<typeof api>
let owner: Session
let other: Session

beforeAll(async () => {
  // The product's 1 MiB cap: the readers here share the server's event loop, and on a loaded machine a
  // 64 KiB cap cut a reader that was only a moment behind (CI: one reader of the drop test stalled).
  srv = await startTestServer({ env: { SYSTEM_KEY, SSE_MAX_BUFFER_BYTES: String(1024 * 1024) } })
  a = api(srv)
  owner = await a.signup({ country: "US" })
  other = await a.signup({ country: "US" })
})
afterAll(async () => srv?.stop())

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

/** A run row of the owner's (no runtime involved: turns come through /internal/turns). */
async function newRun(s: Session = owner): Promise<{ runId: number; workflowId: number }> {
  const w = (await (
    await a.call("POST", "/api/workflows", { token: s.token, body: { nl_prompt: "Check in with our customers." } })
  ).json()) as Json
  const [run] = await srv.sql<
    [{ id: number }]
  >`insert into runs (tenant_id, workflow_id, status) values (${s.tenantId}, ${w.id}, 'running') returning id`
  return { runId: run.id, workflowId: w.id }
}

const ingest = (tenantId: number, body: Json, key = SYSTEM_KEY) =>
  fetch(`${srv.url}/internal/turns`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-system-key": key, "x-tenant-id": String(tenantId) },
    body: JSON.stringify(body),
  })

const turn = (runId: number, targetId: number, seq: number, extra: Json = {}) => ({
  run_id: runId,
  target_id: targetId,
  seq,
  speaker: seq % 2 ? "callee" : "agent",
  text: `line ${seq}`,
  ...extra,
})

const streamUrl = (runId: number, q = "") => `${srv.url}/api/runs/${runId}/turns/stream${q}`
const auth = (s: Session = owner) => ({ authorization: `Bearer ${s.token}` })

const expectConsecutive = (seqs: number[], from: number, to: number) =>
  expect(seqs).toEqual(Array.from({ length: to - from + 1 }, (_, i) => from + i))

describe("the turn stream", () => {
  it("sends history and then live turns with no gap and no duplicate, while turns keep coming", async () => {
    const { runId } = await newRun()
    // Emit 200 turns one after another; clients connect at different points along the way.
    const clients: ReturnType<typeof sse>[] = []
    for (let i = 0; i < 200; i++) {
      const res = await ingest(owner.tenantId, turn(runId, 7, i))
      expect(res.status).toBe(201)
      if (i % 40 === 10) clients.push(sse(streamUrl(runId), auth()))
    }
    for (const c of clients) {
      expect(await c.status).toBe(200)
      await c.waitFor(200)
      const seqs = c.json<TurnMessage>().map((t) => t.seq)
      expectConsecutive(seqs, 1, 200)
      expect(c.events.map((e) => Number(e.id))).toEqual(seqs)
      c.close()
    }
  })

  it("delivers every turn to every client under concurrent emission", async () => {
    const { runId } = await newRun()
    const first = sse(streamUrl(runId), auth())
    await first.status
    const bursts = Array.from({ length: 120 }, (_, i) =>
      ingest(owner.tenantId, turn(runId, 1 + (i % 3), i, { outcome_id: `o-${i % 3}` })),
    )
    const late = sse(streamUrl(runId), auth())
    await Promise.all(bursts)
    for (const c of [first, late]) {
      await c.waitFor(120)
      const seqs = c.json<TurnMessage>().map((t) => t.seq)
      expect(new Set(seqs).size).toBe(seqs.length)
      expect([...seqs].sort((x, y) => x - y)).toEqual(Array.from({ length: 120 }, (_, i) => i + 1))
      c.close()
    }
  })

  it("resumes after since_seq, and after Last-Event-ID as a browser would", async () => {
    const { runId } = await newRun()
    for (let i = 0; i < 10; i++) await ingest(owner.tenantId, turn(runId, 3, i))
    const bySince = sse(streamUrl(runId, "?since_seq=6"), auth())
    await bySince.waitFor(4)
    expect(bySince.json<TurnMessage>().map((t) => t.seq)).toEqual([7, 8, 9, 10])
    const byHeader = sse(streamUrl(runId), { ...auth(), "last-event-id": "8" })
    await byHeader.waitFor(2)
    expect(byHeader.json<TurnMessage>().map((t) => t.seq)).toEqual([9, 10])
    await ingest(owner.tenantId, turn(runId, 3, 10))
    await bySince.waitFor(5)
    await byHeader.waitFor(3)
    expect(byHeader.json<TurnMessage>().at(-1)!.seq).toBe(11)
    for (const c of [bySince, byHeader]) c.close()
    const bad = await fetch(streamUrl(runId, "?since_seq=-2"), { headers: auth() })
    expect(bad.status).toBe(422)
  })

  it("filters by target_id, in history and live", async () => {
    const { runId } = await newRun()
    for (let i = 0; i < 6; i++) await ingest(owner.tenantId, turn(runId, i % 2 ? 11 : 12, i))
    const c = sse(streamUrl(runId, "?target_id=11"), auth())
    await c.waitFor(3)
    await ingest(owner.tenantId, turn(runId, 12, 6))
    await ingest(owner.tenantId, turn(runId, 11, 7))
    await c.waitFor(4)
    expect(c.json<TurnMessage>().map((t) => t.target_id)).toEqual([11, 11, 11, 11])
    expect(c.json<TurnMessage>().map((t) => t.seq)).toEqual([2, 4, 6, 8])
    c.close()
  })

  it("shares one bus subscription per run among its clients, and drops it when the last leaves", async () => {
    const hub = await srv.running.runtime.runPromise(TurnStreams)
    const { runId } = await newRun()
    const clients = Array.from({ length: 5 }, () => sse(streamUrl(runId), auth()))
    await Promise.all(clients.map((c) => c.status))
    await new Promise((r) => setTimeout(r, 100))
    const before = hub.subscriptions
    expect(hub.watching(owner.tenantId, runId)).toBe(5)
    for (const c of clients) c.close()
    await new Promise((r) => setTimeout(r, 200))
    expect(hub.watching(owner.tenantId, runId)).toBeUndefined()
    expect(hub.subscriptions).toBe(before - 1)
  })

  it("drops a client that stopped reading once its buffer passes the cap, without delaying the others", async () => {
    const { runId } = await newRun()
    const bus = await srv.running.runtime.runPromise(Bus)
    const stalled = sse(streamUrl(runId), auth())
    const readers = [sse(streamUrl(runId), auth()), sse(streamUrl(runId), auth())]
    await Promise.all([stalled, ...readers].map((c) => c.status))
    await new Promise((r) => setTimeout(r, 100))
    stalled.stall()
    const big = "x".repeat(16_000)
    const N = 2000 // ~32 MB: far past what loopback socket buffers hold, and the 1 MiB cap
    for (let i = 1; i <= N; i++) {
      bus.publish(turnSubject(owner.tenantId, runId, 5), {
        turn_id: null,
        seq: i,
        run_id: runId,
        target_id: 5,
        call_id: null,
        turn_index: i,
        speaker: "agent",
        text: big,
        at: new Date().toISOString(),
      } satisfies TurnMessage)
      // A turn of the loop every 160 KB: the readers (in this process) read between batches.
      if (i % 10 === 0) await new Promise((r) => setImmediate(r))
    }
    // Every event reaches the readers while the stalled client still is not reading: it holds
    // nobody up (how fast is bench/sse's question, not this test's; the time allowed is generous
    // for a loaded machine).
    for (const r of readers) {
      await r.waitFor(N, 60_000)
      expectConsecutive(
        r.json<TurnMessage>().map((t) => t.seq),
        1,
        N,
      )
    }
    // The stalled client was cut off: its connection ends even though it never read.
    // The hub let the stalled client go; once it reads again it finds its stream cut short.
    const hub = await srv.running.runtime.runPromise(TurnStreams)
    expect(hub.watching(owner.tenantId, runId)).toBe(2)
    stalled.resume()
    await Promise.race([
      stalled.ended,
      new Promise((_, rej) => setTimeout(() => rej(new Error("stalled client's stream did not end")), 10_000)),
    ])
    expect(stalled.events.length).toBeLessThan(N)
    for (const r of readers) r.close()
  }, 90_000)

  it("is tenant-scoped and needs credentials; the session cookie works as EventSource sends it", async () => {
    const { runId } = await newRun()
    expect((await fetch(streamUrl(runId), { headers: auth(other) })).status).toBe(404)
    expect((await fetch(streamUrl(runId))).status).toBe(401)
    expect((await fetch(streamUrl(999_999_999), { headers: auth() })).status).toBe(404)
    await ingest(owner.tenantId, turn(runId, 1, 0))
    const byCookie = sse(streamUrl(runId), { cookie: owner.cookie })
    expect(await byCookie.status).toBe(200)
    await byCookie.waitFor(1)
    byCookie.close()
  })
})

describe("keepalive and idle close", () => {
  it("sends a comment when quiet and closes the stream after the idle limit", async () => {
    const fast = await startTestServer({ env: { SYSTEM_KEY, SSE_KEEPALIVE_MS: "150", SSE_IDLE_TIMEOUT_MS: "1200" } })
    try {
      const b = api(fast)
      const s = await b.signup()
      const w = (await (
        await b.call("POST", "/api/workflows", { token: s.token, body: { nl_prompt: "Say hello." } })
      ).json()) as Json
      const [run] = await fast.sql<
        [{ id: number }]
      >`insert into runs (tenant_id, workflow_id) values (${s.tenantId}, ${w.id}) returning id`
      const c = sse(`${fast.url}/api/runs/${run.id}/turns/stream`, { authorization: `Bearer ${s.token}` })
      expect(await c.status).toBe(200)
      const opened = Date.now()
      await new Promise((r) => setTimeout(r, 600))
      expect(c.comments.filter((x) => x === "keepalive").length).toBeGreaterThanOrEqual(2)
      await c.ended
      const lasted = Date.now() - opened
      expect(lasted).toBeGreaterThanOrEqual(1000)
      expect(lasted).toBeLessThan(4000)
    } finally {
      await fast.stop()
    }
  })
})

describe("live calls", () => {
  it("lists the workspace's calls in flight, with what their stream needs", async () => {
    const { runId, workflowId } = await newRun()
    const [target] = await srv.sql<[{ id: number }]>`insert into audience_targets (tenant_id, workflow_id, phone_e164)
      values (${owner.tenantId}, ${workflowId}, '+12025550177') returning id`
    const [rt] = await srv.sql<
      [{ id: number }]
    >`insert into run_targets (tenant_id, run_id, target_id, phone_e164, status)
      values (${owner.tenantId}, ${runId}, ${target.id}, '+12025550177', 'dialing') returning id`
    await srv.sql`insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id,
                    attempt, phone_e164, provider, owner_instance, status, answered_at)
                  values (${owner.tenantId}, ${runId}, ${workflowId}, ${rt.id}, ${target.id},
                          1, '+12025550177', 'sim', 'x', 'connected', now())`
    const mine = (await (await a.call("GET", "/api/runs/live", { token: owner.token })).json()) as Json
    const call = (mine.calls as Json[]).find((c) => c.run_id === runId)
    expect(call).toMatchObject({
      run_id: runId,
      target_id: target.id,
      status: "connected",
      stream_url: `/api/runs/${runId}/turns/stream?target_id=${target.id}`,
    })
    expect(mine.calls.length).toBeLessThanOrEqual(20)
    const theirs = (await (await a.call("GET", "/api/runs/live", { token: other.token })).json()) as Json
    expect((theirs.calls as Json[]).some((c) => c.run_id === runId)).toBe(false)
    await srv.sql`update calls set status = 'ended' where run_id = ${runId}`
    const after = (await (await a.call("GET", `/api/runs/live?run_id=${runId}`, { token: owner.token })).json()) as Json
    expect(after.calls).toEqual([])
  })
})

describe("POST /internal/turns", () => {
  it("stores, streams and answers 201; the same (outcome_id, seq) again changes nothing", async () => {
    const { runId } = await newRun()
    const c = sse(streamUrl(runId), auth())
    await c.status
    const body = turn(runId, 4, 0, { outcome_id: "ext-call-1", text: "Hello there" })
    const first = await ingest(owner.tenantId, body)
    expect(first.status).toBe(201)
    const stored = (await first.json()) as Json
    expect(stored).toMatchObject({
      seq: 1,
      run_id: runId,
      target_id: 4,
      turn_index: 0,
      text: "Hello there",
      outcome_id: "ext-call-1",
      duplicate: false,
    })
    const again = await ingest(owner.tenantId, body)
    expect(again.status).toBe(201)
    expect(await again.json()).toMatchObject({ seq: 1, duplicate: true })
    const concurrent = await Promise.all(
      Array.from({ length: 5 }, () => ingest(owner.tenantId, turn(runId, 4, 1, { outcome_id: "ext-call-1" }))),
    )
    const seqs = await Promise.all(concurrent.map(async (r) => ((await r.json()) as Json).seq))
    expect(new Set(seqs).size).toBe(1)
    const rows = await srv.sql`select id, seq from turns where run_id = ${runId} order by seq`
    expect(rows).toHaveLength(2)
    // The stored turn's id, which feedback on a turn names, is in the answer and in the stream.
    expect(stored.turn_id).toBe(Number(rows[0]!.id))
    await c.waitFor(2)
    expect(c.json<TurnMessage>().map((t) => t.turn_id)).toEqual(rows.map((r) => Number(r.id)))
    await new Promise((r) => setTimeout(r, 100))
    expect(c.events).toHaveLength(2)
    c.close()
  })

  it("refuses bad keys, a missing tenant, another tenant's run and bad bodies", async () => {
    const { runId } = await newRun()
    expect((await ingest(owner.tenantId, turn(runId, 1, 0), "wrong-key-wrong-key")).status).toBe(401)
    const noKey = await fetch(`${srv.url}/internal/turns`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-tenant-id": String(owner.tenantId) },
      body: JSON.stringify(turn(runId, 1, 0)),
    })
    expect(noKey.status).toBe(401)
    const noTenant = await fetch(`${srv.url}/internal/turns`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-system-key": SYSTEM_KEY },
      body: JSON.stringify(turn(runId, 1, 0)),
    })
    expect(noTenant.status).toBe(422)
    expect((await ingest(other.tenantId, turn(runId, 1, 0))).status).toBe(404)
    expect((await ingest(owner.tenantId, { ...turn(runId, 1, 0), speaker: "robot" })).status).toBe(422)
    expect((await ingest(owner.tenantId, { ...turn(runId, 1, 0), text: "" })).status).toBe(422)
    const [{ n }] = await srv.sql<[{ n: number }]>`select count(*)::int as n from turns where run_id = ${runId}`
    expect(n).toBe(0)
  })

  it("is off (404) when SYSTEM_KEY is unset", async () => {
    const off = await startTestServer()
    try {
      const res = await fetch(`${off.url}/internal/turns`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-system-key": SYSTEM_KEY, "x-tenant-id": "1" },
        body: "{}",
      })
      expect(res.status).toBe(404)
    } finally {
      await off.stop()
    }
  })
})
