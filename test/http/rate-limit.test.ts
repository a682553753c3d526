// RATE_LIMIT_RPS: a workspace past N requests in a second gets 429 RATE_LIMITED with
// X-RateLimit-Limit, X-RateLimit-Remaining and Retry-After; other workspaces, public routes and a
// deployment without the setting are not limited. The limiter's leasing is checked on its own
// against a shared window, as two processes would share the database's.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Lease, WorkspaceRateLimiter } from "../../src/platform/workspace-rate.js"
import { api } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

const N = 10

/** Resolves just after the next whole second (the database's clock is this machine's). */
async function nextSecond(): Promise<void> {
  await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 15))
}

describe("WorkspaceRateLimiter", () => {
  /** One window shared by several limiters, as the database row is shared by api processes. */
  function sharedWindow(limit: number) {
    const state = { used: 0, leases: 0 }
    const lease = async (_tenant: number, want: number): Promise<Lease> => {
      await new Promise((r) => setImmediate(r))
      state.leases++
      const granted = Math.max(0, Math.min(want, limit - state.used))
      state.used += granted
      return { granted, used: state.used, msLeft: 60_000 }
    }
    return { state, lease }
  }

  it("never admits more than the limit across processes, and admits all of it", async () => {
    const limit = 500
    const { state, lease } = sharedWindow(limit)
    const a = new WorkspaceRateLimiter({ limit, lease })
    const b = new WorkspaceRateLimiter({ limit, lease })
    const verdicts = await Promise.all(Array.from({ length: 1500 }, (_, i) => (i % 2 ? a : b).admit(7)))
    const admitted = verdicts.filter((v) => v.allowed).length
    // Leased in slices of N/50: fewer round trips than requests, and at most a slice each unused.
    expect(admitted).toBeLessThanOrEqual(limit)
    expect(admitted).toBeGreaterThanOrEqual(limit * 0.9)
    expect(state.leases).toBeLessThan(100)
    const refused = verdicts.find((v) => !v.allowed)
    expect(refused).toEqual({ allowed: false, limit, remaining: 0, retryAfterSeconds: 60 })
  })

  it("answers from leased budget without waiting, and opens again in the next window", async () => {
    let now = 1_000
    let window = 0
    let used = 0
    const lease = async (_t: number, want: number): Promise<Lease> => {
      const w = Math.floor(now / 1000)
      if (w !== window) {
        window = w
        used = 0
      }
      const granted = Math.max(0, Math.min(want, 3 - used))
      used += granted
      return { granted, used, msLeft: 1000 - (now % 1000) }
    }
    const rl = new WorkspaceRateLimiter({ limit: 3, lease, now: () => now })
    const first = await rl.admit(1)
    expect(first.allowed).toBe(true)
    // A slice of one (3/50 rounded up): each request leases, the fourth is refused.
    expect((await rl.admit(1)).allowed).toBe(true)
    expect((await rl.admit(1)).allowed).toBe(true)
    expect(await rl.admit(1)).toMatchObject({ allowed: false, retryAfterSeconds: 1 })
    // Refused from memory, with no lease, until the window ends.
    expect(rl.admit(1)).toMatchObject({ allowed: false })
    now = 2_001
    expect((await rl.admit(1)).allowed).toBe(true)
  })

  it("admits uncounted for a second when the database does not answer, and reports it", async () => {
    const errors: unknown[] = []
    let now = 5_000
    const rl = new WorkspaceRateLimiter({
      limit: 1,
      lease: async () => Promise.reject(new Error("connection refused")),
      onError: (e) => errors.push(e),
      now: () => now,
    })
    expect((await rl.admit(1)).allowed).toBe(true)
    expect(rl.admit(1)).toEqual({ allowed: true })
    expect(errors).toHaveLength(1)
    now += 1001
    expect((await rl.admit(1)).allowed).toBe(true)
    expect(errors).toHaveLength(2)
  })
})

describe(`RATE_LIMIT_RPS=${N}`, () => {
  let srv: TestServer
  beforeAll(async () => {
    srv = await startTestServer({ env: { RATE_LIMIT_RPS: String(N) } })
  })
  afterAll(async () => srv?.stop())

  it("answers a workspace's requests past N in one second 429 with the rate-limit headers", async () => {
    const client = api(srv)
    const owner = await client.signup({ verify: false })
    const other = await client.signup({ verify: false })
    const key = await client.createKey(owner, { name: "reader", scope: "read" })
    await nextSecond()
    const started = Date.now()
    // The workspace's user and its API key draw on one budget.
    const answers = await Promise.all(
      Array.from({ length: 3 * N }, (_, i) =>
        client.call("GET", "/auth/me", { token: i % 2 ? owner.token : key.secret }),
      ),
    )
    const elapsed = Date.now() - started
    const ok = answers.filter((r) => r.status === 200)
    const limited = answers.filter((r) => r.status === 429)
    expect(ok.length + limited.length).toBe(3 * N)
    // All inside one window unless the machine stalled (then at most two windows' worth).
    if (elapsed < 900) expect(ok.length).toBe(N)
    else expect(ok.length).toBeLessThanOrEqual(2 * N)
    const r = limited[0]!
    expect(r.headers.get("x-ratelimit-limit")).toBe(String(N))
    expect(r.headers.get("x-ratelimit-remaining")).toBe("0")
    expect(r.headers.get("retry-after")).toBe("1")
    expect(await r.json()).toMatchObject({ code: "RATE_LIMITED", error: expect.any(String), retry_after_seconds: 1 })

    // Another workspace has its own budget, and public routes are not counted.
    if (Date.now() - started < 900) {
      expect((await client.call("GET", "/auth/me", { token: other.token })).status).toBe(200)
      expect((await client.call("GET", "/healthz")).status).toBe(200)
    }
    // The next second the workspace is served again.
    await nextSecond()
    expect((await client.call("GET", "/auth/me", { token: owner.token })).status).toBe(200)
  })

  it("refuses a body it has not read, closing the connection, and nothing is written", async () => {
    const client = api(srv)
    const owner = await client.signup({ verify: false })
    await nextSecond()
    const answers = await Promise.all(
      Array.from({ length: N + 5 }, (_, i) =>
        client.call("POST", "/api-keys", { token: owner.token, body: { name: `k${i}`, scope: "read" } }),
      ),
    )
    const created = answers.filter((r) => r.status === 201).length
    const limited = answers.filter((r) => r.status === 429).length
    // The cap of 10 active keys answers 400 past it; any other status is a failure.
    expect(answers.every((r) => [201, 400, 429].includes(r.status))).toBe(true)
    expect(limited).toBeGreaterThanOrEqual(1)
    const [row] = await srv.sql<[{ n: number }]>`
      select count(*)::int as n from api_keys where tenant_id = ${owner.tenantId}`
    expect(row.n).toBe(created)
  })
})

describe("without RATE_LIMIT_RPS", () => {
  let srv: TestServer
  beforeAll(async () => {
    srv = await startTestServer()
  })
  afterAll(async () => srv?.stop())

  it("limits nobody", async () => {
    const client = api(srv)
    const owner = await client.signup({ verify: false })
    const answers = await Promise.all(
      Array.from({ length: 60 }, () => client.call("GET", "/auth/me", { token: owner.token })),
    )
    expect(answers.map((r) => r.status)).toEqual(Array(60).fill(200))
  })
})
