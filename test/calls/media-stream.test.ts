// Carrier media streams (api/media-streams.ts): a call's stream is let in only with its single-use
// token, before any frame is read; the carrier's audio and events reach the bus for the runtime,
// and what the runtime publishes reaches the carrier; a stream that breaks the protocol or floods
// is cut.
import { randomBytes } from "node:crypto"
import { request } from "node:http"
import { WebSocket } from "undici"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { mintStreamToken } from "../../src/calls/media-stream-tokens.repo.js"
import { Bus } from "../../src/platform/Bus.js"
import type { BusMsg } from "../../src/platform/bus/bus.js"
import { Pacer } from "../../src/platform/pacer.js"
import { MEDIA_KIND_HEADER, mediaInSubject, mediaOutSubject } from "../../src/platform/subjects.js"
import { encode, FRAME_SAMPLES } from "../../src/providers/audio/g711.js"
import { SimCalleeStream } from "../../src/providers/telephony/sim.media.js"
import { api, HELD_RUNTIME_ENV, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

let srv: TestServer
let a: ReturnType<typeof api>
let live: { tenantId: number; callId: number; providerCallId: string | null }

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const wsUrl = (token: string) => `${srv.url.replace("http", "ws")}/media/telco_a/${encodeURIComponent(token)}`

/** A held call of a real run on the simulator: connected for as long as the suite needs. */
async function heldCall(): Promise<typeof live> {
  const s: Session = await a.signup({ country: "US" })
  const call = async (method: string, path: string, body?: unknown) =>
    (await (await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })).json()) as Json
  const intent = await call("POST", "/billing/topup", { amount_minor: 1_000_000 })
  await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
  const w = await call("POST", "/api/workflows", {
    nl_prompt: "Win back members with up to $20 off; escalate when asked.",
  })
  await call("POST", `/api/workflows/${w.id}/audience`, { rows: [{ phone: "+12025550107", name: "Ann Archer" }] })
  await call("PUT", `/api/workflows/${w.id}/compliance`, { consent_attestation_text: "Opted in." })
  await call("POST", `/api/workflows/${w.id}/run`)
  for (let i = 0; i < 150; i++) {
    const [row] = await srv.sql<[{ id: number; provider_call_id: string | null }?]>`
      select id, provider_call_id from calls where tenant_id = ${s.tenantId} and status = 'connected' limit 1`
    if (row !== undefined) return { tenantId: s.tenantId, callId: row.id, providerCallId: row.provider_call_id }
    await sleep(100)
  }
  throw new Error("no call connected")
}

/**
 * The held call ends at its rule book's cap (300 s of the simulator's time: 3 s at the suite's
 * scale); what is tested here reads only whether the call is live, so each test finds it live.
 */
async function revive(): Promise<void> {
  await srv.sql`update calls set status = 'connected', ended_at = null where id = ${live.callId}`
}

