// Event streams open at once are capped per API key or session and per workspace
// (SSE_MAX_STREAMS_PER_KEY, SSE_MAX_STREAMS_PER_WORKSPACE; here 3 and 5): past a cap, 429
// RATE_LIMITED with Retry-After in the contract's shape, before any stream head and without taking a
// slot; a slot comes back once when its stream ends, however it ends; /metrics shows the counts.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { STREAM_RETRY_AFTER_SECONDS, StreamCaps } from "../../api/pipeline/stream-caps.js"
import { json, type StreamWriter, stream } from "../../api/reply.js"
import type { Principal } from "../../src/auth/principal.js"
import { api } from "../support/clients.js"
import { startTestServer, stopSharedServers, type TestServer } from "../support/harness.js"
import { type SseClient, sse } from "../support/sse-client.js"

// No shared server runs beside this suite: it reads the process's metrics, which would count theirs too.
beforeAll(stopSharedServers)

const PER_KEY = 3
const PER_WORKSPACE = 5
const TOKEN = "metrics-token-0123456789"

let srv: TestServer
let a: ReturnType<typeof api>
const opened: SseClient[] = []

beforeAll(async () => {
  srv = await startTestServer({
    env: {
      SSE_MAX_STREAMS_PER_KEY: String(PER_KEY),
      SSE_MAX_STREAMS_PER_WORKSPACE: String(PER_WORKSPACE),
      METRICS_TOKEN: TOKEN,
    },
  })
  a = api(srv)
})
afterAll(async () => {
  for (const c of opened) c.close()
  await srv?.stop()
})

const bearer = (secret: string) => ({ authorization: `Bearer ${secret}` })

/** A workspace with a run to watch and API keys with read scope. */
async function workspace(keys: number) {
  const owner = await a.signup({ country: "US" })
  const runId = await a.runningRun(owner)
  const secrets: string[] = []
  for (let i = 0; i < keys; i++) secrets.push((await a.createKey(owner, { name: `reader ${i}`, scope: "read" })).secret)
  return { owner, runId, keys: secrets }
}

/** A turn stream (or, with no run, the approval stream) whatever its answer; the caller checks the status. */
function attempt(headers: Record<string, string>, runId?: number): SseClient {
  const path = runId === undefined ? "/api/approvals/stream" : `/api/runs/${runId}/turns/stream`
  const c = sse(`${srv.url}${path}`, headers)
  opened.push(c)
  return c
}

async function open(headers: Record<string, string>, runId?: number): Promise<SseClient> {
  const c = attempt(headers, runId)
  expect(await c.status).toBe(200)
  return c
}

/** The refusal, read in full: 429, Retry-After, the contract's error body, and no event stream. */
async function expectRefused(headers: Record<string, string>, runId: number | undefined, reason: RegExp) {
  const path = runId === undefined ? "/api/approvals/stream" : `/api/runs/${runId}/turns/stream`
  const res = await fetch(`${srv.url}${path}`, { headers: { accept: "text/event-stream", ...headers } })
  expect(res.status).toBe(429)
  expect(res.headers.get("retry-after")).toBe(String(STREAM_RETRY_AFTER_SECONDS))
  expect(res.headers.get("content-type")).toMatch(/^application\/json/)
  const body = (await res.json()) as Record<string, unknown>
  expect(body).toEqual({
    error: expect.stringMatching(reason),
    code: "RATE_LIMITED",
    retry_after_seconds: STREAM_RETRY_AFTER_SECONDS,
  })
}

/** Opens a stream once the server has seen an earlier one go (it learns of a client's close asynchronously). */
async function openOnceFreed(headers: Record<string, string>, runId?: number): Promise<SseClient> {
  const deadline = Date.now() + 3_000
  for (;;) {
    const c = attempt(headers, runId)
    const status = await c.status
    if (status === 200) return c
    c.close()
    expect(status).toBe(429)
    if (Date.now() > deadline) throw new Error("no slot came back within 3 s")
    await new Promise((r) => setTimeout(r, 50))
  }
}

