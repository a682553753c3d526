// An open turn stream lives only as long as the credential it was opened with: revoking the API
// key or signing out the session ends it within a second, and leaves other credentials' streams
// (the same user's other session, another key) open.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"
import { type SseClient, sse } from "../support/sse-client.js"

let srv: TestServer
let a: ReturnType<typeof api>

beforeAll(async () => {
  srv = await sharedTestServer()
  a = api(srv)
})
afterAll(async () => srv?.stop())

const open = async (runId: number, headers: Record<string, string>): Promise<SseClient> => {
  const c = sse(`${srv.url}/api/runs/${runId}/turns/stream`, headers)
  expect(await c.status).toBe(200)
  return c
}

/** Whether the stream ended within `ms`. */
const endsWithin = (c: SseClient, ms: number) =>
  Promise.race([c.ended.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))])

describe("open turn streams", () => {
  it("end within a second of their API key being revoked; another key's stream stays open", async () => {
    const owner = await a.signup({ country: "US" })
    const runId = await a.runningRun(owner)
    const doomed = await a.createKey(owner, { name: "doomed", scope: "read" })
    const kept = await a.createKey(owner, { name: "kept", scope: "read" })
    const revoked = await open(runId, { authorization: `Bearer ${doomed.secret}` })
    const other = await open(runId, { authorization: `Bearer ${kept.secret}` })
    const t0 = Date.now()
    expect((await a.call("POST", `/api-keys/${doomed.id}/revoke`, { token: owner.token })).status).toBe(200)
    expect(await endsWithin(revoked, 1_000)).toBe(true)
    expect(Date.now() - t0).toBeLessThan(1_000)
    // Reconnecting with it is refused.
    expect(
      await sse(`${srv.url}/api/runs/${runId}/turns/stream`, { authorization: `Bearer ${doomed.secret}` }).status,
    ).toBe(401)
    expect(await endsWithin(other, 300)).toBe(false)
    other.close()
  })

  it("end within a second of their session signing out; the user's other session's stream stays open", async () => {
    const owner = await a.signup({ country: "US" })
    const runId = await a.runningRun(owner)
    const second = await a.login(owner.email, owner.password)
    const byCookie = await open(runId, { cookie: owner.cookie })
    const byBearer = await open(runId, { authorization: `Bearer ${owner.token}` })
    const otherSession = await open(runId, { authorization: `Bearer ${second.token}` })
    const t0 = Date.now()
    expect((await a.call("POST", "/auth/logout", { headers: { cookie: owner.cookie } })).status).toBe(200)
    expect(await endsWithin(byCookie, 1_000)).toBe(true)
    expect(await endsWithin(byBearer, 1_000)).toBe(true)
    expect(Date.now() - t0).toBeLessThan(1_000)
    expect(await endsWithin(otherSession, 300)).toBe(false)
    otherSession.close()
  })
})
