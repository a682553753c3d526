// Turn ingestion through the process's turn writer: POST /internal/turns in its batch form, group
// commit under concurrent requests, two writers on one run, and a watcher's hub filling a hole in
// the seqs the bus delivered from Postgres.
import { pino } from "pino"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Bus } from "../../src/platform/Bus.js"
import { turnSubject } from "../../src/platform/subjects.js"
import { TurnStreams } from "../../src/turns/TurnStreams.js"
import type { TurnMessage } from "../../src/turns/turn.message.js"
import { TurnWriter } from "../../src/turns/turn-writer.js"
import { api, type Session, SYSTEM_KEY } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"
import { sse } from "../support/sse-client.js"

let srv: TestServer
let a: ReturnType<typeof api>
let owner: Session
let other: Session

beforeAll(async () => {
  srv = await sharedTestServer({ env: { SYSTEM_KEY } })
  a = api(srv)
  owner = await a.signup({ country: "US" })
  other = await a.signup({ country: "US" })
})
afterAll(async () => srv?.stop())

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

async function newRun(s: Session = owner): Promise<number> {
  const w = (await (
    await a.call("POST", "/api/workflows", { token: s.token, body: { nl_prompt: "Check in with our customers." } })
  ).json()) as Json
  const [run] = await srv.sql<
    [{ id: number }]
  >`insert into runs (tenant_id, workflow_id, status) values (${s.tenantId}, ${w.id}, 'running') returning id`
  return run.id
}

const ingest = (tenantId: number, body: unknown) =>
  fetch(`${srv.url}/internal/turns`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-system-key": SYSTEM_KEY, "x-tenant-id": String(tenantId) },
    body: JSON.stringify(body),
  })

const turn = (runId: number, seq: number, extra: Json = {}) => ({
  run_id: runId,
  target_id: 7,
  seq,
  speaker: seq % 2 ? "callee" : "agent",
  text: `line ${seq}`,
  ...extra,
})

const streamUrl = (runId: number) => `${srv.url}/api/runs/${runId}/turns/stream`
const auth = {
  get authorization() {
    return `Bearer ${owner.token}`
  },
}
const seqsOf = async (runId: number) =>
  (await srv.sql<{ seq: number }[]>`select seq from turns where run_id = ${runId} order by seq`).map((r) =>
    Number(r.seq),
  )
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)

