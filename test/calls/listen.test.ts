// Listening in on a live call (GET /api/calls/{call_id}/listen): the call's two sides, published on
// its media subjects as the carrier and the runtime publish them, reach a listener mixed, each side
// where it arrived, in events of about 100 ms (a fast simulated call's whole); the stream ends with the
// call's stream, with the call, and with the credential (sign-out, revocation, a role change); only
// the workspace's live calls heard as audio may be listened to, by at most five listeners; a listener
// that stops reading is cut.
import pino from "pino"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { ListenStreams } from "../../src/calls/ListenStreams.js"
import { LISTENERS_PER_CALL, ListenHub } from "../../src/calls/listen-hub.js"
import { mintStreamToken } from "../../src/calls/media-stream-tokens.repo.js"
import { Bus } from "../../src/platform/Bus.js"
import { makeMemoryBus } from "../../src/platform/bus/memory.bus.js"
import { MEDIA_KIND_HEADER, mediaInSubject, mediaOutSubject } from "../../src/platform/subjects.js"
import { encode, FRAME_SAMPLES, mix } from "../../src/providers/audio/g711.js"
import { api, HELD_RUNTIME_ENV, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"
import { type SseClient, sse } from "../support/sse-client.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

let srv: TestServer
let a: ReturnType<typeof api>
let owner: Session
let live: { tenantId: number; callId: number }

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const SILENCE = new Uint8Array(FRAME_SAMPLES).fill(0xff)

/** A 20 ms frame of its own: a tone whose pitch and loudness say which frame it is. */
const tone = (n: number, amplitude: number) =>
  encode(Int16Array.from({ length: FRAME_SAMPLES }, (_, i) => Math.round(amplitude * Math.sin((i * (n + 3)) / 7))))

/** A held call of a real run on the simulator: connected for as long as the suite needs (18 s at its scale). */
async function heldCall(): Promise<typeof live> {
  const call = async (method: string, path: string, body?: unknown) =>
    (await (await a.call(method, path, { token: owner.token, ...(body !== undefined && { body }) })).json()) as Json
  const intent = await call("POST", "/billing/topup", { amount_minor: 1_000_000 })
  await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
  const w = await call("POST", "/api/workflows", {
    nl_prompt: "Win back members with up to $20 off; escalate when asked. Keep each call under 30 minutes.",
  })
  await call("POST", `/api/workflows/${w.id}/audience`, { rows: [{ phone: "+12025550107", name: "Ann Archer" }] })
  await call("PUT", `/api/workflows/${w.id}/compliance`, { consent_attestation_text: "Opted in." })
  await call("POST", `/api/workflows/${w.id}/run`)
  for (let i = 0; i < 150; i++) {
    const [row] = await srv.sql<[{ id: number }?]>`
      select id from calls where tenant_id = ${owner.tenantId} and status = 'connected' limit 1`
    if (row !== undefined) return { tenantId: owner.tenantId, callId: row.id }
    await sleep(100)
  }
  throw new Error("no call connected")
}

/** What is tested reads only whether the call is live: each test finds it so, whatever the run did. */
const revive = () => srv.sql`update calls set status = 'connected', ended_at = null where id = ${live.callId}`

const path = () => `/api/calls/${live.callId}/listen`
/** Every stream the suite opened: a failed test's are closed after it, so the next finds no listener left. */
const opened: SseClient[] = []
const listen = (headers: Record<string, string>) => {
  const c = sse(`${srv.url}${path()}`, headers)
  opened.push(c)
  return c
}
const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

/** Publishes as the api process holding the carrier's socket (`in`) or the runtime (`out`) does. */
function publish(side: "in" | "out", kind: string, payload: Uint8Array | object = {}): void {
  const bus = srv.running.runtime.runSync(Bus)
  const subject =
    side === "in" ? mediaInSubject(live.tenantId, live.callId) : mediaOutSubject(live.tenantId, live.callId)
  bus.publish(subject, payload, { headers: { [MEDIA_KIND_HEADER]: kind } })
}
const concat = (frames: Uint8Array[]) => Buffer.concat(frames)

/** Whether the stream ended within `ms`. */
const endsWithin = (c: SseClient, ms: number) =>
  Promise.race([c.ended.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))])

