// The dashboard's lists read after a write across api processes: a change answered by one process
// is in the very next list any other process answers, while that list is being polled hard.
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freshDatabase, type SpawnedServer, spawnServer } from "../support/harness.js"

/** Several api processes only share state through a real Postgres and NATS. */
const real = Boolean(process.env.DATABASE_URL && process.env.NATS_URL)
const RACES = 8

async function call(
  base: string,
  method: "GET" | "POST" | "PUT",
  path: string,
  opts: { bearer?: string; body?: unknown } = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const headers: Record<string, string> = {}
  if (opts.bearer !== undefined) headers["authorization"] = `Bearer ${opts.bearer}`
  if (opts.body !== undefined) headers["content-type"] = "application/json"
  const res = await fetch(base + path, {
    method,
    headers,
    ...(opts.body !== undefined && { body: JSON.stringify(opts.body) }),
  })
  const text = await res.text()
  return { status: res.status, body: text === "" ? {} : (JSON.parse(text) as Record<string, unknown>) }
}

/** A workspace signed up on `a`: its owner's session and a read-scoped API key. */
async function workspace(a: string): Promise<{ jwt: string; key: string }> {
  const email = `reads-${randomBytes(5).toString("hex")}@example.com`
  const password = "correct-horse-battery"
  expect(await call(a, "POST", "/auth/signup", { body: { email, password } })).toMatchObject({ status: 201 })
  const login = await call(a, "POST", "/auth/login", { body: { email, password } })
  const jwt = login.body["token"] as string
  const key = await call(a, "POST", "/api-keys", { bearer: jwt, body: { name: "dash", scope: "read" } })
  expect(key).toMatchObject({ status: 201 })
  return { jwt, key: key.body["secret"] as string }
}

type Workflow = { id: number; name: string; status: string }
const workflowsOn = async (base: string, key: string): Promise<Workflow[]> => {
  const list = await call(base, "GET", "/api/workflows", { bearer: key })
  expect(list.status).toBe(200)
  return list.body["workflows"] as Workflow[]
}

/** Polls `b`'s list without pause until stopped, as a wall of dashboards would. */
function pollHard(b: string, key: string): () => Promise<void> {
  let stop = false
  const loops = Array.from({ length: 8 }, async () => {
    while (!stop) await workflowsOn(b, key)
  })
  return async () => {
    stop = true
    await Promise.all(loops)
  }
}

/** `RACES` times: create (then rename) a workflow on `a` while `b` is polled, and read `b` at once. */
async function changesVisible(a: string, b: string): Promise<void> {
  const { jwt, key } = await workspace(a)
  const stopPolling = pollHard(b, key)
  try {
    for (let i = 0; i < RACES; i++) {
      const created = await call(a, "POST", "/api/workflows", {
        bearer: jwt,
        body: { nl_prompt: `Race ${i}: remind members that the pool reopens on Monday` },
      })
      expect(created, `race ${i}: create`).toMatchObject({ status: 201 })
      const id = created.body["id"] as number
      expect(
        (await workflowsOn(b, key)).map((w) => w.id),
        `race ${i}: first read after create`,
      ).toContain(id)
      const name = `renamed ${i} ${randomBytes(3).toString("hex")}`
      expect(await call(a, "PUT", `/api/workflows/${id}`, { bearer: jwt, body: { name } })).toMatchObject({
        status: 200,
      })
      expect((await workflowsOn(b, key)).find((w) => w.id === id)?.name, `race ${i}: first read after rename`).toBe(
        name,
      )
    }
  } finally {
    await stopPolling()
  }
}

async function stopAll(processes: ReadonlyArray<SpawnedServer | undefined>): Promise<void> {
  await Promise.all(
    processes.map(async (p) => {
      if (!p || p.child.exitCode !== null || p.child.signalCode !== null) return
      p.child.kill("SIGTERM")
      await p.exited
    }),
  )
}

describe("shared reads with one process on the embedded defaults", () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>
  let server: SpawnedServer | undefined

  beforeAll(async () => {
    db = await freshDatabase()
    server = await spawnServer({ role: "all", env: { ...db.env, DATABASE_URL: "", NATS_URL: "" } })
  })

  afterAll(async () => {
    await stopAll([server])
    await db?.drop()
  })

  it("a change is in the very next list read while the list is polled hard", () =>
    changesVisible(server!.url!, server!.url!))
})

// Declared only when there is a real Postgres and NATS for separate processes to share.
if (real)
  describe("shared reads across api processes (real Postgres and NATS)", () => {
    let db: Awaited<ReturnType<typeof freshDatabase>>
    let processes: SpawnedServer[] = []

    beforeAll(async () => {
      db = await freshDatabase()
      const env = {
        ...db.env,
        NATS_URL: process.env.NATS_URL!,
        BUS_NAMESPACE: `reads${randomBytes(5).toString("hex")}`,
      }
      const started = await Promise.allSettled([spawnServer({ role: "api", env }), spawnServer({ role: "api", env })])
      processes = started.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []))
      const failed = started.find((s): s is PromiseRejectedResult => s.status === "rejected")
      if (failed) throw failed.reason
    })

    afterAll(async () => {
      await stopAll(processes)
      await db?.drop()
    })

    it("a change answered by A is in B's very next list read while B is polled hard", () =>
      changesVisible(processes[0]!.url!, processes[1]!.url!))

    it("and the other way round", () => changesVisible(processes[1]!.url!, processes[0]!.url!))
  })
