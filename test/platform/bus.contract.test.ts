// The BusClient contract, run against every implementation: the in-process bus always, NATS
// when NATS_URL is set. Subjects carry a random prefix so runs can share one NATS server.

import { randomBytes } from "node:crypto"
import { setTimeout as sleep } from "node:timers/promises"
import { afterEach, describe, expect, it } from "vitest"
import {
  type BusClient,
  BusError,
  type BusErrorCode,
  type BusMsg,
  DEFAULT_MAX_PAYLOAD,
} from "../../src/platform/bus/bus.js"
import { makeMemoryBus } from "../../src/platform/bus/memory.bus.js"
import { connectNatsBus } from "../../src/platform/bus/nats.bus.js"

interface Impl {
  readonly name: string
  readonly make: (opts?: { maxPayload?: number }) => Promise<BusClient>
}

const impls: Impl[] = [{ name: "memory", make: async (opts) => makeMemoryBus(opts) }]
const natsUrl = process.env.NATS_URL
if (natsUrl) {
  impls.push({ name: "nats", make: (opts) => connectNatsBus({ url: natsUrl, name: "parley-bus-contract", ...opts }) })
}

const prefix = (): string => `contract.${randomBytes(6).toString("hex")}`

/** Records what a handler received and lets a test wait for a count. */
function collector(): { msgs: BusMsg[]; handler: (m: BusMsg) => void; until: (n: number) => Promise<void> } {
  const msgs: BusMsg[] = []
  return {
    msgs,
    handler: (m) => void msgs.push(m),
    until: (n) => waitFor(() => msgs.length >= n, `${n} messages (got ${msgs.length})`),
  }
}

async function waitFor(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(2)
  }
}

function codeOfSync(fn: () => unknown): BusErrorCode | "no error" | "not a BusError" {
  try {
    fn()
    return "no error"
  } catch (err) {
    return err instanceof BusError ? err.code : "not a BusError"
  }
}

async function codeOf(p: Promise<unknown>): Promise<BusErrorCode | "no error" | "not a BusError"> {
  try {
    await p
    return "no error"
  } catch (err) {
    return err instanceof BusError ? err.code : "not a BusError"
  }
}

