// Idempotent retries: an authenticated POST with Idempotency-Key has one effect however often it is
// retried, concurrent duplicates included (top-ups: payment intents; run starts: runs rows); the
// first completed response is replayed with Idempotent-Replayed: true; another request under the
// same key is 422, a retry while the first runs 409; a 5xx frees the key; expired keys are pruned.
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { z } from "zod"
import { openApiDocument } from "../../api/openapi.js"
import { json } from "../../api/reply.js"
import { type AnyRoute, route } from "../../api/route.js"
import { routeTable } from "../../api/routes/index.js"
import { pruneExpired } from "../../src/idempotency/idempotency.service.js"
import { setHostResolver } from "../../src/providers/outbound.js"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

/** Probe routes: one that fails with a defect until told otherwise, one that waits to be let go. */
const probe = { failNext: 0, runs: 0, release: () => {}, gate: Promise.resolve() }
const probes: AnyRoute[] = [
  route({
    method: "POST",
    path: "/test/idem/flaky",
    auth: "jwt",
    summary: "a defect while failNext > 0, then 201",
    tags: ["test"],
    body: { json: z.object({ n: z.number() }) },
    handler: () =>
      Effect.suspend(() => {
        probe.runs++
        if (probe.failNext > 0) {
          probe.failNext--
          return Effect.die(new Error("flaky"))
        }
        return Effect.succeed(json({ run: probe.runs }, 201, { Location: `/test/idem/${probe.runs}` }))
      }),
  }),
  route({
    method: "POST",
    path: "/test/idem/slow",
    auth: "jwt",
    summary: "answers once the test opens the gate",
    tags: ["test"],
    handler: () =>
      Effect.promise(async () => {
        const run = ++probe.runs
        await probe.gate
        return json({ run }, 201)
      }),
  }),
]

let srv: TestServer
let a: ReturnType<typeof api>
let owner: Session
let other: Session

beforeAll(async () => {
  srv = await startTestServer({ env: FAST_RUNTIME_ENV, extraRoutes: probes })
  a = api(srv)
  owner = await a.signup({ country: "US" })
  other = await a.signup({ country: "US" })
}, 60_000)
afterAll(async () => srv?.stop())

const post = async (path: string, s: { token: string }, body: unknown, key?: string) => {
  const res = await a.call("POST", path, {
    token: s.token,
    ...(body !== undefined && { body }),
    ...(key !== undefined && { headers: { "idempotency-key": key } }),
  })
  return { status: res.status, body: (await res.json()) as Json, replayed: res.headers.get("idempotent-replayed") }
}

const intents = async (tenantId: number) =>
  (await srv.sql<[{ n: number }]>`select count(*)::int as n from payment_intents where tenant_id = ${tenantId}`)[0].n

const key = () => `k-${Math.random().toString(36).slice(2)}`

describe("Idempotency-Key on POST /billing/topup", () => {
  it("replays the first response to a retry, marked, with one intent made", async () => {
    const before = await intents(owner.tenantId)
    const k = key()
    const first = await post("/billing/topup", owner, { amount_minor: 5000 }, k)
    expect(first.status).toBe(201)
    expect(first.replayed).toBeNull()
    const again = await post("/billing/topup", owner, { amount_minor: 5000 }, k)
    expect(again.status).toBe(201)
    expect(again.replayed).toBe("true")
    expect(again.body).toEqual(first.body)
    // The /v1 prefix names the same request.
    const v1 = await post("/v1/billing/topup", owner, { amount_minor: 5000 }, k)
    expect(v1.replayed).toBe("true")
    expect(v1.body).toEqual(first.body)
    expect(await intents(owner.tenantId)).toBe(before + 1)
  })

  it("concurrent duplicates: one intent; every answer is the replay or 409 IDEMPOTENCY_IN_PROGRESS", async () => {
    const before = await intents(owner.tenantId)
    const k = key()
    const answers = await Promise.all(
      Array.from({ length: 12 }, () => post("/billing/topup", owner, { amount_minor: 7000 }, k)),
    )
    expect(await intents(owner.tenantId)).toBe(before + 1)
    const made = answers.filter((r) => r.status === 201)
    expect(made.length).toBeGreaterThanOrEqual(1)
    for (const r of made) expect(r.body.intent_id).toBe(made[0]!.body.intent_id)
    expect(made.filter((r) => r.replayed === null)).toHaveLength(1)
    for (const r of answers.filter((x) => x.status !== 201)) {
      expect(r.status).toBe(409)
      expect(r.body).toMatchObject({ code: "IDEMPOTENCY_IN_PROGRESS", error: expect.any(String) })
    }
    // Once settled, every retry is the replay.
    const after = await post("/billing/topup", owner, { amount_minor: 7000 }, k)
    expect(after).toMatchObject({ status: 201, replayed: "true" })
    expect(after.body.intent_id).toBe(made[0]!.body.intent_id)
  })

  it("the same key with another body, or from another caller: 422 IDEMPOTENCY_KEY_REUSED, nothing made", async () => {
    const k = key()
    expect((await post("/billing/topup", owner, { amount_minor: 5000 }, k)).status).toBe(201)
    const before = await intents(owner.tenantId)
    const changed = await post("/billing/topup", owner, { amount_minor: 5001 }, k)
    expect(changed.status).toBe(422)
    expect(changed.body).toMatchObject({ code: "IDEMPOTENCY_KEY_REUSED", error: expect.any(String) })
    const keyOfOwner = await a.createKey(owner, { name: "retry key", scope: "write" })
    const viaKey = await post("/billing/topup", { token: keyOfOwner.secret }, { amount_minor: 5000 }, k)
    expect(viaKey.status).toBe(422)
    expect(await intents(owner.tenantId)).toBe(before)
  })

  it("keys are per workspace: another workspace's same key is its own request", async () => {
    const k = key()
    const mine = await post("/billing/topup", owner, { amount_minor: 5000 }, k)
    const theirs = await post("/billing/topup", other, { amount_minor: 5000 }, k)
    expect(theirs.status).toBe(201)
    expect(theirs.replayed).toBeNull()
    expect(theirs.body.intent_id).not.toBe(mine.body.intent_id)
  })

  it("a key of 0 or 256 characters is 422 VALIDATION_FAILED on the header; 255 is fine", async () => {
    for (const bad of ["", "x".repeat(256)]) {
      const r = await post("/billing/topup", owner, { amount_minor: 5000 }, bad)
      expect(r.status).toBe(422)
      expect(r.body).toMatchObject({ code: "VALIDATION_FAILED", field: "Idempotency-Key" })
    }
    expect((await post("/billing/topup", owner, { amount_minor: 5000 }, "x".repeat(255))).status).toBe(201)
  })

  it("a request that fails validation keeps nothing: the corrected retry runs under the same key", async () => {
    const k = key()
    expect((await post("/billing/topup", owner, { amount_minor: -1 }, k)).status).toBe(422)
    const fixed = await post("/billing/topup", owner, { amount_minor: 5000 }, k)
    expect(fixed).toMatchObject({ status: 201, replayed: null })
  })
})