/** The status an upgrade request is answered with (101 when let in). */
function upgradeStatus(token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${srv.url}/media/telco_a/${encodeURIComponent(token)}`, {
      headers: {
        Connection: "Upgrade",
        Upgrade: "websocket",
        "Sec-WebSocket-Key": randomBytes(16).toString("base64"),
        "Sec-WebSocket-Version": "13",
      },
    })
    req.on("upgrade", (res, socket) => {
      socket.destroy()
      resolve(res.statusCode ?? 0)
    })
    req.on("response", (res) => {
      res.resume()
      resolve(res.statusCode ?? 0)
    })
    req.on("error", reject)
    req.end()
  })
}

/** A carrier's side of a stream: what it received and how it closed. */
async function carrier(token: string) {
  const ws = new WebSocket(wsUrl(token))
  const received: Json[] = []
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.addEventListener("close", (e) => resolve({ code: e.code, reason: e.reason })),
  )
  ws.addEventListener("message", (e) => received.push(JSON.parse(String(e.data)) as Json))
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener("open", () => resolve())
    ws.addEventListener("error", () => reject(new Error("the stream was refused")))
  })
  const send = (m: Json) => ws.send(JSON.stringify(m))
  return { ws, received, closed, send }
}

const startMsg = (streamSid: string, callSid: string) => ({
  event: "start",
  streamSid,
  start: { callSid, tracks: ["inbound"], mediaFormat: { encoding: "audio/x-mulaw", sampleRate: 8000, channels: 1 } },
})
const mediaMsg = (streamSid: string, bytes: Uint8Array) => ({
  event: "media",
  streamSid,
  media: { track: "inbound", payload: Buffer.from(bytes).toString("base64") },
})
const tone = (n: number) =>
  encode(Int16Array.from({ length: FRAME_SAMPLES }, (_, i) => Math.round(8000 * Math.sin(i * n))))

beforeAll(async () => {
  // The suite is the carrier: the simulated calls it streams for must not have streams of their own.
  srv = await sharedTestServer({ env: { ...HELD_RUNTIME_ENV, MEDIA_STREAMS: "telco_a" } })
  a = api(srv)
  live = await heldCall()
}, 30_000)
afterAll(async () => srv?.stop())

describe("letting a media stream in", () => {
  it("answers 401 to a bogus, used, expired or ended call's token, and 101 once to a good one", async () => {
    expect(await upgradeStatus("mst_1_nonsense")).toBe(401)
    expect(await upgradeStatus("%E0%A4%A")).toBe(401)
    // Not an upgrade: the HTTP routes answer, in the contract's shape.
    const plain = await fetch(`${srv.url}/media/telco_a/mst_1_nonsense`)
    expect(plain.status).toBe(404)
    expect(((await plain.json()) as Json).code).toBe("NOT_FOUND")
    expect(await upgradeStatus(`mst_999999999_${"A".repeat(43)}`)).toBe(401)
    const good = await mintStreamToken(srv.sql, live.tenantId, live.callId)
    // The right id with another secret is refused, and does not spend the token.
    expect(await upgradeStatus(`${good.slice(0, good.lastIndexOf("_"))}_${"B".repeat(43)}`)).toBe(401)
    expect(await upgradeStatus(good)).toBe(101)
    expect(await upgradeStatus(good)).toBe(401)
    const expired = await mintStreamToken(srv.sql, live.tenantId, live.callId, { ttlMs: 1 })
    await sleep(20)
    expect(await upgradeStatus(expired)).toBe(401)
    // A call that has ended takes no stream, whatever its token (the held call, marked ended for a moment).
    const forEnded = await mintStreamToken(srv.sql, live.tenantId, live.callId)
    await srv.sql`update calls set status = 'ended' where id = ${live.callId}`
    try {
      expect(await upgradeStatus(forEnded)).toBe(401)
    } finally {
      await srv.sql`update calls set status = 'connected' where id = ${live.callId}`
    }
    // The same token, its call live again: it was not spent by the refusal.
    expect(await upgradeStatus(forEnded)).toBe(101)
  })
})

describe("a stream let in", () => {
  beforeEach(revive)

  it("carries the carrier's audio and events to the bus, and the runtime's media, marks and clear back", async () => {
    const bus = srv.running.runtime.runSync(Bus)
    const heard: BusMsg[] = []
    const sub = bus.subscribe(mediaInSubject(live.tenantId, live.callId), (m) => void heard.push(m))
    try {
      const c = await carrier(await mintStreamToken(srv.sql, live.tenantId, live.callId))
      const callSid = live.providerCallId ?? "CA-sim"
      c.send({ event: "connected", protocol: "Call", version: "1.0.0" })
      c.send(startMsg("MZ1", callSid))
      const frames = [tone(0.1), tone(0.2), tone(0.3)]
      for (const f of frames) c.send(mediaMsg("MZ1", f))
      c.send({ event: "dtmf", streamSid: "MZ1", dtmf: { track: "inbound_track", digit: "5" } })
      for (let i = 0; i < 50 && heard.length < 5; i++) await sleep(20)
      const kinds = heard.map((m) => m.headers?.[MEDIA_KIND_HEADER])
      expect(kinds).toEqual(["start", "media", "media", "media", "dtmf"])
      expect(heard[0]!.json()).toEqual({ stream_sid: "MZ1", call_sid: callSid })
      expect(heard.slice(1, 4).map((m) => Buffer.from(m.data))).toEqual(frames.map((f) => Buffer.from(f)))
      expect(heard[4]!.json()).toEqual({ digit: "5" })

      const out = mediaOutSubject(live.tenantId, live.callId)
      bus.publish(out, frames[0]!, { headers: { [MEDIA_KIND_HEADER]: "media" } })
      bus.publish(out, { name: "sentence-1" }, { headers: { [MEDIA_KIND_HEADER]: "mark" } })
      bus.publish(out, "", { headers: { [MEDIA_KIND_HEADER]: "clear" } })
      for (let i = 0; i < 50 && c.received.length < 3; i++) await sleep(20)
      expect(c.received).toEqual([
        { event: "media", streamSid: "MZ1", media: { payload: Buffer.from(frames[0]!).toString("base64") } },
        { event: "mark", streamSid: "MZ1", mark: { name: "sentence-1" } },
        { event: "clear", streamSid: "MZ1" },
      ])
      c.send({ event: "stop", streamSid: "MZ1" })
      expect((await c.closed).code).toBe(1000)
      for (let i = 0; i < 50 && heard.length < 7; i++) await sleep(20)
      expect(heard.slice(5).map((m) => m.headers?.[MEDIA_KIND_HEADER])).toEqual(["stop", "closed"])
    } finally {
      sub.unsubscribe()
    }
  })

  it("cuts a stream that breaks the protocol (binary, media first, another sid, two starts, a stranger)", async () => {
    const callSid = live.providerCallId ?? "CA-sim"
    const cases: Array<[string, (c: Awaited<ReturnType<typeof carrier>>) => void]> = [
      ["binary", (c) => c.ws.send(new Uint8Array([1, 2, 3]))],
      ["media before start", (c) => c.send(mediaMsg("MZ2", tone(0.1)))],
      ["not JSON", (c) => c.ws.send("{nope")],
      [
        "another stream's sid",
        (c) => {
          c.send(startMsg("MZ3", callSid))
          c.send(mediaMsg("MZ-other", tone(0.1)))
        },
      ],
      [
        "a second start",
        (c) => {
          c.send(startMsg("MZ4", callSid))
          c.send(startMsg("MZ4", callSid))
        },
      ],
    ]
    if (live.providerCallId !== null)
      cases.push(["a stranger's call", (c) => c.send(startMsg("MZ5", "CA-someone-else"))])
    for (const [name, act] of cases) {
      const c = await carrier(await mintStreamToken(srv.sql, live.tenantId, live.callId))
      act(c)
      const closed = await c.closed
      expect(closed.code, name).toBe(name === "binary" ? 1003 : 1008)
    }
  })

  it("lets a simulated call's audio come at its time scale, and cuts it at real time's limit", async () => {
    // 400 messages over about a second: four times real time. A stream minted at a tenth of real
    // time (ten times as fast) takes them all; a carrier's (real time) is cut.
    const paced = async (timeScale: number) => {
      await revive()
      const bus = srv.running.runtime.runSync(Bus)
      let media = 0
      const sub = bus.subscribe(mediaInSubject(live.tenantId, live.callId), (m) => {
        if (m.headers?.[MEDIA_KIND_HEADER] === "media") media++
      })
      const c = await carrier(await mintStreamToken(srv.sql, live.tenantId, live.callId, { timeScale }))
      let closed: number | undefined
      void c.closed.then((x) => (closed = x.code))
      c.send(startMsg("MZ7", live.providerCallId ?? "CA-sim"))
      const frame = mediaMsg("MZ7", tone(0.1))
      for (let burst = 0; burst < 10 && closed === undefined; burst++) {
        for (let i = 0; i < 40; i++) c.send(frame)
        await sleep(100)
      }
      for (let i = 0; i < 50 && media < 400 && closed === undefined; i++) await sleep(20)
      if (closed === undefined) c.ws.close()
      sub.unsubscribe()
      return { closed, media }
    }
    expect(await paced(0.1)).toEqual({ closed: undefined, media: 400 })
    expect((await paced(1)).closed).toBe(1008)
  })

  it("carries a simulated callee's audio as sent: silence withheld when scaled, every frame at real time", async () => {
    // The simulator's own carrier (src/providers/telephony/sim.media.ts) on this endpoint: faster than
    // real time it sends nothing while neither side speaks (DTX), a line and the silence just after it.
    const framesSent = async (timeScale: number, act: (s: SimCalleeStream) => Promise<void>) => {
      const bus = srv.running.runtime.runSync(Bus)
      let frames = 0
      const sub = bus.subscribe(mediaInSubject(live.tenantId, live.callId), (m) => {
        if (m.headers?.[MEDIA_KIND_HEADER] === "media") frames += m.data.length / FRAME_SAMPLES
      })
      const pacer = new Pacer({ timeScale })
      const url = wsUrl(await mintStreamToken(srv.sql, live.tenantId, live.callId, { timeScale }))
      let opened!: () => void
      const started = new Promise<void>((r) => (opened = r))
      const startSub = bus.subscribe(mediaInSubject(live.tenantId, live.callId), (m) => {
        if (m.headers?.[MEDIA_KIND_HEADER] === "start") opened()
      })
      const callee = new SimCalleeStream(url, "MZ8", live.providerCallId ?? "CA-sim", pacer, () => {})
      try {
        await started
        await act(callee)
        return frames
      } finally {
        callee.stop()
        pacer.stop()
        sub.unsubscribe()
        startSub.unsubscribe()
      }
    }
    // A tenth of real time: 3 s of the call's silence (300 ms) sends nothing; a 25-frame line goes
    // with the 60 frames of silence after it (its end is heard in them), then nothing again.
    const line = Array.from({ length: 25 }, (_, i) => tone(0.1 + i / 100))
    expect(
      await framesSent(0.1, async (callee) => {
        await sleep(300)
        await callee.speak(line)
        await sleep(500)
      }),
    ).toBe(25 + 60)
    expect(
      await framesSent(0.1, async () => {
        await sleep(300)
      }),
    ).toBe(0)
    // Real time: silence goes too, a frame every 20 ms (about 25 in half a second, whatever the timer's jitter).
    expect(
      await framesSent(1, async () => {
        await sleep(500)
      }),
    ).toBeGreaterThanOrEqual(15)
  })

  it("cuts a carrier that sends faster than audio can come, and one whose message is too big", async () => {
    const flood = await carrier(await mintStreamToken(srv.sql, live.tenantId, live.callId))
    flood.send(startMsg("MZ6", live.providerCallId ?? "CA-sim"))
    const frame = mediaMsg("MZ6", tone(0.1))
    for (let i = 0; i < 400; i++) flood.send(frame)
    expect((await flood.closed).code).toBe(1008)

    const big = await carrier(await mintStreamToken(srv.sql, live.tenantId, live.callId))
    big.ws.send(JSON.stringify({ event: "connected", protocol: "x".repeat(20_000), version: "1" }))
    expect([1006, 1009]).toContain((await big.closed).code)
  })

  // Last in the file: it leaves 127.0.0.1 throttled on this server for a minute.
  it("answers 429, without looking the token up, to an address refused 30 times in a minute", async () => {
    const statuses: number[] = []
    for (let i = 0; i < 40 && statuses.at(-1) !== 429; i++)
      statuses.push(await upgradeStatus(`mst_${900_000_000 + i}_${"C".repeat(43)}`))
    expect(statuses.at(-1)).toBe(429)
    expect(statuses.slice(0, -1).every((x) => x === 401)).toBe(true)
    expect(statuses.length).toBeLessThanOrEqual(31)
    // Even a good token is turned away now, and is not spent by it.
    const good = await mintStreamToken(srv.sql, live.tenantId, live.callId)
    expect(await upgradeStatus(good)).toBe(429)
    const id = Number(good.split("_")[1])
    const [row] = await srv.sql<[{ used_at: Date | null }]>`select used_at from media_stream_tokens where id = ${id}`
    expect(row.used_at).toBeNull()
  })
})
