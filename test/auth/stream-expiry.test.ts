// An open event stream lives only as long as the credential it was opened with is valid: it ends
// at the API key's expires_at or the session's JWT exp (as revocation ends it), while streams of a
// key without expiry or of a longer session stay open.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Auth } from "../../src/auth/Auth.js"
import { SESSION_COOKIE } from "../../src/auth/authenticator.js"
import { SESSION_SECONDS } from "../../src/auth/jwt.js"
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

/** How long after its credential's expiry a stream may still be open. */
const GRACE_MS = 1_000
/** A timer may fire a millisecond before the instant it was set for (whole-millisecond rounding). */
const EARLY_MS = 20

interface Watched {
  readonly client: SseClient
  /** When the stream ended (epoch ms). */
  readonly endedAt: Promise<number>
}

/** The run's turn stream and the workspace's approval stream, opened with `headers`. */
async function openBoth(runId: number, headers: Record<string, string>): Promise<Watched[]> {
  const clients = [
    sse(`${srv.url}/api/runs/${runId}/turns/stream`, headers),
    sse(`${srv.url}/api/approvals/stream`, headers),
  ]
  for (const c of clients) expect(await c.status).toBe(200)
  return clients.map((client) => ({ client, endedAt: client.ended.then(() => Date.now()) }))
}

/** Whether the stream ended within `ms`. */
const endsWithin = (c: SseClient, ms: number) =>
  Promise.race([c.ended.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))])

/** Each stream ends at `expiresAt`, not before it and at most GRACE_MS after it. */
async function expectEndedAt(streams: Watched[], expiresAt: number): Promise<void> {
  const wait = expiresAt - Date.now() + GRACE_MS
  for (const s of streams) {
    expect(await endsWithin(s.client, Math.max(wait, 0))).toBe(true)
    const at = await s.endedAt
    expect(at).toBeGreaterThanOrEqual(expiresAt - EARLY_MS)
    expect(at).toBeLessThanOrEqual(expiresAt + GRACE_MS)
  }
}

// Each test waits out a credential of its own workspace: they wait side by side.
describe.concurrent("open event streams", () => {
  it("end when their API key expires; a key without expiry keeps its streams", async () => {
    const owner = await a.signup({ country: "US" })
    const runId = await a.runningRun(owner)
    const expiresAt = Date.now() + 3_000
    const expiring = await a.createKey(owner, {
      name: "expiring",
      scope: "read",
      expires_at: new Date(expiresAt).toISOString(),
    })
    expect(expiring.expires_at).toBe(new Date(expiresAt).toISOString())
    const kept = await a.createKey(owner, { name: "kept", scope: "read" })
    const doomed = await openBoth(runId, { authorization: `Bearer ${expiring.secret}` })
    const others = await openBoth(runId, { authorization: `Bearer ${kept.secret}` })
    await expectEndedAt(doomed, expiresAt)
    // Reconnecting with it is refused.
    const again = sse(`${srv.url}/api/runs/${runId}/turns/stream`, { authorization: `Bearer ${expiring.secret}` })
    expect(await again.status).toBe(401)
    for (const o of others) expect(await endsWithin(o.client, 300)).toBe(false)
    for (const o of others) o.client.close()
  })

  it("end when their session's token expires (bearer and cookie); a longer session keeps its streams", async () => {
    const owner = await a.signup({ country: "US" })
    const runId = await a.runningRun(owner)
    // The server's own signer, issuing as if the session began almost SESSION_SECONDS ago: it expires in 3–4 s.
    const jwt = srv.running.runtime.runSync(Auth).jwt
    const issuedAt = Math.floor(Date.now() / 1000) + 4 - SESSION_SECONDS
    const { token, claims } = await jwt.sign(
      { id: owner.userId, tenantId: owner.tenantId, role: "owner", email: owner.email },
      issuedAt,
    )
    const expiresAt = claims.exp * 1000
    const byBearer = await openBoth(runId, { authorization: `Bearer ${token}` })
    const byCookie = await openBoth(runId, { cookie: `${SESSION_COOKIE}=${token}` })
    const others = await openBoth(runId, { authorization: `Bearer ${owner.token}` })
    await expectEndedAt([...byBearer, ...byCookie], expiresAt)
    const again = sse(`${srv.url}/api/approvals/stream`, { authorization: `Bearer ${token}` })
    expect(await again.status).toBe(401)
    for (const o of others) expect(await endsWithin(o.client, 300)).toBe(false)
    for (const o of others) o.client.close()
  })
})