describe("Idempotency-Key and the handler's outcome", () => {
  it("a 5xx releases the key: the retry runs again, and its success is what is replayed", async () => {
    const k = key()
    probe.failNext = 1
    const failed = await post("/test/idem/flaky", owner, { n: 1 }, k)
    expect(failed.status).toBe(500)
    const ran = await post("/test/idem/flaky", owner, { n: 1 }, k)
    expect(ran).toMatchObject({ status: 201, replayed: null })
    const res = await a.call("POST", "/test/idem/flaky", {
      token: owner.token,
      body: { n: 1 },
      headers: { "idempotency-key": k },
    })
    expect(res.status).toBe(201)
    expect(res.headers.get("idempotent-replayed")).toBe("true")
    // The reply's own headers are kept with it.
    expect(res.headers.get("location")).toBe(`/test/idem/${ran.body.run}`)
    expect(await res.json()).toEqual(ran.body)
  })

  it("a retry while the first is running: 409 IDEMPOTENCY_IN_PROGRESS, and the handler ran once", async () => {
    const k = key()
    const runs = probe.runs
    probe.gate = new Promise<void>((r) => (probe.release = r))
    const first = post("/test/idem/slow", owner, undefined, k)
    // The handler runs only once the key is claimed.
    while (probe.runs === runs) await new Promise((r) => setTimeout(r, 10))
    const second = await post("/test/idem/slow", owner, undefined, k)
    expect(second.status).toBe(409)
    expect(second.body.code).toBe("IDEMPOTENCY_IN_PROGRESS")
    probe.release()
    expect(await first).toMatchObject({ status: 201, replayed: null })
    expect(probe.runs).toBe(runs + 1)
    expect(await post("/test/idem/slow", owner, undefined, k)).toMatchObject({ status: 201, replayed: "true" })
  })

  it("expired keys are pruned, and an expired key can be used afresh", async () => {
    const k = key()
    expect((await post("/billing/topup", owner, { amount_minor: 5000 }, k)).status).toBe(201)
    await srv.sql`update idempotency_keys set expires_at = now() - interval '1 second'
                  where tenant_id = ${owner.tenantId} and key = ${k}`
    const reused = await post("/billing/topup", owner, { amount_minor: 6000 }, k)
    expect(reused).toMatchObject({ status: 201, replayed: null })
    await srv.sql`update idempotency_keys set expires_at = now() - interval '1 second'
                  where tenant_id = ${owner.tenantId}`
    expect(await srv.running.runtime.runPromise(pruneExpired)).toBeGreaterThan(0)
    const [{ n }] = await srv.sql<[{ n: number }]>`
      select count(*)::int as n from idempotency_keys where tenant_id = ${owner.tenantId}`
    expect(n).toBe(0)
  })
})

