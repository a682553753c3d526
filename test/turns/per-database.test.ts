// Two servers in one process, each on its own database where workspace and run ids repeat (as the
// test workers run them): what the turn ingest learned about workspace 1's run 1 on one server must
// not answer for workspace 1 on the other (src/platform/per-database.ts).
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

const SYSTEM_KEY = "system-key-for-per-database-tests"
let first: TestServer
let second: TestServer

beforeAll(async () => {
  first = await startTestServer({ env: { SYSTEM_KEY } })
  second = await startTestServer({ env: { SYSTEM_KEY } })
})
afterAll(async () => Promise.all([first?.stop(), second?.stop()]))

const ingest = (srv: TestServer, tenantId: number, runId: number) =>
  fetch(`${srv.url}/internal/turns`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-system-key": SYSTEM_KEY, "x-tenant-id": String(tenantId) },
    body: JSON.stringify({ run_id: runId, target_id: 1, seq: 0, speaker: "agent", text: "hello" }),
  })

describe("state a process keeps per database", () => {
  it("does not carry a run known on one server's database to another server's same ids", async () => {
    const a: Session = await api(first).signup({ country: "US" })
    const b: Session = await api(second).signup({ country: "US" })
    expect(b.tenantId).toBe(a.tenantId)
    const w = (await (
      await api(first).call("POST", "/api/workflows", { token: a.token, body: { nl_prompt: "Check in." } })
    ).json()) as { id: number }
    const [run] = await first.sql<[{ id: number }]>`
      insert into runs (tenant_id, workflow_id, status) values (${a.tenantId}, ${w.id}, 'running') returning id`
    expect((await ingest(first, a.tenantId, run.id)).status).toBeLessThan(300)
    // The same workspace id and run id on the second database: no such run there.
    const refused = await ingest(second, b.tenantId, run.id)
    expect(refused.status).toBe(404)
    expect(await second.sql`select 1 from turns`).toHaveLength(0)
  })
})