/** The audio events' bytes, in order, with where each starts (in 20 ms slots of the call). */
function audioOf(c: SseClient): { slots: Uint8Array[]; events: Array<{ seq: number; from_ms: number; n: number }> } {
  const slots: Uint8Array[] = []
  const events: Array<{ seq: number; from_ms: number; n: number }> = []
  for (const e of c.events) {
    if (e.event !== "audio") continue
    const d = JSON.parse(e.data) as { seq: number; from_ms: number; ulaw: string }
    const bytes = Buffer.from(d.ulaw, "base64")
    expect(bytes.length % FRAME_SAMPLES).toBe(0)
    for (let at = 0; at < bytes.length; at += FRAME_SAMPLES) slots.push(bytes.subarray(at, at + FRAME_SAMPLES))
    events.push({ seq: d.seq, from_ms: d.from_ms, n: bytes.length / FRAME_SAMPLES })
  }
  return { slots, events }
}

/** Resolves once `check` holds, polling; fails after `ms`. */
async function until(check: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms`)
    await sleep(20)
  }
}

const hub = () => srv.running.runtime.runSync(ListenStreams)

beforeAll(async () => {
  // The suite is the carrier and the runtime: the simulated call it listens to has no stream of its own.
  srv = await sharedTestServer({ env: { ...HELD_RUNTIME_ENV, MEDIA_STREAMS: "telco_a" } })
  a = api(srv)
  owner = await a.signup({ country: "US" })
  live = await heldCall()
}, 30_000)
afterEach(async () => {
  for (const c of opened.splice(0)) c.close()
  await until(() => hub().listening(live.tenantId, live.callId) === 0)
})
afterAll(async () => srv?.stop())

describe("who may listen to which call", () => {
  it("refuses a call not heard as audio (409), then lets the workspace's members in once it is", async () => {
    await revive()
    const before = await a.call("GET", path(), { token: owner.token })
    expect(before.status).toBe(409)
    expect(((await before.json()) as Json).code).toBe("CALL_NOT_HEARD")
    await mintStreamToken(srv.sql, live.tenantId, live.callId)
    const c = listen(bearer(owner.token))
    expect(await c.status).toBe(200)
    await c.waitFor(1)
    expect(c.events[0]).toMatchObject({ event: "start" })
    expect(JSON.parse(c.events[0]!.data)).toEqual({
      call_id: live.callId,
      encoding: "audio/x-mulaw",
      sample_rate: 8000,
      time_scale: 1,
    })
    c.close()
  })

  it("answers 401 without credentials, 404 for another workspace's or an unknown call", async () => {
    expect((await a.call("GET", path())).status).toBe(401)
    const stranger = await a.signup({ country: "US", verify: false })
    const theirs = await a.call("GET", path(), { token: stranger.token })
    expect(theirs.status).toBe(404)
    expect(((await theirs.json()) as Json).code).toBe("NOT_FOUND")
    expect((await a.call("GET", "/api/calls/999999999/listen", { token: owner.token })).status).toBe(404)
  })
})

describe("the call's audio", () => {
  it("mixes both sides, each where it arrived, in contiguous events about 100 ms apart", async () => {
    await revive()
    const c = listen(bearer(owner.token))
    expect(await c.status).toBe(200)
    await c.waitFor(2)
    const callee = Array.from({ length: 5 }, (_, i) => tone(i, 6000 + 500 * i))
    const agent = Array.from({ length: 3 }, (_, i) => tone(20 + i, 3000 + 300 * i))
    // A carrier's burst of 5 frames and the agent's 3 (within the lag), arriving together: they end in the
    // same slot, so the agent's sit under the callee's last three.
    const sentAt = Date.now()
    publish("in", "media", concat(callee))
    publish("out", "media", concat(agent))
    let heardAt = 0
    await until(() => {
      const at = audioOf(c).slots.findIndex((s) => Buffer.compare(s, callee[0]!) === 0)
      if (at >= 0 && heardAt === 0) heardAt = Date.now()
      return at >= 0 && audioOf(c).slots.length >= at + 6
    })
    // Out within the lag and one event's wait (about 220 ms; generous for a loaded machine).
    expect(heardAt - sentAt).toBeLessThan(1_000)
    const { slots, events } = audioOf(c)
    const p = slots.findIndex((s) => Buffer.compare(s, callee[0]!) === 0)
    // Had a slot ended between the two arrivals, the agent's would start a slot later.
    const expected = (off: number) =>
      Array.from({ length: Math.max(5, off + 3) }, (_, k) =>
        mix(callee[k] ?? SILENCE, k - off >= 0 && k - off < 3 ? agent[k - off]! : SILENCE),
      )
    const matches = (off: number) =>
      expected(off).every((want, k) => slots[p + k] !== undefined && Buffer.compare(slots[p + k]!, want) === 0)
    expect(matches(2) || matches(3)).toBe(true)
    // The mixed slots hold both sides: neither alone.
    expect(Buffer.compare(slots[p + 3]!, callee[3]!)).not.toBe(0)
    expect(Buffer.compare(slots[p + 3]!, agent[matches(2) ? 1 : 0]!)).not.toBe(0)
    // Events follow on: seq by one, each starting where the last ended; silence where nobody spoke.
    for (let i = 1; i < events.length; i++) {
      expect(events[i]!.seq).toBe(events[i - 1]!.seq + 1)
      expect(events[i]!.from_ms).toBe(events[i - 1]!.from_ms + events[i - 1]!.n * 20)
    }
    expect(slots.slice(0, p).every((s) => Buffer.compare(s, SILENCE) === 0)).toBe(true)
    const perEvent = events.slice(1, -1).map((e) => e.n)
    expect(Math.max(...perEvent)).toBeLessThanOrEqual(8)

    // The carrier's stream stops: the rest of the audio, then `end`, and the stream closes.
    publish("in", "stop")
    expect(await endsWithin(c, 2_000)).toBe(true)
    expect(c.events.at(-1)).toMatchObject({ event: "end" })
    expect(JSON.parse(c.events.at(-1)!.data)).toEqual({ reason: "stopped" })
    expect(hub().listening(live.tenantId, live.callId)).toBe(0)
  })

  it("ends every listener's stream when the agent hangs up", async () => {
    await revive()
    const [one, two] = [listen(bearer(owner.token)), listen({ cookie: owner.cookie })]
    await Promise.all([one.waitFor(2), two.waitFor(2)])
    expect(hub().listening(live.tenantId, live.callId)).toBe(2)
    publish("out", "hangup")
    for (const c of [one, two]) {
      expect(await endsWithin(c, 2_000)).toBe(true)
      expect(JSON.parse(c.events.at(-1)!.data)).toEqual({ reason: "hangup" })
    }
  })

  it("passes a fast simulated call's audio on whole, as it comes", async () => {
    await revive()
    // The stream's time scale is its newest token's: 100× real time.
    await mintStreamToken(srv.sql, live.tenantId, live.callId, { timeScale: 0.01 })
    const c = listen(bearer(owner.token))
    await c.waitFor(1)
    expect(JSON.parse(c.events[0]!.data)).toMatchObject({ time_scale: 0.01 })
    // 20 s of the call in 200 ms: batches of 100 frames every 20 ms, as the simulator sends them.
    const loud = tone(1, 8000)
    const batch = concat(Array.from({ length: 100 }, () => loud))
    for (let i = 0; i < 10; i++) {
      publish("in", "media", batch)
      await sleep(20)
    }
    await until(() => audioOf(c).slots.filter((s) => Buffer.compare(s, loud) === 0).length >= 1000, 3_000)
    publish("in", "closed", { code: 1000 })
    expect(await endsWithin(c, 2_000)).toBe(true)
    await mintStreamToken(srv.sql, live.tenantId, live.callId)
  })

  it("ends with the call when no stop comes, and then refuses it (409)", async () => {
    await revive()
    const c = listen(bearer(owner.token))
    await c.waitFor(2)
    await srv.sql`update calls set status = 'ended', ended_at = now() where id = ${live.callId}`
    expect(await endsWithin(c, 8_000)).toBe(true)
    expect(JSON.parse(c.events.at(-1)!.data)).toEqual({ reason: "ended" })
    const after = await a.call("GET", path(), { token: owner.token })
    expect(after.status).toBe(409)
    expect(((await after.json()) as Json).code).toBe("CALL_NOT_LIVE")
    await revive()
  }, 15_000)

  it(`lets ${LISTENERS_PER_CALL} listen to one call at once; the next is 429 until one leaves`, async () => {
    await revive()
    const open = Array.from({ length: LISTENERS_PER_CALL }, () => listen(bearer(owner.token)))
    expect(await Promise.all(open.map((c) => c.status))).toEqual(open.map(() => 200))
    const refused = await a.call("GET", path(), { token: owner.token })
    expect(refused.status).toBe(429)
    expect(((await refused.json()) as Json).code).toBe("RATE_LIMITED")
    expect(refused.headers.get("retry-after")).toBe("10")
    open[0]!.close()
    await until(() => hub().listening(live.tenantId, live.callId) === LISTENERS_PER_CALL - 1)
    const next = listen(bearer(owner.token))
    expect(await next.status).toBe(200)
    for (const c of [...open, next]) c.close()
  })
})

describe("the credential a stream was opened with", () => {
  it("ends it on sign-out, and a reconnect is refused (401)", async () => {
    await revive()
    const session = await a.login(owner.email, owner.password)
    const c = listen({ cookie: session.cookie })
    await c.waitFor(2)
    const t0 = Date.now()
    expect((await a.call("POST", "/auth/logout", { headers: { cookie: session.cookie } })).status).toBe(200)
    expect(await endsWithin(c, 1_000)).toBe(true)
    expect(Date.now() - t0).toBeLessThan(1_000)
    expect(await listen({ cookie: session.cookie }).status).toBe(401)
  })

  it("ends it when its API key is revoked", async () => {
    await revive()
    const key = await a.createKey(owner, { name: "listener", scope: "read" })
    const c = listen(bearer(key.secret))
    await c.waitFor(2)
    expect((await a.call("POST", `/api-keys/${key.id}/revoke`, { token: owner.token })).status).toBe(200)
    expect(await endsWithin(c, 1_000)).toBe(true)
    expect(await listen(bearer(key.secret)).status).toBe(401)
  })

  it("ends it when its user's role changes; the new role is checked when it reconnects", async () => {
    await revive()
    const supervisor = await a.addMember(owner, "supervisor")
    const c = listen({ cookie: supervisor.cookie })
    await c.waitFor(2)
    const other = listen(bearer(owner.token))
    await other.waitFor(2)
    const changed = await a.call("PATCH", `/members/${supervisor.userId}`, {
      token: owner.token,
      body: { role: "analyst" },
    })
    expect(changed.status).toBe(200)
    expect(await endsWithin(c, 1_000)).toBe(true)
    // Another member's stream goes on; the analyst may still listen (read), with the role read afresh.
    expect(await endsWithin(other, 300)).toBe(false)
    const again = listen({ cookie: supervisor.cookie })
    expect(await again.status).toBe(200)
    for (const s of [other, again]) s.close()
  })
})

describe("a listener that stops reading", () => {
  it("is cut once what waits for it passes the cap, the others unslowed", async () => {
    const bus = makeMemoryBus()
    const cap = 64 * 1024
    const settings = { keepaliveMs: 15_000, idleMs: 60_000, maxBufferedBytes: cap }
    const listenHub = new ListenHub(bus, pino({ level: "silent" }), settings)
    const sink = (backlog: () => number) => {
      const s = {
        written: 0,
        closed: false,
        write: async (chunk: string | Uint8Array) => {
          s.written += chunk.length
          return true
        },
        bufferedBytes: backlog,
        end: () => {
          s.closed = true
        },
      }
      return s
    }
    let stuck = 0
    const slow = sink(() => stuck)
    const fast = sink(() => 0)
    const ticket = () => listenHub.reserve(1, 2, 0.01)!
    await listenHub.join(ticket(), slow)
    await listenHub.join(ticket(), fast)
    const frames = new Uint8Array(FRAME_SAMPLES * 100).fill(0x10)
    for (let i = 0; i < 20 && !slow.closed; i++) {
      bus.publish(mediaInSubject(1, 2), frames, { headers: { [MEDIA_KIND_HEADER]: "media" } })
      // What the slow one was sent is still waiting for it.
      stuck = slow.written
      await sleep(30)
    }
    expect(slow.closed).toBe(true)
    expect(stuck).toBeGreaterThan(0)
    expect(fast.closed).toBe(false)
    expect(listenHub.listening(1, 2)).toBe(1)
    listenHub.close()
    expect(fast.closed).toBe(true)
    await bus.drain()
  })
})