describe("Idempotency-Key on answers that carry a secret", () => {
  it("replays a new API key's secret, kept sealed: neither the key nor the secret is readable at rest", async () => {
    const countKeys = async () =>
      (await srv.sql<[{ n: number }]>`select count(*)::int as n from api_keys where tenant_id = ${owner.tenantId}`)[0].n
    const before = await countKeys()
    const k = key()
    const first = await post("/api-keys", owner, { name: "ci", scope: "read" }, k)
    expect(first.status).toBe(201)
    const secret = first.body.secret as string
    expect(secret.length).toBeGreaterThan(20)
    const again = await post("/api-keys", owner, { name: "ci", scope: "read" }, k)
    expect(again).toMatchObject({ status: 201, replayed: "true", body: { id: first.body.id, secret } })
    expect(await countKeys()).toBe(before + 1)
    const rows = await srv.sql<{ key: string; body: Buffer }[]>`
      select key, body from idempotency_keys where tenant_id = ${owner.tenantId}`
    const row = rows.find((r) => r.key.startsWith("sha256:"))!
    expect(row.key).not.toContain(k)
    expect(row.body.includes(Buffer.from(secret))).toBe(false)
    expect(row.body.includes(Buffer.from('"secret"'))).toBe(false)
  })

  it("a webhook endpoint's signing secret on create is replayed sealed too", async () => {
    // There is no public DNS here: the receiver's name resolves to a public address by the test hook.
    setHostResolver(async () => [{ address: "93.184.216.34", family: 4 }])
    try {
      const k = key()
      const body = { url: "https://hooks.example.invalid/in", events: ["*"] }
      const first = await post("/api/webhooks/endpoints", owner, body, k)
      expect(first.status).toBe(201)
      expect(first.body.secret).toMatch(/^whsec_/)
      const again = await post("/api/webhooks/endpoints", owner, body, k)
      expect(again).toMatchObject({
        status: 201,
        replayed: "true",
        body: { id: first.body.id, secret: first.body.secret },
      })
      expect(await srv.sql`select 1 from webhook_endpoints where tenant_id = ${owner.tenantId}`).toHaveLength(1)
      const stored = await srv.sql<{ body: Buffer }[]>`
        select body from idempotency_keys where tenant_id = ${owner.tenantId} and fingerprint is not null
          and key not like 'k-%'`
      expect(stored.some((r) => r.body.includes(Buffer.from(first.body.secret as string)))).toBe(false)
      expect(await srv.sql`select 1 from idempotency_keys where key = ${k}`).toEqual([])
    } finally {
      setHostResolver(undefined)
    }
  })
})

describe("Idempotency-Key on run starts", () => {
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await a.call(method, path, { token: owner.token, ...(body !== undefined && { body }) })
    return { status: res.status, body: (await res.json()) as Json }
  }

  it("concurrent duplicate starts make one run; the retries replay it", async () => {
    const intent = (await call("POST", "/billing/topup", { amount_minor: 1_000_000 })).body
    await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
    const w = (await call("POST", "/api/workflows", { nl_prompt: "Call lapsed members and invite them back." })).body
    // Numbers that never answer keep the run running while the duplicates arrive.
    expect((await call("POST", `/api/workflows/${w.id}/audience`, { rows: [{ phone: "+12025550110" }] })).status).toBe(
      200,
    )
    const att = await call("PUT", `/api/workflows/${w.id}/compliance`, {
      consent_attestation_text: "All numbers opted in on our website.",
    })
    expect(att.status).toBe(200)

    const k = key()
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => post(`/api/workflows/${w.id}/run`, owner, undefined, k)),
    )
    const [{ n }] = await srv.sql<[{ n: number }]>`select count(*)::int as n from runs where workflow_id = ${w.id}`
    expect(n).toBe(1)
    const ok = answers.filter((r) => r.status < 300)
    expect(ok.filter((r) => r.replayed === null)).toHaveLength(1)
    for (const r of ok) expect(r.body).toEqual(ok[0]!.body)
    for (const r of answers.filter((x) => x.status >= 300)) expect(r.body.code).toBe("IDEMPOTENCY_IN_PROGRESS")
    const retry = await post(`/api/workflows/${w.id}/run`, owner, undefined, k)
    expect(retry.replayed).toBe("true")
    expect(retry.body).toEqual(ok[0]!.body)
  })
})

describe("the OpenAPI document", () => {
  it("lists Idempotency-Key on every authenticated POST, and only there", () => {
    const doc = openApiDocument(routeTable()) as { paths: Record<string, Record<string, Json>> }
    const byOp = new Map(routeTable().map((r) => [`${r.method.toLowerCase()} ${r.path}`, r]))
    let checked = 0
    for (const [path, ops] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(ops)) {
        const r = byOp.get(`${method} ${path}`)!
        const header = (op.parameters as Json[]).find((p) => p.in === "header" && p.name === "Idempotency-Key")
        const expected = r.method === "POST" && (r.auth === "jwt" || r.auth === "jwt-only")
        expect(header !== undefined, `${method} ${path}`).toBe(expected)
        if (header) {
          expect(header.schema).toEqual({ type: "string", minLength: 1, maxLength: 255 })
          checked++
        }
      }
    expect(checked).toBeGreaterThan(20)
  })
})