describe.each(impls)("bus contract: $name", ({ name, make }) => {
  const open: BusClient[] = []
  const bus = async (opts?: { maxPayload?: number }): Promise<BusClient> => {
    const b = await make(opts)
    open.push(b)
    return b
  }
  afterEach(async () => {
    await Promise.all(open.splice(0).map((b) => b.drain()))
  })

  it("reports its kind and a live connection", async () => {
    const b = await bus()
    expect(b.kind).toBe(name)
    expect(b.status()).toMatchObject({ kind: name, connected: true })
  })

  it("delivers exact matches only, with payload decoding and headers", async () => {
    const b = await bus()
    const p = prefix()
    const exact = collector()
    const shorter = collector()
    b.subscribe(`${p}.a.b`, exact.handler)
    b.subscribe(`${p}.a`, shorter.handler)
    await b.flush()

    let handledDuringPublish = false
    let publishing = true
    b.subscribe(`${p}.sync`, () => {
      handledDuringPublish ||= publishing
    })
    await b.flush()
    b.publish(`${p}.sync`, "x")
    publishing = false

    b.publish(`${p}.a.b.c`, "too long")
    b.publish(`${p}.a.bb`, "other token")
    b.publish(`${p}.a.b`, { n: 1, s: "ü" }, { headers: { "x-call-id": "c1" } })
    b.publish(`${p}.a.b`, "plain ✓")
    b.publish(`${p}.a.b`, new Uint8Array([0, 1, 255]))
    b.publish(`${p}.a.b`)
    await exact.until(4)
    await b.flush()

    expect(handledDuringPublish).toBe(false)
    expect(shorter.msgs).toHaveLength(0)
    expect(exact.msgs.map((m) => m.subject)).toEqual(Array(4).fill(`${p}.a.b`))
    const [json, text, bytes, empty] = exact.msgs
    expect(json?.json()).toEqual({ n: 1, s: "ü" })
    expect(json?.headers).toEqual({ "x-call-id": "c1" })
    expect(json?.reply).toBeUndefined()
    expect(json?.respond("nobody asked")).toBe(false)
    expect(text?.string()).toBe("plain ✓")
    expect(text?.headers).toBeUndefined()
    expect([...(bytes?.data ?? [])]).toEqual([0, 1, 255])
    expect(empty?.data.byteLength).toBe(0)
  })

  it("matches '*' as exactly one token", async () => {
    const b = await bus()
    const p = prefix()
    const tail = collector()
    const middle = collector()
    b.subscribe(`${p}.a.*`, tail.handler)
    b.subscribe(`${p}.*.x`, middle.handler)
    await b.flush()

    for (const s of ["a", "a.b.c", "b.c", "a.b", "a.c", "q.x", "q.y", "q.r.x", "a.x"]) b.publish(`${p}.${s}`, s)
    await tail.until(3)
    await middle.until(2)
    await b.flush()
    await sleep(30)

    expect(tail.msgs.map((m) => m.string())).toEqual(["a.b", "a.c", "a.x"])
    expect(middle.msgs.map((m) => m.string())).toEqual(["q.x", "a.x"])
  })

  it("matches '>' as one or more trailing tokens", async () => {
    const b = await bus()
    const p = prefix()
    const rest = collector()
    b.subscribe(`${p}.a.>`, rest.handler)
    await b.flush()

    for (const s of ["a", "b.c", "a.b", "ab.c", "a.b.c", "a.b.c.d"]) b.publish(`${p}.${s}`, s)
    await rest.until(3)
    await b.flush()
    await sleep(30)

    expect(rest.msgs.map((m) => m.string())).toEqual(["a.b", "a.b.c", "a.b.c.d"])
  })

  it("delivers each message to one queue-group member and to every plain subscriber", async () => {
    const b = await bus()
    const p = prefix()
    const n = 40
    const m1 = collector()
    const m2 = collector()
    const plain = collector()
    b.subscribe(`${p}.work`, m1.handler, { queue: "workers" })
    b.subscribe(`${p}.work`, m2.handler, { queue: "workers" })
    b.subscribe(`${p}.work`, plain.handler)
    await b.flush()

    for (let i = 0; i < n; i++) b.publish(`${p}.work`, String(i))
    await plain.until(n)
    await waitFor(() => m1.msgs.length + m2.msgs.length >= n, "the group to get every message")
    await b.flush()
    await sleep(50)

    const all = (c: ReturnType<typeof collector>): number[] => c.msgs.map((m) => Number(m.string()))
    expect(all(plain)).toEqual([...Array(n).keys()])
    expect([...all(m1), ...all(m2)].sort((x, y) => x - y)).toEqual([...Array(n).keys()])
    expect(m1.msgs.length).toBeGreaterThan(0)
    expect(m2.msgs.length).toBeGreaterThan(0)
  })

  it("answers requests, carrying headers both ways", async () => {
    // One client plays both sides: separate in-process buses don't share subjects.
    const b = await bus()
    const p = prefix()
    let seen: BusMsg | undefined
    b.subscribe(`${p}.echo`, (m) => {
      seen = m
      m.respond({ got: m.json(), tenant: m.headers?.["x-tenant"] ?? null }, { headers: { "x-answer": "42" } })
    })
    await b.flush()

    const reply = await b.request(`${p}.echo`, { q: "hi" }, { headers: { "x-tenant": "t1" }, timeoutMs: 2000 })
    expect(reply.json()).toEqual({ got: { q: "hi" }, tenant: "t1" })
    expect(reply.headers).toEqual({ "x-answer": "42" })
    expect(seen?.reply).toMatch(/^_INBOX\./)
    expect(seen?.headers).toEqual({ "x-tenant": "t1" })
  })

  it("gathers a reply from every subscriber (one per queue group) until replies stall", async () => {
    const b = await bus()
    const p = prefix()
    for (const who of ["a", "b"]) b.subscribe(`${p}.all`, (m) => void m.respond({ who, got: m.json() }))
    for (const who of ["q1", "q2"]) b.subscribe(`${p}.all`, (m) => void m.respond({ who }), { queue: "workers" })
    // A late replier, well past the stall window, is not waited for.
    const late: NodeJS.Timeout[] = []
    b.subscribe(`${p}.all`, (m) => void late.push(setTimeout(() => m.respond({ who: "late" }), 400)))
    await b.flush()
    const started = Date.now()
    const replies = await b.gather(`${p}.all`, { n: 1 }, { stallMs: 60, maxWaitMs: 2000 })
    const who = replies.map((r) => r.json<{ who: string }>().who).sort()
    expect(who.filter((w) => w === "a" || w === "b")).toEqual(["a", "b"])
    expect(who.filter((w) => w.startsWith("q"))).toHaveLength(1)
    expect(who).not.toContain("late")
    expect(Date.now() - started).toBeLessThan(390)
    const plain = replies
      .map((r) => r.json<{ who: string; got?: { n: number } }>())
      .filter((r) => r.who === "a" || r.who === "b")
    expect(plain.map((r) => r.got)).toEqual([{ n: 1 }, { n: 1 }])
    for (const t of late) clearTimeout(t)
  })

  it("gathers nothing, quickly, when nobody listens", async () => {
    const b = await bus()
    const started = Date.now()
    expect(await b.gather(`${prefix()}.nobody`, {}, { stallMs: 50, maxWaitMs: 1500 })).toEqual([])
    expect(Date.now() - started).toBeLessThan(1000)
  })

  it("rejects a request nobody listens to with NO_RESPONDERS at once", async () => {
    const b = await bus()
    const started = Date.now()
    expect(await codeOf(b.request(`${prefix()}.nobody`, "?", { timeoutMs: 3000 }))).toBe("NO_RESPONDERS")
    expect(Date.now() - started).toBeLessThan(1000)
  })

  it("rejects an unanswered request with TIMEOUT after timeoutMs", async () => {
    const b = await bus()
    const p = prefix()
    const silent = collector()
    b.subscribe(`${p}.silent`, silent.handler)
    await b.flush()

    const started = Date.now()
    expect(await codeOf(b.request(`${p}.silent`, "?", { timeoutMs: 200 }))).toBe("TIMEOUT")
    expect(Date.now() - started).toBeGreaterThanOrEqual(180)
    expect(silent.msgs).toHaveLength(1)
  })

  it("hands one message at a time to a subscription, in publish order, awaiting async handlers", async () => {
    const b = await bus()
    const p = prefix()
    const n = 30
    const order: number[] = []
    let active = 0
    let maxActive = 0
    b.subscribe(`${p}.seq`, async (m) => {
      active++
      maxActive = Math.max(maxActive, active)
      const i = m.json<{ i: number }>().i
      await sleep(i % 3 === 0 ? 5 : 0)
      order.push(i)
      active--
    })
    await b.flush()

    for (let i = 0; i < n; i++) b.publish(`${p}.seq`, { i })
    await waitFor(() => order.length >= n, "all messages")
    expect(order).toEqual([...Array(n).keys()])
    expect(maxActive).toBe(1)
  })

  it("keeps a subscription alive after its handler throws or rejects", async () => {
    const b = await bus()
    const p = prefix()
    const seen: number[] = []
    b.subscribe(`${p}.flaky`, async (m) => {
      const i = Number(m.string())
      seen.push(i)
      if (i === 0) throw new Error("sync-style failure")
      if (i === 1) await Promise.reject(new Error("async failure"))
    })
    b.subscribe(`${p}.flaky.sync`, (m) => {
      seen.push(Number(m.string()))
      throw new Error("plain throw")
    })
    await b.flush()

    for (const i of [0, 1, 2]) b.publish(`${p}.flaky`, String(i))
    b.publish(`${p}.flaky.sync`, "10")
    b.publish(`${p}.flaky.sync`, "11")
    await waitFor(() => seen.length >= 5, "all messages")
    expect(seen.filter((i) => i < 10)).toEqual([0, 1, 2])
    expect(seen.filter((i) => i >= 10)).toEqual([10, 11])
  })

  it("stops delivery at once on unsubscribe, dropping queued messages", async () => {
    const b = await bus()
    const p = prefix()
    const got: string[] = []
    const sub = b.subscribe(`${p}.u`, (m) => {
      got.push(m.string())
      sub.unsubscribe()
    })
    const witness = collector()
    b.subscribe(`${p}.u`, witness.handler)
    expect(sub.subject).toBe(`${p}.u`)
    await b.flush()

    for (let i = 0; i < 5; i++) b.publish(`${p}.u`, String(i))
    await witness.until(5)
    b.publish(`${p}.u`, "late")
    await witness.until(6)
    await b.flush()
    await sleep(30)
    expect(got).toEqual(["0"])
  })

  it("drains a subscription: queued messages still reach the handler, later ones do not", async () => {
    const b = await bus()
    const p = prefix()
    const handled: string[] = []
    const sub = b.subscribe(`${p}.d`, async (m) => {
      await sleep(15)
      handled.push(m.string())
    })
    const witness = collector()
    b.subscribe(`${p}.d`, witness.handler)
    await b.flush()

    for (let i = 0; i < 4; i++) b.publish(`${p}.d`, String(i))
    await witness.until(4)
    expect(handled.length).toBeLessThan(4)
    await sub.drain()
    expect(handled).toEqual(["0", "1", "2", "3"])

    b.publish(`${p}.d`, "after")
    await witness.until(5)
    await b.flush()
    await sleep(30)
    expect(handled).toEqual(["0", "1", "2", "3"])
  })

  it("throws BAD_SUBJECT synchronously for malformed subjects", async () => {
    const b = await bus()
    const p = prefix()
    for (const s of ["", "a..b", ".a", "a.", "a b", "a\tb", `${p}.*`, `${p}.>`, `${p}.a*`, `${p}.*.b`]) {
      expect(
        codeOfSync(() => b.publish(s, "x")),
        `publish ${JSON.stringify(s)}`,
      ).toBe("BAD_SUBJECT")
    }
    for (const s of ["", "a..b", "a.", "a b", `${p}.>.b`, `${p}.a>`, `${p}.b*`, `${p}.**`]) {
      expect(
        codeOfSync(() => b.subscribe(s, () => {})),
        `subscribe ${JSON.stringify(s)}`,
      ).toBe("BAD_SUBJECT")
    }
    expect(codeOfSync(() => b.subscribe(`${p}.q`, () => {}, { queue: "a b" }))).toBe("BAD_SUBJECT")
    expect(await codeOf(b.request(`${p}.*`, "x"))).toBe("BAD_SUBJECT")
    // Valid wildcard forms are accepted.
    expect(codeOfSync(() => b.subscribe(`${p}.*.b.>`, () => {}))).toBe("no error")
    expect(codeOfSync(() => b.subscribe(">", () => {}).unsubscribe())).toBe("no error")
  })

  it("enforces the payload limit with MAX_PAYLOAD", async () => {
    const small = await bus({ maxPayload: 1024 })
    const p = prefix()
    const got = collector()
    small.subscribe(`${p}.big`, got.handler)
    await small.flush()

    expect(codeOfSync(() => small.publish(`${p}.big`, new Uint8Array(1025)))).toBe("MAX_PAYLOAD")
    expect(codeOfSync(() => small.publish(`${p}.big`, "é".repeat(513)))).toBe("MAX_PAYLOAD")
    expect(await codeOf(small.request(`${p}.big`, new Uint8Array(2000), { timeoutMs: 200 }))).toBe("MAX_PAYLOAD")
    small.publish(`${p}.big`, new Uint8Array(1024))
    await got.until(1)
    expect(got.msgs[0]?.data.byteLength).toBe(1024)

    const dflt = await bus()
    expect(codeOfSync(() => dflt.publish(`${p}.big`, new Uint8Array(DEFAULT_MAX_PAYLOAD + 1)))).toBe("MAX_PAYLOAD")
  })

  it("drains the client: in-flight work finishes, then everything reports CLOSED", async () => {
    const b = await bus()
    const p = prefix()
    const handled: string[] = []
    b.subscribe(`${p}.c`, async (m) => {
      await sleep(10)
      handled.push(m.string())
    })
    b.subscribe(`${p}.slow`, async (m) => {
      await sleep(20)
      m.respond("late answer")
    })
    b.subscribe(`${p}.mute`, () => {})
    await b.flush()

    for (let i = 0; i < 3; i++) b.publish(`${p}.c`, String(i))
    const answered = b.request(`${p}.slow`, "?", { timeoutMs: 3000 })
    const unanswered = codeOf(b.request(`${p}.mute`, "?", { timeoutMs: 3000 }))
    await b.flush()
    await sleep(5)
    await b.drain()
    expect(handled).toEqual(["0", "1", "2"])
    // Handlers may still respond while draining; a request nobody answers ends with the client.
    expect((await answered).string()).toBe("late answer")
    expect(await unanswered).toBe("CLOSED")
    expect(b.status().connected).toBe(false)
    expect(codeOfSync(() => b.publish(`${p}.c`, "x"))).toBe("CLOSED")
    expect(codeOfSync(() => b.subscribe(`${p}.c`, () => {}))).toBe("CLOSED")
    expect(await codeOf(b.request(`${p}.c`, "x"))).toBe("CLOSED")
    await expect(b.drain()).resolves.toBeUndefined()
  })
})
