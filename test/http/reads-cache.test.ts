// Shared reads (src/platform/read-cache.ts, api/shared-read.ts): the dashboard's list endpoints
// answer many concurrent polls from one load, never with an answer older than the request, and
// never with another workspace's rows.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SharedReads } from "../../src/platform/read-cache.js"
import { api, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

const tick = () => new Promise((r) => setImmediate(r))

/** A load the test finishes by hand. */
function manual<T>() {
  const calls: Array<{ resolve(v: T): void; reject(e: unknown): void }> = []
  const load = () =>
    new Promise<T>((resolve, reject) => {
      calls.push({ resolve, reject })
    })
  return { load, calls }
}

describe("SharedReads", () => {
  it("starts a load at once when none is in flight, and forgets the key when it ends", async () => {
    const reads = new SharedReads()
    const m = manual<string>()
    const p = reads.read("k", m.load)
    expect(m.calls).toHaveLength(1)
    expect(reads.inFlight).toBe(1)
    m.calls[0]!.resolve("v1")
    expect(await p).toBe("v1")
    await tick()
    expect(reads.inFlight).toBe(0)
  })

  it("gives a reader that arrives during a load the next load, shared by everyone who waited", async () => {
    const reads = new SharedReads()
    const m = manual<string>()
    const first = reads.read("k", m.load)
    const waiting = [reads.read("k", m.load), reads.read("k", m.load), reads.read("k", m.load)]
    // Only the first load runs while it is in flight: the waiters queue for one more.
    expect(m.calls).toHaveLength(1)
    m.calls[0]!.resolve("before")
    expect(await first).toBe("before")
    await tick()
    expect(m.calls).toHaveLength(2)
    // A reader arriving now (the second load in flight) waits for a third.
    const late = reads.read("k", m.load)
    m.calls[1]!.resolve("after")
    expect(await Promise.all(waiting)).toEqual(["after", "after", "after"])
    await tick()
    expect(m.calls).toHaveLength(3)
    m.calls[2]!.resolve("latest")
    expect(await late).toBe("latest")
    await tick()
    expect(reads.inFlight).toBe(0)
  })

  it("keeps keys apart and shares a failure only with the readers of that load", async () => {
    const reads = new SharedReads()
    const a = manual<string>()
    const b = manual<string>()
    const pa = reads.read("tenant:1", a.load)
    const pb = reads.read("tenant:2", b.load)
    const pa2 = reads.read("tenant:1", a.load)
    expect(a.calls).toHaveLength(1)
    expect(b.calls).toHaveLength(1)
    a.calls[0]!.reject(new Error("db down"))
    b.calls[0]!.resolve("two")
    await expect(pa).rejects.toThrow("db down")
    expect(await pb).toBe("two")
    await tick()
    // The waiter's own load runs after the failed one and can succeed.
    a.calls[1]!.resolve("one")
    expect(await pa2).toBe("one")
  })

  it("survives a load that throws synchronously", async () => {
    const reads = new SharedReads()
    await expect(
      reads.read("k", () => {
        throw new Error("boom")
      }),
    ).rejects.toThrow("boom")
    await tick()
    expect(reads.inFlight).toBe(0)
    expect(await reads.read("k", async () => "ok")).toBe("ok")
  })
})

describe("the dashboard's list endpoints under concurrent polls", () => {
  let srv: TestServer
  let c: ReturnType<typeof api>
  let alice: Session
  let bob: Session
  let aliceKey: string
  let bobKey: string

  const get = async (path: string, bearer: string) => {
    const res = await c.call("GET", path, { token: bearer })
    return {
      status: res.status,
      type: res.headers.get("content-type"),
      body: (await res.json()) as Record<string, unknown>,
    }
  }
  const createWorkflow = async (s: Session, prompt: string) => {
    const res = await c.call("POST", "/api/workflows", { token: s.token, body: { nl_prompt: prompt } })
    expect(res.status).toBe(201)
    return ((await res.json()) as { id: number }).id
  }

  beforeAll(async () => {
    srv = await sharedTestServer()
    c = api(srv)
    alice = await c.signup()
    bob = await c.signup()
    aliceKey = (await c.createKey(alice, { name: "dash", scope: "read" })).secret
    bobKey = (await c.createKey(bob, { name: "dash", scope: "read" })).secret
    await createWorkflow(alice, "Remind gym members that their renewal is due")
    await createWorkflow(bob, "Offer bakery customers a loyalty card")
  })

  afterAll(async () => {
    await srv?.stop()
  })

  it("answers each workspace's concurrent polls with its own rows, as a lone request would", async () => {
    const paths = ["/api/workflows", "/billing/balance", "/api/approvals?status=pending", "/api/runs/live"]
    for (const path of paths) {
      const [aliceAlone, bobAlone] = [await get(path, aliceKey), await get(path, bobKey)]
      expect(aliceAlone.status, path).toBe(200)
      expect(aliceAlone.type, path).toBe("application/json; charset=utf-8")
      const burst = await Promise.all(Array.from({ length: 40 }, (_, i) => get(path, i % 2 === 0 ? aliceKey : bobKey)))
      for (const [i, r] of burst.entries()) expect(r, `${path} #${i}`).toEqual(i % 2 === 0 ? aliceAlone : bobAlone)
    }
    const list = (await get("/api/workflows", aliceKey)).body as { tenant_id: number; workflows: unknown[] }
    expect(list.tenant_id).toBe(alice.tenantId)
    expect(list.workflows).toHaveLength(1)
  })

  it("shows a change on the very next read while other polls of the same list are in flight", async () => {
    for (let i = 0; i < 5; i++) {
      // Keep the list busy: reads in flight and queued when the change commits and after it.
      const busy = Array.from({ length: 20 }, () => get("/api/workflows", aliceKey))
      const id = await createWorkflow(alice, `Campaign ${i}: tell members about the new pool`)
      const next = await get("/api/workflows", aliceKey)
      expect((next.body["workflows"] as Array<{ id: number }>).map((w) => w.id)).toContain(id)
      await Promise.all(busy)
    }
    expect(((await get("/api/workflows", bobKey)).body["workflows"] as unknown[]).length).toBe(1)
  })

  it("keeps filters and pages apart, and another workspace's workflow's runs are not found", async () => {
    const [page1, all] = await Promise.all([get("/api/workflows?limit=1", aliceKey), get("/api/workflows", aliceKey)])
    expect(page1.body["workflows"]).toHaveLength(1)
    expect(page1.body["next_cursor"]).not.toBeNull()
    expect((all.body["workflows"] as unknown[]).length).toBeGreaterThan(1)
    const bobsWorkflow = ((await get("/api/workflows", bobKey)).body["workflows"] as Array<{ id: number }>)[0]!.id
    const [mine, theirs] = await Promise.all([
      get(`/api/workflows/${bobsWorkflow}/runs`, bobKey),
      get(`/api/workflows/${bobsWorkflow}/runs`, aliceKey),
    ])
    expect(mine).toMatchObject({ status: 200, body: { runs: [], next_cursor: null } })
    expect(theirs).toMatchObject({ status: 404, body: { code: "NOT_FOUND" } })
  })
})