async function scrape(): Promise<Map<string, number>> {
  const res = await fetch(`${srv.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
  expect(res.status).toBe(200)
  const out = new Map<string, number>()
  for (const line of (await res.text()).split("\n")) {
    const m = /^(parley_sse_[a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line)
    if (m !== null) out.set(m[1]!, Number(m[2]))
  }
  return out
}
const OPEN = "parley_sse_streams_open"
const refused = (reason: string) => `parley_sse_streams_refused_total{reason="${reason}"}`

/** Waits until the open-streams gauge reads `n` (closes reach the server asynchronously). */
async function gaugeReaches(n: number): Promise<void> {
  const deadline = Date.now() + 3_000
  while ((await scrape()).get(OPEN) !== n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
  expect((await scrape()).get(OPEN)).toBe(n)
}

describe("event streams per API key and per workspace", () => {
  it("a key opens up to its cap, turn and approval streams together; the next is 429 with Retry-After", async () => {
    const before = await scrape()
    const w = await workspace(1)
    const key = bearer(w.keys[0]!)
    const streams = [await open(key, w.runId), await open(key, w.runId), await open(key)]
    await expectRefused(key, w.runId, /API key already has 3 event streams open/)
    await expectRefused(key, undefined, /API key already has 3 event streams open/)
    const after = await scrape()
    expect(after.get(OPEN)).toBe(before.get(OPEN)! + 3)
    expect(after.get(refused("key"))).toBe(before.get(refused("key"))! + 2)
    // The refusals took no slot: one closed stream lets exactly one more in.
    streams[0]!.close()
    await openOnceFreed(key, w.runId)
    await expectRefused(key, undefined, /API key/)
    for (const s of opened) s.close()
    await gaugeReaches(before.get(OPEN)!)
  })

  it("another key of the workspace opens until the workspace cap; another workspace is unaffected", async () => {
    const before = await scrape()
    const w = await workspace(3)
    const [k1, k2, k3] = w.keys.map(bearer)
    for (let i = 0; i < PER_KEY; i++) await open(k1!, w.runId)
    const k2Streams = [await open(k2!), await open(k2!, w.runId)]
    // Five open in the workspace: a third key, and the owner's session, are refused.
    await expectRefused(k2!, w.runId, /workspace already has 5 event streams open/)
    await expectRefused(k3!, undefined, /workspace already has 5 event streams open/)
    await expectRefused(bearer(w.owner.token), undefined, /workspace/)
    expect((await scrape()).get(refused("workspace"))).toBe(before.get(refused("workspace"))! + 3)

    const other = await workspace(1)
    const otherKey = bearer(other.keys[0]!)
    for (let i = 0; i < PER_KEY; i++) await open(otherKey, other.runId)
    await expectRefused(otherKey, other.runId, /API key/)

    // One of the workspace's streams closing lets another key in.
    k2Streams[0]!.close()
    await openOnceFreed(k3!, w.runId)
    await expectRefused(k3!, undefined, /workspace/)
    for (const s of opened) s.close()
    await gaugeReaches(before.get(OPEN)!)
  })

  it("a session has its own cap (cookie or bearer alike); the user's other session has another", async () => {
    const before = await scrape()
    const owner = await a.signup({ country: "US" })
    const second = await a.login(owner.email, owner.password)
    await open({ cookie: owner.cookie })
    await open(bearer(owner.token))
    await open({ cookie: owner.cookie })
    await expectRefused(bearer(owner.token), undefined, /session already has 3 event streams open/)
    expect((await scrape()).get(refused("session"))).toBe(before.get(refused("session"))! + 1)
    await open(bearer(second.token))
    for (const s of opened) s.close()
    await gaugeReaches(before.get(OPEN)!)
  })

  it("a stream the server ends (the key revoked) gives its slots back to the workspace", async () => {
    const before = await scrape()
    const w = await workspace(0)
    const doomed = await a.createKey(w.owner, { name: "doomed", scope: "read" })
    const kept = bearer((await a.createKey(w.owner, { name: "kept", scope: "read" })).secret)
    const ended = [await open(bearer(doomed.secret), w.runId), await open(bearer(doomed.secret))]
    await open(kept, w.runId)
    await open(kept)
    await open(bearer(w.owner.token))
    await expectRefused(kept, w.runId, /workspace/)
    expect((await a.call("POST", `/api-keys/${doomed.id}/revoke`, { token: w.owner.token })).status).toBe(200)
    await Promise.all(ended.map((c) => c.ended))
    await openOnceFreed(kept, w.runId)
    await open(bearer(w.owner.token))
    await expectRefused(bearer(w.owner.token), undefined, /workspace/)
    for (const s of opened) s.close()
    await gaugeReaches(before.get(OPEN)!)
  })

  it("a HEAD of a stream route is answered and holds no slot", async () => {
    const w = await workspace(1)
    const key = bearer(w.keys[0]!)
    for (let i = 0; i < PER_KEY + 2; i++) {
      const res = await fetch(`${srv.url}/api/approvals/stream`, { method: "HEAD", headers: key })
      expect(res.status).toBe(200)
    }
    for (let i = 0; i < PER_KEY; i++) await open(key)
    for (const s of opened) s.close()
  })
})

describe("StreamCaps", () => {
  const key = (keyId: number, tenantId: number): Principal => ({
    kind: "api_key",
    keyId,
    tenantId,
    scope: "read",
    expiresAt: null,
  })

  /** A writer that closes when told, as the server's does (client gone, end, shutdown). */
  function writer() {
    const handlers: Array<() => void> = []
    const w: StreamWriter & { close(): void } = {
      closed: false,
      write: async () => true,
      bufferedBytes: () => 0,
      onClose: (cb) => handlers.push(cb),
      end: () => w.close(),
      close: () => {
        for (const h of handlers.splice(0)) h()
      },
    }
    return w
  }
  const events = () => stream("text/event-stream; charset=utf-8", async () => {})

  it("gives a slot back once, whether the stream closes, the server lets go of it, or both", async () => {
    const caps = new StreamCaps({ perCredential: 2, perWorkspace: 10 })
    const first = caps.admit(events(), key(1, 1))
    const second = caps.admit(events(), key(1, 1))
    if (!first.ok || !second.ok) throw new Error("refused within the cap")
    expect(caps.admit(events(), key(1, 1)).ok).toBe(false)
    expect(caps.held).toBe(2)
    // Served: the stream registers its slot's return when it opens; it then closes.
    const w = writer()
    if (first.reply.kind !== "stream") throw new Error("not a stream")
    await first.reply.run(w)
    w.close()
    first.release()
    first.release()
    expect(caps.heldBy(key(1, 1))).toEqual({ credential: 1, workspace: 1 })
    // A stream that never opened (HEAD, a client gone first) is given back by the server alone.
    second.release()
    expect(caps.held).toBe(0)
    expect(caps.heldBy(key(1, 1))).toEqual({ credential: 0, workspace: 0 })
    expect(caps.admit(events(), key(1, 1)).ok).toBe(true)
  })

  it("counts only event streams with a caller: JSON, downloads and public streams pass untouched", () => {
    const caps = new StreamCaps({ perCredential: 1, perWorkspace: 1 })
    for (let i = 0; i < 3; i++) {
      expect(caps.admit(json({ ok: true }), key(1, 1)).ok).toBe(true)
      expect(
        caps.admit(
          stream("text/csv", async () => {}),
          key(1, 1),
        ).ok,
      ).toBe(true)
      expect(caps.admit(events(), undefined).ok).toBe(true)
    }
    expect(caps.held).toBe(0)
    expect(
      caps.admit(
        stream("Text/Event-Stream", async () => {}),
        key(1, 1),
      ).ok,
    ).toBe(true)
    const refusedOne = caps.admit(events(), key(2, 1))
    expect(refusedOne.ok).toBe(false)
    if (!refusedOne.ok) {
      expect(refusedOne.reason).toBe("workspace")
      expect(refusedOne.error.status).toBe(429)
      expect(refusedOne.error.headers).toEqual({ "Retry-After": String(STREAM_RETRY_AFTER_SECONDS) })
    }
    expect(caps.admit(events(), key(3, 2)).ok).toBe(true)
    expect(caps.held).toBe(2)
  })
})
