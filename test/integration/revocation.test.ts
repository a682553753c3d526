// Revocation is immediate in every api process: once a revoke or logout has answered, the very
// next request with that credential is refused by any process, even one whose auth cache was warm.
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { connectPostgres } from "../../src/platform/Db.js"
import { freshDatabase, type SpawnedServer, spawnServer } from "../support/harness.js"
import { type SseClient, sse } from "../support/sse-client.js"

/** Several api processes only share state through a real Postgres and NATS. */
const real = Boolean(process.env.DATABASE_URL && process.env.NATS_URL)

const RACES = 20

interface Answer {
  readonly status: number
  readonly body: Record<string, unknown>
}

async function call(
  base: string,
  method: "GET" | "POST",
  path: string,
  opts: { bearer?: string; body?: unknown } = {},
): Promise<Answer> {
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

/** A new workspace owner, signed up on `base`; `signIn` opens another session for them. */
async function newAccount(base: string): Promise<{ signIn(on: string): Promise<string> }> {
  const email = `revoke-${randomBytes(5).toString("hex")}@example.com`
  const password = "correct-horse-battery"
  expect(await call(base, "POST", "/auth/signup", { body: { email, password, full_name: "Revoker" } })).toMatchObject({
    status: 201,
  })
  return {
    signIn: async (on) => {
      const login = await call(on, "POST", "/auth/login", { body: { email, password } })
      expect(login).toMatchObject({ status: 200 })
      return login.body["token"] as string
    },
  }
}

async function createReadKey(base: string, jwt: string): Promise<{ id: number; secret: string }> {
  const created = await call(base, "POST", "/api-keys", {
    bearer: jwt,
    body: { name: `race ${randomBytes(3).toString("hex")}`, scope: "read" },
  })
  expect(created).toMatchObject({ status: 201, body: { scope: "read" } })
  return { id: created.body["id"] as number, secret: created.body["secret"] as string }
}

const keyRevoked = { status: 401, body: { code: "KEY_REVOKED" } }

/** Key created and revoked on `a`, used on `b` before and right after. */
async function keyRevocation(a: string, b: string): Promise<void> {
  const jwt = await (await newAccount(a)).signIn(a)
  const key = await createReadKey(a, jwt)
  const warm = await call(b, "GET", "/auth/me", { bearer: key.secret })
  expect(warm).toMatchObject({ status: 200, body: { api_key: { id: key.id, scope: "read" } } })
  expect(await call(a, "POST", `/api-keys/${key.id}/revoke`, { bearer: jwt })).toMatchObject({
    status: 200,
    body: { id: key.id, status: "revoked" },
  })
  expect(await call(b, "GET", "/auth/me", { bearer: key.secret })).toMatchObject(keyRevoked)
  expect(await call(a, "GET", "/auth/me", { bearer: key.secret })).toMatchObject(keyRevoked)
}

/** Session signed out on `a`, used on `b` before and right after. */
async function sessionRevocation(a: string, b: string): Promise<void> {
  const account = await newAccount(a)
  const jwt = await account.signIn(a)
  expect(await call(b, "GET", "/auth/me", { bearer: jwt })).toMatchObject({
    status: 200,
    body: { user: { role: "owner" } },
  })
  expect(await call(a, "POST", "/auth/logout", { bearer: jwt })).toMatchObject({ status: 200, body: { ok: true } })
  expect(await call(b, "GET", "/auth/me", { bearer: jwt })).toMatchObject({ status: 401 })
  expect(await call(a, "GET", "/auth/me", { bearer: jwt })).toMatchObject({ status: 401 })
  // Only that session ended: the same user's other session still works everywhere.
  const other = await account.signIn(b)
  expect(await call(a, "GET", "/auth/me", { bearer: other })).toMatchObject({ status: 200 })
}

/** `RACES` times: create on `a`, warm `b`'s cache, revoke on `a`, and ask `b` at once. */
async function keyRaces(a: string, b: string): Promise<void> {
  const jwt = await (await newAccount(a)).signIn(a)
  for (let i = 0; i < RACES; i++) {
    const key = await createReadKey(a, jwt)
    expect(await call(b, "GET", "/auth/me", { bearer: key.secret }), `race ${i}: warm-up`).toMatchObject({
      status: 200,
    })
    expect(await call(a, "POST", `/api-keys/${key.id}/revoke`, { bearer: jwt }), `race ${i}: revoke`).toMatchObject({
      status: 200,
    })
    expect(
      await call(b, "GET", "/auth/me", { bearer: key.secret }),
      `race ${i}: first request after revoke`,
    ).toMatchObject(keyRevoked)
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

describe("revocation with one process on the embedded defaults", () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>
  let server: SpawnedServer | undefined
  let url: string

  beforeAll(async () => {
    db = await freshDatabase()
    // Blank means unset: PGlite in DATA_DIR (the suite's migrated template copy, or on a Postgres
    // run an empty directory migrated at start-up) and the in-process bus, whatever the suite uses.
    server = await spawnServer({ role: "all", env: { ...db.env, DATABASE_URL: "", NATS_URL: "" } })
    url = server.url!
  })

  afterAll(async () => {
    await stopAll([server])
    await db?.drop()
  })

  it("refuses a revoked key and a signed-out session on the very next request, every time", async () => {
    const health = await call(url, "GET", "/healthz")
    expect(health).toMatchObject({
      status: 200,
      body: { checks: { database: { kind: "pglite" }, bus: { kind: "memory" } } },
    })
    await keyRevocation(url, url)
    await sessionRevocation(url, url)
    await keyRaces(url, url)
  })
})

// Declared only when there is a real Postgres and NATS for separate processes to share.
if (real)
  describe("revocation across api processes (real Postgres and NATS)", () => {
    let db: Awaited<ReturnType<typeof freshDatabase>>
    let processes: SpawnedServer[] = []
    let a: string
    let b: string

    beforeAll(async () => {
      db = await freshDatabase()
      const env = {
        ...db.env,
        NATS_URL: process.env.NATS_URL!,
        BUS_NAMESPACE: `revoke${randomBytes(5).toString("hex")}`,
      }
      const started = await Promise.allSettled([
        spawnServer({ role: "api", env }),
        spawnServer({ role: "api", env }),
        spawnServer({ role: "runtime", env }),
      ])
      processes = started.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []))
      const failed = started.find((s): s is PromiseRejectedResult => s.status === "rejected")
      if (failed) throw failed.reason
      a = processes[0]!.url!
      b = processes[1]!.url!
    })

    afterAll(async () => {
      await stopAll(processes)
      await db?.drop()
    })

    it("runs two api processes and a runtime on one Postgres and NATS", async () => {
      const [ha, hb] = await Promise.all([call(a, "GET", "/healthz"), call(b, "GET", "/healthz")])
      for (const h of [ha, hb])
        expect(h).toMatchObject({
          status: 200,
          body: {
            status: "ok",
            instance: { role: "api" },
            checks: { database: { kind: "postgres" }, bus: { kind: "nats" }, runtime: { ok: true } },
          },
        })
      expect((ha.body["instance"] as { id: string }).id).not.toBe((hb.body["instance"] as { id: string }).id)
    })

    it("a key revoked on A is refused by B's warm cache on the very next request", () => keyRevocation(a, b))

    it("a session signed out on A is refused by B's warm cache on the very next request", () => sessionRevocation(a, b))

    it(`holds ${RACES} times in a row: create, warm B, revoke on A, ask B at once`, () => keyRaces(a, b))

    it(
      "a turn stream open on B ends within a second of its " + "key being revoked or its session signed out on A",
      async () => {
        const account = await newAccount(a)
        const jwt = await account.signIn(a)
        const me = await call(a, "GET", "/auth/me", { bearer: jwt })
        const tenantId = (me.body["tenant"] as { id: number }).id
        const wf = await call(a, "POST", "/api/workflows", {
          bearer: jwt,
          body: { nl_prompt: "Check in with our customers." },
        })
        expect(wf).toMatchObject({ status: 201 })
        const sql = connectPostgres(db.env.DATABASE_URL!, 1)
        let runId: number
        try {
          ;[{ id: runId }] = await sql<[{ id: number }]>`insert into runs (tenant_id, workflow_id, status)
            values (${tenantId}, ${wf.body["id"] as number}, 'running') returning id`
        } finally {
          await sql.end()
        }
        const endsWithin = (c: SseClient, ms: number) =>
          Promise.race([c.ended.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))])

        const key = await createReadKey(a, jwt)
        const byKey = sse(`${b}/api/runs/${runId}/turns/stream`, { authorization: `Bearer ${key.secret}` })
        const bySession = sse(`${b}/api/runs/${runId}/turns/stream`, { authorization: `Bearer ${jwt}` })
        expect(await byKey.status).toBe(200)
        expect(await bySession.status).toBe(200)
        expect(await call(a, "POST", `/api-keys/${key.id}/revoke`, { bearer: jwt })).toMatchObject({ status: 200 })
        expect(await endsWithin(byKey, 1_000)).toBe(true)
        expect(await endsWithin(bySession, 200)).toBe(false)
        expect(await call(a, "POST", "/auth/logout", { bearer: jwt })).toMatchObject({ status: 200 })
        expect(await endsWithin(bySession, 1_000)).toBe(true)
      },
    )
  })