describe("POST /internal/turns with an array", () => {
  it("stores a batch in order with consecutive seqs, answers {turns} in input order and streams them", async () => {
    const runId = await newRun()
    const c = sse(streamUrl(runId), { authorization: auth.authorization })
    await c.status
    const res = await ingest(
      owner.tenantId,
      [0, 1, 2].map((i) => turn(runId, i, { outcome_id: "ext-9" })),
    )
    expect(res.status).toBe(201)
    const body = (await res.json()) as Json
    expect(body.turns.map((t: Json) => [t.seq, t.turn_index, t.duplicate])).toEqual([
      [1, 0, false],
      [2, 1, false],
      [3, 2, false],
    ])
    expect(body.turns[0]).toMatchObject({ run_id: runId, target_id: 7, outcome_id: "ext-9", text: "line 0" })
    // Again, with one new turn and a key repeated inside the batch: the known ones are answered as
    // stored, the new one takes the next seq (no seq is spent on a duplicate).
    const again = await ingest(owner.tenantId, [
      turn(runId, 1, { outcome_id: "ext-9" }),
      turn(runId, 3, { outcome_id: "ext-9" }),
      turn(runId, 3, { outcome_id: "ext-9", text: "a retry" }),
    ])
    expect(again.status).toBe(201)
    const answered = ((await again.json()) as Json).turns as Json[]
    expect(answered.map((t) => [t.seq, t.duplicate])).toEqual([
      [2, true],
      [4, false],
      [4, true],
    ])
    expect(answered[2]!.text).toBe("line 3")
    expect(await seqsOf(runId)).toEqual([1, 2, 3, 4])
    await c.waitFor(4)
    expect(c.json<TurnMessage>().map((t) => t.seq)).toEqual([1, 2, 3, 4])
    await new Promise((r) => setTimeout(r, 100))
    expect(c.events).toHaveLength(4)
    c.close()
  })

  it("refuses an empty array, more than 500 items, and any bad item, storing nothing", async () => {
    const runId = await newRun()
    const { runId: otherRun } = { runId: await newRun(other) }
    expect((await ingest(owner.tenantId, [])).status).toBe(422)
    const tooMany = await ingest(
      owner.tenantId,
      range(0, 500).map((i) => turn(runId, i)),
    )
    expect(tooMany.status).toBe(422)
    expect(((await tooMany.json()) as Json).code).toBe("VALIDATION_FAILED")
    expect((await ingest(owner.tenantId, [turn(runId, 0), { ...turn(runId, 1), speaker: "robot" }])).status).toBe(422)
    expect((await ingest(owner.tenantId, [turn(runId, 0), turn(runId, 1, { text: "nul \u0000 byte" })])).status).toBe(
      422,
    )
    // A run of another workspace anywhere in the batch: 404, nothing stored.
    expect((await ingest(owner.tenantId, [turn(runId, 0), turn(otherRun, 1)])).status).toBe(404)
    // A call that is not the run's: 422 naming the item.
    const badCall = await ingest(owner.tenantId, [turn(runId, 0), turn(runId, 1, { call_id: 999_999 })])
    expect(badCall.status).toBe(422)
    expect(((await badCall.json()) as Json).field).toBe("1.call_id")
    expect(await seqsOf(runId)).toEqual([])
    expect(await seqsOf(otherRun)).toEqual([])
    // Exactly 500 is fine.
    const full = await ingest(
      owner.tenantId,
      range(0, 499).map((i) => turn(runId, i)),
    )
    expect(full.status).toBe(201)
    expect(await seqsOf(runId)).toEqual(range(1, 500))
  })
})

