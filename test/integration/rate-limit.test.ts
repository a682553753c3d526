// RATE_LIMIT_RPS across two api processes: one workspace's requests, split between them, are
// admitted N a second in all (within 10%), not N per process, and the rest answered 429 with the
// rate-limit headers.
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "vitest"
import { spawnServer } from "../support/harness.js"
import { call, real, sharedDatabase } from "../support/processes.js"

const N = 20

async function nextSecond(): Promise<void> {
  await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 15))
}

// Declared only with a real Postgres and NATS for separate processes to share; skipped otherwise.
describe.skipIf(!real)(`RATE_LIMIT_RPS=${N} on two api processes (real Postgres and NATS)`, () => {
  const suite = sharedDatabase()

  it("admits one workspace N requests a second in all, whichever process answers", async () => {
    const { db, processes } = suite
    const env = {
      ...db.env,
      NATS_URL: process.env.NATS_URL!,
      BUS_NAMESPACE: `rate${randomBytes(5).toString("hex")}`,
      RATE_LIMIT_RPS: String(N),
    }
    const [apiA, apiB] = await Promise.all([spawnServer({ role: "api", env }), spawnServer({ role: "api", env })])
    processes.push(apiA!, apiB!)
    const bases = [apiA!.url!, apiB!.url!]

    const email = `rate-${randomBytes(4).toString("hex")}@example.com`
    const password = "correct horse battery"
    expect((await call(bases[0]!, "POST", "/auth/signup", { body: { email, password } })).status).toBe(201)
    const token = (await call(bases[1]!, "POST", "/auth/login", { body: { email, password } })).body.token as string
    const me = (i: number) =>
      fetch(`${bases[i % 2]}/auth/me`, { headers: { authorization: `Bearer ${token}` } }).then(async (r) => {
        await r.arrayBuffer()
        return r
      })

    // A burst at the start of a second, half to each process.
    await nextSecond()
    const started = Date.now()
    const burst = await Promise.all(Array.from({ length: 4 * N }, (_, i) => me(i)))
    const elapsed = Date.now() - started
    const ok = burst.filter((r) => r.status === 200).length
    expect(burst.every((r) => r.status === 200 || r.status === 429)).toBe(true)
    if (elapsed < 900) {
      expect(ok).toBeLessThanOrEqual(N)
      expect(ok).toBeGreaterThanOrEqual(Math.floor(N * 0.9))
    } else expect(ok).toBeLessThanOrEqual(2 * N)
    const refused = burst.find((r) => r.status === 429)!
    expect(refused.headers.get("x-ratelimit-limit")).toBe(String(N))
    expect(refused.headers.get("x-ratelimit-remaining")).toBe("0")
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)

    // Sustained load past the limit on both processes for three seconds. Every second wholly inside
    // the load is saturated, so admits N (less at most a slice per process); the seconds at either
    // end admit at most N. A limit counted per process would admit about 2N a second.
    await nextSecond()
    const from = Date.now()
    const deadline = from + 3_000
    let admitted = 0
    let sent = 0
    const worker = async (i: number) => {
      for (let n = 0; n < 2_000 && Date.now() < deadline; n++) {
        sent++
        const r = await me(i)
        if (r.status === 200) admitted++
        else expect(r.status).toBe(429)
      }
    }
    await Promise.all(Array.from({ length: 8 }, (_, i) => worker(i)))
    const to = Date.now()
    const touched = Math.floor(to / 1000) - Math.floor(from / 1000) + 1
    const whole = Math.max(0, Math.floor(to / 1000) - Math.ceil(from / 1000))
    expect(sent).toBeGreaterThan(admitted)
    expect(admitted).toBeLessThanOrEqual(N * touched)
    expect(admitted).toBeGreaterThanOrEqual(Math.floor(0.9 * N * whole))
  }, 120_000)
})
