// A live stream's client that stops reading is dropped, one that keeps up never is: the verdict
// both hubs (turns, approvals) take before each write, and the approval hub acting on it over the
// in-process bus. A slow client costs the process at most the cap in unsent bytes.
import pino from "pino"
import { afterEach, beforeAll, describe, expect, it } from "vitest"
import { ApprovalHub } from "../../src/approvals/approval-hub.js"
import { makeMemoryBus } from "../../src/platform/bus/memory.bus.js"
import { sseDropped } from "../../src/platform/http.metrics.js"
import { type StreamSink, sinkVerdict } from "../../src/platform/live-hub.js"
import { approvalsSubject } from "../../src/platform/subjects.js"
import { stopSharedServers } from "../support/harness.js"

// No shared server runs beside this suite: it reads the process's metrics, which would count theirs too.
beforeAll(stopSharedServers)

const CAP = 1000

/** A client's connection: what it was sent, and how much it has not taken yet (set by the test). */
function fakeSink(buffered = 0) {
  const sink = {
    writes: [] as string[],
    buffered,
    closed: false,
    ended: false,
    write: async (chunk: string | Uint8Array) => {
      sink.writes.push(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString())
      return true
    },
    bufferedBytes: () => sink.buffered,
    end: () => {
      sink.ended = true
      sink.closed = true
    },
  }
  return sink satisfies StreamSink
}

const dropped = async () => (await sseDropped.get()).values.reduce((n, v) => n + v.value, 0)
const turnOver = () => new Promise((r) => setImmediate(r))

describe("sinkVerdict", () => {
  it("lets a client that keeps up take any chunk, drops one behind past the cap, and says when it left", () => {
    const big = "x".repeat(CAP * 5)
    expect(sinkVerdict(fakeSink(0), big, CAP)).toBe("ok")
    expect(sinkVerdict(fakeSink(CAP - 10), "x".repeat(10), CAP)).toBe("ok")
    expect(sinkVerdict(fakeSink(CAP - 10), "x".repeat(11), CAP)).toBe("behind")
    // Bytes, not characters: "é" is two.
    expect(sinkVerdict(fakeSink(CAP - 10), "é".repeat(6), CAP)).toBe("behind")
    expect(sinkVerdict(fakeSink(CAP - 10), Buffer.alloc(11), CAP)).toBe("behind")
    const gone = fakeSink(0)
    gone.end()
    expect(sinkVerdict(gone, "x", CAP)).toBe("closed")
  })
})

describe("the approval hub and a client that stopped reading", () => {
  const bus = makeMemoryBus()
  const hub = new ApprovalHub(bus, pino({ level: "silent" }), {
    keepaliveMs: 60_000,
    idleMs: 60_000,
    maxBufferedBytes: CAP,
  })
  afterEach(() => hub.close())

  const change = async (tenantId: number, ids: number[]) => {
    for (const id of ids)
      bus.publish(approvalsSubject(tenantId), { approval_id: id, status: "approved", at: new Date(0).toISOString() })
    await bus.flush()
    await turnOver()
    await turnOver()
  }

  it("sends a burst to a client keeping up in one chunk, however large; drops one behind past the cap", async () => {
    const before = await dropped()
    const fast = fakeSink(0)
    const slow = fakeSink(CAP - 100)
    await hub.join(7, fast)
    await hub.join(7, slow)
    expect(hub.watching(7)).toBe(2)

    // One change fits in what the slow client may still hold: both get it.
    await change(7, [1])
    expect(fast.writes).toHaveLength(1)
    expect(slow.writes).toHaveLength(1)
    expect(JSON.parse(fast.writes[0]!.replace(/^data: /, ""))).toMatchObject({ approval_id: 1, status: "approved" })

    // Thirty in one event-loop turn: the client that keeps up gets them in one write, past the cap;
    // the one behind is ended, not written to, and counted.
    await change(
      7,
      Array.from({ length: 30 }, (_, i) => 100 + i),
    )
    expect(fast.writes).toHaveLength(2)
    expect(Buffer.byteLength(fast.writes[1]!)).toBeGreaterThan(CAP)
    expect(fast.writes[1]!.match(/^data: /gm)).toHaveLength(30)
    expect(slow.writes).toHaveLength(1)
    expect(slow.ended).toBe(true)
    expect(hub.watching(7)).toBe(1)
    expect((await dropped()) - before).toBe(1)

    // The one left carries on; the last one leaving ends the workspace's subscription.
    await change(7, [2])
    expect(fast.writes).toHaveLength(3)
    hub.close()
    expect(fast.ended).toBe(true)
    expect(hub.watching(7)).toBe(0)
  })

  it("lets go of a client whose connection closed without writing to it, and counts no drop", async () => {
    const before = await dropped()
    const gone = fakeSink(0)
    await hub.join(8, gone)
    gone.closed = true
    await change(8, [1])
    expect(gone.writes).toHaveLength(0)
    expect(hub.watching(8)).toBe(0)
    expect((await dropped()) - before).toBe(0)
  })
})
