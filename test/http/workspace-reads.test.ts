// Kept list answers (src/platform/workspace-reads.ts, api/pipeline/cached-reads.ts): a dashboard's
// list is answered from memory until something it reads changes, whoever changed it: the api
// (in the very next read), or any other writer of the database (announced by its commit's NOTIFY).
import pino from "pino"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startCachedReads } from "../../api/pipeline/cached-reads.js"
import { bytes } from "../../api/reply.js"
import type { AnyRoute } from "../../api/route.js"
import { makeMemoryBus } from "../../src/platform/bus/memory.bus.js"
import type { Database } from "../../src/platform/Db.js"
import { WorkspaceReads } from "../../src/platform/workspace-reads.js"
import { api, type Session } from "../support/clients.js"
import { realServices, sharedTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

describe("WorkspaceReads", () => {
  const body = (s: string) => Buffer.from(s)
  const TYPE = "application/json"

  it("keeps nothing and answers nothing while it does not hear changes", () => {
    const r = new WorkspaceReads()
    expect(r.offer(r.ticket(1), "k", body("a"), TYPE)).toBe(false)
    r.setListening(true)
    expect(r.offer(r.ticket(1), "k", body("a"), TYPE)).toBe(true)
    expect(r.get(1, "k")?.body.toString()).toBe("a")
    r.setListening(false)
    expect(r.get(1, "k")).toBeUndefined()
    r.setListening(true)
    // Listening again drops what was kept: changes may have been missed meanwhile.
    expect(r.get(1, "k")).toBeUndefined()
  })

  it("does not keep a load's answer when a change of its workspace came while it ran", () => {
    const r = new WorkspaceReads()
    r.setListening(true)
    const before = r.ticket(7)
    r.changed(7)
    expect(r.offer(before, "k", body("old"), TYPE)).toBe(false)
    expect(r.get(7, "k")).toBeUndefined()
    // Another workspace's change does not matter to it; a change of unknown workspace does.
    const t = r.ticket(7)
    r.changed(8)
    expect(r.offer(t, "k", body("new"), TYPE)).toBe(true)
    const u = r.ticket(7)
    r.changedAll()
    expect(r.offer(u, "k", body("newer"), TYPE)).toBe(false)
    expect(r.get(7, "k")).toBeUndefined()
  })

  it("keeps workspaces apart and drops a workspace's answers when it changes", () => {
    const r = new WorkspaceReads()
    r.setListening(true)
    r.offer(r.ticket(1), "k", body("one"), TYPE)
    r.offer(r.ticket(2), "k", body("two"), TYPE)
    expect(r.get(1, "k")?.body.toString()).toBe("one")
    expect(r.get(2, "k")?.body.toString()).toBe("two")
    r.changed(1)
    expect(r.get(1, "k")).toBeUndefined()
    expect(r.get(2, "k")?.body.toString()).toBe("two")
  })

  it("forgets an answer at its deadline and at the age bound, and stays within its limits", () => {
    let now = 0
    const r = new WorkspaceReads({ perWorkspace: 2, workspaces: 2, bytes: 64, maxAgeMs: 1_000 }, () => now)
    r.setListening(true)
    r.offer(r.ticket(1), "held", body("x"), TYPE, 100)
    r.offer(r.ticket(1), "list", body("y"), TYPE)
    now = 99
    expect(r.get(1, "held")).toBeDefined()
    now = 100
    expect(r.get(1, "held")).toBeUndefined()
    expect(r.get(1, "list")).toBeDefined()
    now = 1_000
    expect(r.get(1, "list")).toBeUndefined()
    // At most 2 answers per workspace (the oldest goes), 2 workspaces, 64 bytes.
    for (const k of ["a", "b", "c"]) r.offer(r.ticket(1), k, body(k), TYPE)
    expect([r.get(1, "a"), r.get(1, "b"), r.get(1, "c")].map((a) => a?.body.toString())).toEqual([undefined, "b", "c"])
    r.offer(r.ticket(2), "k", body("2"), TYPE)
    r.offer(r.ticket(3), "k", body("3"), TYPE)
    expect(r.get(1, "b")).toBeUndefined()
    expect(r.size).toBe(2)
    expect(r.offer(r.ticket(3), "big", Buffer.alloc(60), TYPE)).toBe(false)
  })
})

describe("api processes sharing a bus", () => {
  /** A database that listens but never notifies: only the bus can carry a change between processes. */
  const silentDb = {
    listen: async (_c: string, _p: unknown, onLive: (l: boolean) => void) => (onLive(true), async () => {}),
  }
  const route = { path: "/api/workflows" } as AnyRoute
  const until = async (ok: () => boolean) => {
    for (let i = 0; i < 100 && !ok(); i++) await new Promise((r) => setTimeout(r, 10))
  }

  it("answers a change's client only once every other api process dropped the workspace's answers", async () => {
    const bus = makeMemoryBus()
    const log = pino({ level: "silent" })
    const [one, two] = [
      await startCachedReads(silentDb as unknown as Database, bus, log),
      await startCachedReads(silentDb as unknown as Database, bus, log),
    ]
    try {
      // Each learns the other is there (the newcomer's hello is answered).
      const keep = (p: typeof one) => {
        const slot = p.lookup(route, 5, {}, "")
        if (!("ticket" in slot)) throw new Error("expected nothing kept yet")
        p.keep(slot, bytes("application/json", "[1]"))
      }
      keep(two)
      const kept = () => !("ticket" in two.lookup(route, 5, {}, ""))
      expect(kept()).toBe(true)
      let first: Promise<void> | undefined
      await until(() => (first = one.changed(5)) !== undefined)
      await first
      keep(two)
      const acked = one.changed(5)
      expect(acked).toBeInstanceOf(Promise)
      await acked
      // Acknowledged means applied: the other process answers from the database now.
      expect(kept()).toBe(false)
    } finally {
      await Promise.all([one.stop(), two.stop()])
      await bus.drain()
    }
  })
})

describe("cached lists through the server", () => {
  let srv: TestServer
  let a: ReturnType<typeof api>

  beforeAll(async () => {
    srv = await sharedTestServer()
    a = api(srv)
  })
  afterAll(async () => srv?.stop())

  const get = async (path: string, s: Session | string) => {
    const res = await a.call("GET", path, { token: typeof s === "string" ? s : s.token })
    return { status: res.status, body: (await res.json()) as Json }
  }
  const names = async (s: Session) => ((await get("/api/workflows", s)).body.workflows as Json[]).map((w) => w.name)

  /** Changes a workflow's name in the database without announcing it (no trigger fires), as no writer may. */
  const renameUnannounced = (id: number, name: string) =>
    srv.sql.begin(async (tx) => {
      await tx`set local session_replication_role = replica`
      await tx`update workflows set name = ${name} where id = ${id}`
    })

  it("answers a list from memory until a commit says it changed, whoever wrote it", async () => {
    const s = await a.signup()
    const w = await a.call("POST", "/api/workflows", { token: s.token, body: { nl_prompt: "Remind members" } })
    const { id, name } = (await w.json()) as Json
    expect(await names(s)).toEqual([name])
    // Not announced: the kept answer stands, which only an answer from memory would show.
    await renameUnannounced(id, "quietly renamed")
    expect(await names(s)).toEqual([name])
    // A writer outside the api (the runtime, a sweeper): its commit's NOTIFY drops the kept answer.
    await srv.sql`update workflows set name = 'renamed by another writer' where id = ${id}`
    let seen: string[] = []
    for (let i = 0; i < 50; i++) {
      seen = await names(s)
      if (seen[0] !== name) break
      await new Promise((r) => setTimeout(r, 20))
    }
    expect(seen).toEqual(["renamed by another writer"])
  })

  it.runIf(realServices)("stops answering from memory when its LISTEN connection is lost", async () => {
    const s = await a.signup()
    const w = await a.call("POST", "/api/workflows", { token: s.token, body: { nl_prompt: "Remind members" } })
    const { id, name } = (await w.json()) as Json
    expect(await names(s)).toEqual([name])
    await renameUnannounced(id, "renamed while nobody listened")
    expect(await names(s)).toEqual([name])
    // Postgres ends the listening connection (a restart, a network cut): what it may have missed is dropped.
    await srv.sql`select pg_terminate_backend(pid) from pg_stat_activity
      where datname = current_database() and query like 'listen %' and pid <> pg_backend_pid()`
    let seen: string[] = []
    for (let i = 0; i < 50 && seen[0] !== "renamed while nobody listened"; i++) {
      await new Promise((r) => setTimeout(r, 20))
      seen = await names(s)
    }
    expect(seen).toEqual(["renamed while nobody listened"])
    // Listening again, it keeps answers and hears changes as before.
    await new Promise((r) => setTimeout(r, 400))
    await srv.sql`update workflows set name = 'heard again' where id = ${id}`
    for (let i = 0; i < 50 && seen[0] !== "heard again"; i++) {
      await new Promise((r) => setTimeout(r, 20))
      seen = await names(s)
    }
    expect(seen).toEqual(["heard again"])
  })

  it("shows a change made through the api in the very next read", async () => {
    const s = await a.signup()
    expect(await names(s)).toEqual([])
    for (let i = 0; i < 5; i++) {
      const w = (await (
        await a.call("POST", "/api/workflows", { token: s.token, body: { nl_prompt: `Campaign ${i}` } })
      ).json()) as Json
      expect((await names(s))[0]).toBe(w.name)
      const name = `renamed ${i}`
      expect((await a.call("PUT", `/api/workflows/${w.id}`, { token: s.token, body: { name } })).status).toBe(200)
      expect((await names(s))[0]).toBe(name)
    }
  })

  it("shows a confirmed payment, announced by its commit alone, in the very next balance read", async () => {
    const s = await a.signup()
    const before = (await get("/billing/balance", s)).body.balance_minor as number
    for (const amount of [100_000, 250_000]) {
      const res = await a.call("POST", "/billing/topup", { token: s.token, body: { amount_minor: amount } })
      const intent = (await res.json()) as Json
      await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
      const after = (await get("/billing/balance", s)).body.balance_minor as number
      expect(after - before).toBeGreaterThanOrEqual(amount)
    }
  })

  it("never answers another workspace's list, nor a caller without the permission", async () => {
    const [s1, s2] = [await a.signup(), await a.signup()]
    await a.call("POST", "/api/workflows", { token: s1.token, body: { nl_prompt: "Only the first workspace's" } })
    expect(await names(s1)).toHaveLength(1)
    expect(await names(s1)).toHaveLength(1)
    expect(await names(s2)).toEqual([])
    expect((await a.call("GET", "/api/workflows")).status).toBe(401)
    expect((await get("/api/workflows", "svc_live_not-a-key")).status).toBe(401)
    // The kept page is one filter's: another query string is read, and refused if invalid.
    expect((await get("/api/workflows?status=nonsense", s1)).status).toBe(422)
    expect((await get("/api/workflows?status=draft", s1)).status).toBe(200)
  })
})
