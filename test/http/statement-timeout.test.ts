// Every pooled connection carries DB_STATEMENT_TIMEOUT_MS, so a runaway statement is cancelled by
// Postgres; a cancelled statement (SQLSTATE 57014) answers 503 DATABASE_TIMEOUT with Retry-After,
// not a bare 500. PGlite accepts the setting but cannot enforce it: the cancellation itself is
// checked on real Postgres only.
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { json } from "../../api/reply.js"
import { route } from "../../api/route.js"
import { query } from "../../src/platform/Db.js"
import { realServices, startTestServer, type TestServer } from "../support/harness.js"

const probes = [
  route({
    method: "GET",
    path: "/test/slow-statement",
    auth: "public",
    summary: "runs a statement longer than the timeout",
    tags: ["test"],
    handler: () =>
      Effect.map(
        query((sql) => sql`select pg_sleep(2)`),
        () => json({ slept: true }),
      ),
  }),
  route({
    method: "GET",
    path: "/test/cancelled-statement",
    auth: "public",
    summary: "fails as postgres.js does when Postgres cancels a statement",
    tags: ["test"],
    handler: () =>
      Effect.die(
        Object.assign(new Error("canceling statement due to statement timeout"), { code: "57014", severity: "ERROR" }),
      ),
  }),
]

let srv: TestServer
beforeAll(async () => {
  srv = await startTestServer({ extraRoutes: probes, env: { DB_STATEMENT_TIMEOUT_MS: "300" } })
})
afterAll(async () => srv?.stop())

describe("statement_timeout", () => {
  it("answers a cancelled statement with 503 DATABASE_TIMEOUT and Retry-After", async () => {
    const res = await fetch(`${srv.url}/test/cancelled-statement`)
    expect(res.status).toBe(503)
    expect(res.headers.get("retry-after")).toBe("5")
    expect(await res.json()).toEqual({ error: expect.any(String), code: "DATABASE_TIMEOUT" })
  })

  it.skipIf(!realServices)(
    "is set on the server's connections and cancels a long statement (real Postgres)",
    async () => {
      const db = await srv.running.runtime.runPromise(
        query((sql) => sql<[{ statement_timeout: string }]>`show statement_timeout`),
      )
      expect(db[0].statement_timeout).toBe("300ms")
      const t0 = Date.now()
      const res = await fetch(`${srv.url}/test/slow-statement`)
      expect(res.status).toBe(503)
      expect(await res.json()).toMatchObject({ code: "DATABASE_TIMEOUT" })
      expect(Date.now() - t0).toBeLessThan(1_500)
      // The connection is fine afterwards.
      expect((await fetch(`${srv.url}/healthz`)).status).toBe(200)
    },
  )
})