describe("the turn writer", () => {
  it("stores concurrent single requests to one run with unique, gap-free seqs, streamed in order", async () => {
    const runId = await newRun()
    const c = sse(streamUrl(runId), { authorization: auth.authorization })
    await c.status
    const n = 300
    const res = await Promise.all(range(0, n - 1).map((i) => ingest(owner.tenantId, turn(runId, i))))
    expect(res.every((r) => r.status === 201)).toBe(true)
    const seqs = (await Promise.all(res.map(async (r) => ((await r.json()) as Json).seq as number))).sort(
      (x, y) => x - y,
    )
    expect(seqs).toEqual(range(1, n))
    expect(await seqsOf(runId)).toEqual(range(1, n))
    await c.waitFor(n)
    expect(c.json<TurnMessage>().map((t) => t.seq)).toEqual(range(1, n))
    c.close()
  })

  it("keeps one run's seqs in commit order with two writers, and a watcher gets every turn in seq order", async () => {
    const runId = await newRun()
    const c = sse(streamUrl(runId), { authorization: auth.authorization })
    await c.status
    const bus = await srv.running.runtime.runPromise(Bus)
    const log = pino({ level: "silent" })
    const writers = [new TurnWriter(srv.sql, bus, log), new TurnWriter(srv.sql, bus, log)]
    const perWriter = 150
    const results = await Promise.all(
      writers.map(async (w, k) => {
        const out: number[] = []
        for (let i = 0; i < perWriter; ) {
          // Bursts of 1–20 turns, some awaited, some not, so the two writers' statements interleave.
          const burst = Math.min(perWriter - i, 1 + ((i * 7 + k * 3) % 20))
          const items = range(i, i + burst - 1).map((j) => ({
            tenantId: owner.tenantId,
            runId,
            targetId: 10 + k,
            callId: null,
            turnIndex: j,
            speaker: "agent" as const,
            text: `writer ${k} turn ${j}`,
            outcomeId: `writer-${k}`,
            at: new Date(),
          }))
          i += burst
          const stored = await w.write(items)
          out.push(...stored.map((s) => s.turn.seq))
        }
        return out
      }),
    )
    // Each writer's turns got increasing seqs in the order it wrote them; together, every seq once.
    for (const seqs of results) expect(seqs).toEqual([...seqs].sort((x, y) => x - y))
    expect([...results[0]!, ...results[1]!].sort((x, y) => x - y)).toEqual(range(1, 2 * perWriter))
    expect(await seqsOf(runId)).toEqual(range(1, 2 * perWriter))
    await c.waitFor(2 * perWriter)
    expect(c.json<TurnMessage>().map((t) => t.seq)).toEqual(range(1, 2 * perWriter))
    c.close()
  })

  it("fills a hole in the seqs the bus delivered from Postgres, and drops the late one", async () => {
    const runId = await newRun()
    const c = sse(streamUrl(runId), { authorization: auth.authorization })
    await c.status
    const bus = await srv.running.runtime.runPromise(Bus)
    const log = pino({ level: "silent" })
    // Stored without publishing (as another process's writer would have, its publish still on the way).
    const published: TurnMessage[] = []
    const quiet = new TurnWriter(
      srv.sql,
      { ...bus, publish: (_s: string, m: unknown) => published.push(m as TurnMessage) },
      log,
    )
    const mk = (i: number) => ({
      tenantId: owner.tenantId,
      runId,
      targetId: 3,
      callId: null,
      turnIndex: i,
      speaker: "callee" as const,
      text: `turn ${i}`,
      outcomeId: null,
      at: new Date(),
    })
    await quiet.write([mk(0), mk(1), mk(2), mk(3)])
    const subject = turnSubject(owner.tenantId, runId, 3)
    bus.publish(subject, published[0]!)
    await c.waitFor(1)
    // 3 and 4 are missing on the bus when 4 arrives... but 2 and 3 are readable.
    bus.publish(subject, published[3]!)
    await c.waitFor(4)
    bus.publish(subject, published[1]!)
    bus.publish(subject, published[2]!)
    await new Promise((r) => setTimeout(r, 200))
    expect(c.json<TurnMessage>().map((t) => t.seq)).toEqual([1, 2, 3, 4])
    expect(c.json<TurnMessage>()[1]).toMatchObject({ text: "turn 1", target_id: 3 })
    c.close()
  })

  it("fills the seqs before a stream's first live turn when a later one reaches the bus first", async () => {
    // Two writers' first turns: seq 1's publish is still on the way when seq 2's arrives. The stream
    // starts at the run's last stored seq (0 here), so 2 is past a hole, not where it starts.
    const runId = await newRun()
    const c = sse(streamUrl(runId), { authorization: auth.authorization })
    await c.status
    const hub = await srv.running.runtime.runPromise(TurnStreams)
    await expect.poll(() => hub.watching(owner.tenantId, runId)).toBe(1)
    await new Promise((r) => setTimeout(r, 100))
    const bus = await srv.running.runtime.runPromise(Bus)
    const published: TurnMessage[] = []
    const quiet = new TurnWriter(
      srv.sql,
      { ...bus, publish: (_s: string, m: unknown) => published.push(m as TurnMessage) },
      pino({ level: "silent" }),
    )
    const mk = (i: number) => ({
      tenantId: owner.tenantId,
      runId,
      targetId: 4,
      callId: null,
      turnIndex: i,
      speaker: "agent" as const,
      text: `first ${i}`,
      outcomeId: null,
      at: new Date(),
    })
    await quiet.write([mk(0)])
    await quiet.write([mk(1), mk(2)])
    const subject = turnSubject(owner.tenantId, runId, 4)
    bus.publish(subject, published[1]!)
    bus.publish(subject, published[2]!)
    await c.waitFor(3)
    bus.publish(subject, published[0]!)
    await new Promise((r) => setTimeout(r, 200))
    expect(c.json<TurnMessage>().map((t) => t.seq)).toEqual([1, 2, 3])
    expect(c.json<TurnMessage>()[0]).toMatchObject({ text: "first 0" })
    c.close()
  })
})
