// Webhook endpoints through the real server: create (secret shown once, sealed at rest), read, change,
// delete, rotate (the old secret kept 24 h), test pings, the deliveries list and retry, the 422s,
// the SSRF refusals, the cap of 20, scopes and isolation between workspaces.
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { setHostResolver } from "../../src/providers/outbound.js"
import { EVENT_TYPES } from "../../src/webhooks/events.js"
import { newWebhookSecret, webhookSecretBox, webhookSecretKey } from "../../src/webhooks/secrets.js"
import { signWebhook } from "../../src/webhooks/signing.js"
import { webhookUrlRefusal } from "../../src/webhooks/url-policy.js"
import { api, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
let a: ReturnType<typeof api>
beforeAll(async () => {
  srv = await sharedTestServer()
  a = api(srv)
})
afterAll(async () => srv?.stop())

// No public DNS here: names answer what each test needs. The "public" address is TEST-NET-3 and the
// names are under .invalid, so a delivery worker running beside these tests never reaches a real host.
const PUBLIC = "203.0.113.10"
const DNS: Record<string, ReadonlyArray<{ address: string; family: number }>> = {
  "hooks.example.invalid": [{ address: PUBLIC, family: 4 }],
  "other.example.invalid": [{ address: "203.0.113.11", family: 4 }],
  "internal.example.invalid": [{ address: "10.1.2.3", family: 4 }],
  "loop.example.invalid": [{ address: "127.0.0.1", family: 4 }],
  "metadata.example.invalid": [{ address: "169.254.169.254", family: 4 }],
  "v6loop.example.invalid": [{ address: "::1", family: 6 }],
  "siit.example.invalid": [{ address: "::ffff:0:7f00:1", family: 6 }],
  "sixtofour.example.invalid": [{ address: "2002:a00:1::", family: 6 }],
  "nat64.example.invalid": [{ address: "64:ff9b:1::a00:1", family: 6 }],
  "teredo.example.invalid": [{ address: "2001:0:4136:e378:8000:63bf:3fff:fdd2", family: 6 }],
  "mixed.example.invalid": [
    { address: PUBLIC, family: 4 },
    { address: "192.168.1.5", family: 4 },
  ],
}
beforeEach(() =>
  setHostResolver(async (host) => {
    if (host === "slow.example.invalid") return new Promise(() => {})
    const found = DNS[host]
    if (found === undefined) throw Object.assign(new Error(`${host} does not resolve`), { code: "ENOTFOUND" })
    return found
  }),
)
afterEach(() => setHostResolver(undefined))

interface Endpoint {
  id: number
  url: string
  events: string[]
  description: string | null
  enabled: boolean
  disabled_reason: string | null
  version: number
  created_at: string
  updated_at: string
  secret_rotating_until?: string
  secret?: string
}

const errorOf = async (res: Response) => ({
  status: res.status,
  ...((await res.json()) as { code: string; field?: string; error: string; [k: string]: unknown }),
})

async function body<T>(res: Response, status = 200): Promise<T> {
  const b = await res.json()
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${JSON.stringify(b)}`)
  return b as T
}

const tokenOf = (s: Session | string) => (typeof s === "string" ? s : s.token)
const create = (s: Session | string, b: Record<string, unknown>) =>
  a.call("POST", "/api/webhooks/endpoints", { token: tokenOf(s), body: b })
const created = async (s: Session | string, b: Record<string, unknown> = {}) =>
  body<Endpoint>(await create(s, { url: "https://hooks.example.invalid/parley", events: ["*"], ...b }), 201)
const get = (s: Session | string, id: number) => a.call("GET", `/api/webhooks/endpoints/${id}`, { token: tokenOf(s) })
const patch = (s: Session | string, id: number, b: unknown) =>
  a.call("PATCH", `/api/webhooks/endpoints/${id}`, { token: tokenOf(s), body: b })
const endpointRow = async (id: number) => {
  const [row] = await srv.sql<
    [
      {
        tenant_id: number
        url: string
        enabled: boolean
        version: number
        secret_ciphertext: string
        previous_secret_ciphertext: string | null
        previous_secret_expires_at: Date | null
        deleted_at: Date | null
        disabled_reason: string | null
        failing_since: Date | null
        grace_s: number | null
      },
    ]
  >`select *, extract(epoch from previous_secret_expires_at - now())::float8 as grace_s
    from webhook_endpoints where id = ${id}`
  return row
}
const box = async () => webhookSecretBox(await webhookSecretKey(srv.config, srv.sql))

describe("create, read, change, delete", () => {
  it("creates with the secret in the answer only, sealed at rest, and reads it back without it", async () => {
    const s = await a.signup()
    const res = await create(s, {
      url: "https://hooks.example.invalid/parley?x=1",
      events: ["call.completed", "wallet.low", "call.completed"],
      description: "CRM sync",
    })
    const ep = await body<Endpoint>(res, 201)
    expect(ep).toMatchObject({
      url: "https://hooks.example.invalid/parley?x=1",
      events: ["call.completed", "wallet.low"],
      description: "CRM sync",
      enabled: true,
      disabled_reason: null,
      version: 1,
    })
    expect(ep.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/)
    expect(ep).not.toHaveProperty("secret_rotating_until")

    const row = await endpointRow(ep.id)
    expect(row.tenant_id).toBe(s.tenantId)
    expect(row.secret_ciphertext).not.toContain(ep.secret!.slice(6))
    expect((await box()).open(row.secret_ciphertext, s.tenantId)).toBe(ep.secret)
    // Bound to the workspace: the same ciphertext does not open as another tenant's.
    expect(() => webhookSecretBox(Buffer.alloc(32, 7)).open(row.secret_ciphertext, s.tenantId)).toThrow()

    const read = await body<Endpoint>(await get(s, ep.id))
    expect(read).toEqual({ ...ep, secret: undefined, events: ["call.completed", "wallet.low"] })
    expect(JSON.stringify(read)).not.toContain("whsec_")
    const list = await body<{ endpoints: Endpoint[] }>(
      await a.call("GET", "/api/webhooks/endpoints", { token: s.token }),
    )
    expect(list.endpoints.map((e) => e.id)).toEqual([ep.id])
    expect(JSON.stringify(list)).not.toContain("whsec_")
  })

  it("PATCH changes the fields given and bumps version; enabling clears the platform's marks", async () => {
    const s = await a.signup()
    const ep = await created(s, { description: "first" })
    const changed = await body<Endpoint>(
      await patch(s, ep.id, {
        events: ["approval.requested"],
        description: null,
        url: "https://other.example.invalid/h",
      }),
    )
    expect(changed).toMatchObject({
      events: ["approval.requested"],
      description: null,
      url: "https://other.example.invalid/h",
      enabled: true,
      version: 2,
    })
    expect(Date.parse(changed.updated_at)).toBeGreaterThanOrEqual(Date.parse(ep.updated_at))

    // The platform disabled it after 5 days of failures; enabling it again forgets that.
    await srv.sql`update webhook_endpoints set enabled = false, disabled_reason = 'failing',
      failing_since = now() - interval '5 days' where id = ${ep.id}`
    expect(await body<Endpoint>(await get(s, ep.id))).toMatchObject({ enabled: false, disabled_reason: "failing" })
    const enabled = await body<Endpoint>(await patch(s, ep.id, { enabled: true }))
    expect(enabled).toMatchObject({ enabled: true, disabled_reason: null, version: 3 })
    expect(await endpointRow(ep.id)).toMatchObject({ enabled: true, disabled_reason: null, failing_since: null })

    const off = await body<Endpoint>(await patch(s, ep.id, { enabled: false }))
    expect(off).toMatchObject({ enabled: false, disabled_reason: null, version: 4 })

    expect(await errorOf(await patch(s, ep.id, {}))).toMatchObject({ status: 422, code: "VALIDATION_FAILED" })
    expect(await endpointRow(ep.id)).toMatchObject({ version: 4 })
  })

  it("DELETE is soft: gone from the API (a second DELETE is 404), kept in the table", async () => {
    const s = await a.signup()
    const ep = await created(s)
    const del = () => a.call("DELETE", `/api/webhooks/endpoints/${ep.id}`, { token: s.token })
    expect(await body(await del())).toEqual({ deleted: true, id: ep.id })
    expect(await errorOf(await del())).toMatchObject({ status: 404, code: "NOT_FOUND" })
    expect(await errorOf(await get(s, ep.id))).toMatchObject({ status: 404, code: "NOT_FOUND" })
    expect(await errorOf(await patch(s, ep.id, { enabled: true }))).toMatchObject({ status: 404 })
    const list = await body<{ endpoints: Endpoint[] }>(
      await a.call("GET", "/api/webhooks/endpoints", { token: s.token }),
    )
    expect(list.endpoints).toEqual([])
    const row = await endpointRow(ep.id)
    expect(row.deleted_at).toBeInstanceOf(Date)
    expect(row.version).toBe(2)
  })

  it("refuses ids that are not positive integers", async () => {
    const s = await a.signup()
    for (const id of ["abc", "0", "-1", "1.5", "99999999999999999999"])
      expect(await errorOf(await a.call("GET", `/api/webhooks/endpoints/${id}`, { token: s.token }))).toMatchObject({
        status: 422,
        code: "VALIDATION_FAILED",
        field: "id",
      })
  })
})

describe("validation", () => {
  let s: Session
  beforeAll(async () => {
    s = await a.signup()
  })

  it.each([
    ["an unknown event type", { events: ["call.completed", "call.exploded"] }, "events"],
    ["no event types", { events: [] }, "events"],
    ["events not a list", { events: "call.completed" }, "events"],
    ['"*" beside other types', { events: ["*", "call.failed"] }, "events"],
    ["ping, which is sent only by the test route", { events: ["ping"] }, "events"],
    ["a missing url", { url: undefined }, "url"],
    ["a url that is not one", { url: "not a url" }, "url"],
    ["a url past 2048 characters", { url: `https://hooks.example.invalid/${"a".repeat(2030)}` }, "url"],
    ["a description past 500 characters", { description: "d".repeat(501) }, "description"],
    ["enabled not a boolean", { enabled: "yes" }, "enabled"],
  ])("refuses %s (422 naming the field)", async (_what, override, field) => {
    const res = await create(s, { url: "https://hooks.example.invalid/h", events: ["*"], ...override })
    const err = await errorOf(res)
    expect(err).toMatchObject({ status: 422, code: "VALIDATION_FAILED", field })
    expect(err.error).toBeTruthy()
  })

  it("names the unknown type and lists the known ones", async () => {
    const err = await errorOf(await create(s, { url: "https://hooks.example.invalid/h", events: ["call.exploded"] }))
    expect(err.error).toContain('"call.exploded"')
    expect(err.error).toContain("workflow.run.started")
  })

  it("refuses malformed JSON with 400", async () => {
    const res = await fetch(`${srv.url}/api/webhooks/endpoints`, {
      method: "POST",
      headers: { authorization: `Bearer ${s.token}`, "content-type": "application/json" },
      body: '{"url": ',
    })
    expect(await errorOf(res)).toMatchObject({ status: 400, code: "BAD_JSON" })
  })

  it("saved nothing for any refused request", async () => {
    const [{ n }] = await srv.sql<[{ n: number }]>`
      select count(*)::int as n from webhook_endpoints where tenant_id = ${s.tenantId}`
    expect(n).toBe(0)
  })
})

describe("SSRF: the URL must be https to public addresses", () => {
  let s: Session
  beforeAll(async () => {
    s = await a.signup()
  })

  it.each([
    ["a private IPv4 literal", "https://10.0.0.1/h"],
    ["a loopback literal", "https://127.0.0.1:8443/h"],
    ["the cloud metadata address", "https://169.254.169.254/latest/meta-data"],
    ["an IPv6 loopback literal", "https://[::1]/h"],
    ["an IPv4-mapped IPv6 private literal", "https://[::ffff:192.168.0.1]/h"],
    ["a name resolving to 10.x", "https://internal.example.invalid/h"],
    ["a name resolving to 127.0.0.1", "https://loop.example.invalid/h"],
    ["a name resolving to 169.254.169.254", "https://metadata.example.invalid/h"],
    ["a name resolving to ::1", "https://v6loop.example.invalid/h"],
    ["a name with one private address among public ones", "https://mixed.example.invalid/h"],
    ["an SIIT IPv4-translated literal", "https://[::ffff:0:7f00:1]/h"],
    ["a 6to4 literal of a private IPv4 address", "https://[2002:7f00:1::]/h"],
    ["a local-use NAT64 literal", "https://[64:ff9b:1::7f00:1]/h"],
    ["a Teredo literal", "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/h"],
    ["an IPv6 documentation literal", "https://[2001:db8::1]/h"],
    ["a name resolving to an SIIT address", "https://siit.example.invalid/h"],
    ["a name resolving to a 6to4 address of 10.0.0.1", "https://sixtofour.example.invalid/h"],
    ["a name resolving to a local-use NAT64 address", "https://nat64.example.invalid/h"],
    ["a name resolving to a Teredo address", "https://teredo.example.invalid/h"],
    ["a name that does not resolve", "https://nowhere.example.invalid/h"],
    ["http to a public host", "http://hooks.example.invalid/h"],
    ["http to loopback while private URLs are off", "http://127.0.0.1:9000/h"],
    ["a user name and password", "https://user:pass@hooks.example.invalid/h"],
    ["a user name alone", "https://user@hooks.example.invalid/h"],
    ["another scheme", "ftp://hooks.example.invalid/h"],
    ["a javascript: URL", "javascript:alert(1)"],
  ])("refuses %s", async (_what, url) => {
    expect(await errorOf(await create(s, { url, events: ["*"] }))).toMatchObject({
      status: 422,
      code: "VALIDATION_FAILED",
      field: "url",
    })
  })

  it("says which host was refused, never the address its name resolved to", async () => {
    for (const [host, address] of [
      ["internal.example.invalid", "10.1.2.3"],
      ["metadata.example.invalid", "169.254.169.254"],
      ["mixed.example.invalid", "192.168.1.5"],
      ["sixtofour.example.invalid", "2002:a00:1::"],
    ]) {
      const err = await errorOf(await create(s, { url: `https://${host}/h`, events: ["*"] }))
      expect(err).toMatchObject({ status: 422, code: "VALIDATION_FAILED", field: "url" })
      expect(err.error).toBe(
        `url must name a host with public addresses only (${host} resolves to a non-public address)`,
      )
      expect(JSON.stringify(err)).not.toContain(address)
    }
  })

  it("does not wait more than 5 s for a name server that never answers", async () => {
    const started = Date.now()
    const err = await errorOf(await create(s, { url: "https://slow.example.invalid/h", events: ["*"] }))
    expect(err).toMatchObject({ status: 422, code: "VALIDATION_FAILED", field: "url" })
    expect(err.error).toContain("did not resolve within 5 s")
    expect(Date.now() - started).toBeLessThan(8_000)
  }, 15_000)

  it("checks a changed URL too, and leaves the endpoint as it was", async () => {
    const ep = await created(s)
    expect(await errorOf(await patch(s, ep.id, { url: "https://internal.example.invalid/h" }))).toMatchObject({
      status: 422,
      field: "url",
    })
    expect(await endpointRow(ep.id)).toMatchObject({ url: "https://hooks.example.invalid/parley", version: 1 })
  })

  it("with ALLOW_PRIVATE_PROVIDER_URLS: loopback receivers over http or https, nothing else private", async () => {
    const allow = { allowPrivateProviderUrls: true }
    for (const ok of [
      "http://127.0.0.1:9000/h",
      "http://localhost:9000/h",
      "http://[::1]:9000/h",
      "https://127.0.0.1/h",
    ])
      expect(await webhookUrlRefusal(ok, allow)).toBeUndefined()
    for (const refused of [
      "http://hooks.example.invalid/h",
      "http://10.0.0.1/h",
      "https://10.0.0.1/h",
      "https://internal.example.invalid/h",
      "https://metadata.example.invalid/h",
      "https://mixed.example.invalid/h",
      "https://[::ffff:0:7f00:1]/h",
      "https://[2002:7f00:1::]/h",
      "https://siit.example.invalid/h",
      "http://user:pw@127.0.0.1/h",
    ])
      expect(await webhookUrlRefusal(refused, allow), refused).toBeDefined()
    // Names resolving to loopback only are loopback receivers too (over https; http needs a loopback host).
    for (const ok of [
      "https://hooks.example.invalid/h",
      "https://loop.example.invalid/h",
      "https://v6loop.example.invalid/h",
    ])
      expect(await webhookUrlRefusal(ok, allow), ok).toBeUndefined()
    expect(await webhookUrlRefusal("http://loop.example.invalid/h", allow)).toBeDefined()
  })
})

describe("the cap", () => {
  it("holds 20 live endpoints per workspace (409 WEBHOOK_ENDPOINT_LIMIT); a deleted one frees a place", async () => {
    const s = await a.signup()
    const ids: number[] = []
    for (let i = 0; i < 20; i++) ids.push((await created(s, { description: `#${i}` })).id)
    // A disabled endpoint still holds its place.
    await body(await patch(s, ids[0]!, { enabled: false }))
    const err = await errorOf(await create(s, { url: "https://hooks.example.invalid/21", events: ["*"] }))
    expect(err).toMatchObject({ status: 409, code: "WEBHOOK_ENDPOINT_LIMIT", limit: 20 })
    // Another workspace is not counted against this one.
    await created(await a.signup())
    await body(await a.call("DELETE", `/api/webhooks/endpoints/${ids[1]}`, { token: s.token }))
    await created(s)
    const [{ live }] = await srv.sql<[{ live: number }]>`
      select count(*)::int as live from webhook_endpoints where tenant_id = ${s.tenantId} and deleted_at is null`
    expect(live).toBe(20)
  })

  it("holds under concurrent creates", async () => {
    const s = await a.signup()
    const results = await Promise.all(
      Array.from({ length: 25 }, (_, i) => create(s, { url: `https://hooks.example.invalid/${i}`, events: ["*"] })),
    )
    const statuses = results.map((r) => r.status).sort()
    expect(statuses.filter((x) => x === 201)).toHaveLength(20)
    expect(statuses.filter((x) => x === 409)).toHaveLength(5)
  })
})

describe("secret rotation", () => {
  it("answers a new secret once; the old one is kept, sealed, for 24 hours", async () => {
    const s = await a.signup()
    const ep = await created(s)
    const res = await a.call("POST", `/api/webhooks/endpoints/${ep.id}/rotate-secret`, { token: s.token })
    const rotated = await body<Endpoint>(res)
    expect(rotated.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/)
    expect(rotated.secret).not.toBe(ep.secret)
    expect(rotated.version).toBe(2)
    const until = Date.parse(rotated.secret_rotating_until!)
    expect(Math.abs(until - (Date.now() + 24 * 3_600_000))).toBeLessThan(60_000)

    const row = await endpointRow(ep.id)
    const b = await box()
    expect(b.open(row.secret_ciphertext, s.tenantId)).toBe(rotated.secret)
    expect(b.open(row.previous_secret_ciphertext!, s.tenantId)).toBe(ep.secret)
    expect(row.grace_s).toBeGreaterThan(24 * 3600 - 60)
    expect(row.grace_s).toBeLessThanOrEqual(24 * 3600)

    const read = await body<Endpoint>(await get(s, ep.id))
    expect(read.secret).toBeUndefined()
    expect(read.secret_rotating_until).toBe(rotated.secret_rotating_until)

    // Past the grace period the endpoint no longer says it is rotating.
    await srv.sql`update webhook_endpoints set previous_secret_expires_at = now() - interval '1 second'
      where id = ${ep.id}`
    expect(await body<Endpoint>(await get(s, ep.id))).not.toHaveProperty("secret_rotating_until")
  })
})

describe("test pings", () => {
  it("queues a ping event and one delivery to that endpoint alone (202)", async () => {
    const s = await a.signup()
    const ep = await created(s)
    const other = await created(s)
    const res = await a.call("POST", `/api/webhooks/endpoints/${ep.id}/test`, { token: s.token })
    const ping = await body<{ event_id: string; type: string; endpoint_id: number }>(res, 202)
    expect(ping).toMatchObject({ type: "ping", endpoint_id: ep.id })
    expect(ping.event_id).toMatch(/^evt_[0-9a-f]{32}$/)
    const [event] = await srv.sql<[{ tenant_id: number; type: string; body: Record<string, unknown> }]>`
      select tenant_id, type, body from webhook_events where id = ${ping.event_id}`
    expect(event).toMatchObject({ tenant_id: s.tenantId, type: "ping" })
    expect(event.body).toMatchObject({
      id: ping.event_id,
      type: "ping",
      tenant_id: s.tenantId,
      data: { endpoint_id: ep.id },
    })
    const deliveries = await srv.sql<Array<{ endpoint_id: number; tenant_id: number }>>`
      select endpoint_id, tenant_id from webhook_deliveries where event_id = ${ping.event_id}`
    expect(deliveries).toEqual([{ endpoint_id: ep.id, tenant_id: s.tenantId }])
    expect(other.id).not.toBe(ep.id)
  })

  it("refuses a disabled endpoint (409) and writes nothing", async () => {
    const s = await a.signup()
    const ep = await created(s, { enabled: false })
    const err = await errorOf(await a.call("POST", `/api/webhooks/endpoints/${ep.id}/test`, { token: s.token }))
    expect(err).toMatchObject({ status: 409, code: "CONFLICT" })
    const [{ n }] = await srv.sql<[{ n: number }]>`
      select count(*)::int as n from webhook_events where tenant_id = ${s.tenantId}`
    expect(n).toBe(0)
  })
})

describe("deliveries: the attempts list and retry", () => {
  // Rows as the delivery worker writes them, written here directly so the list is exact.
  async function seed(tenantId: number, endpointId: number, status: "failed" | "delivered", attempts: number) {
    const eventId = `evt_${Math.random().toString(16).slice(2).padEnd(32, "0").slice(0, 32)}`
    await srv.sql`insert into webhook_events (id, tenant_id, type, body)
      values (${eventId}, ${tenantId}, 'call.completed', ${srv.sql.json({ id: eventId })})`
    const [{ id }] = await srv.sql<[{ id: number }]>`
      insert into webhook_deliveries (tenant_id, event_id, endpoint_id, status, attempts, next_attempt_at)
      values (${tenantId}, ${eventId}, ${endpointId}, ${status}, ${attempts}, null) returning id`
    for (let n = 1; n <= attempts; n++) {
      const last = n === attempts
      const outcome = last ? status : "retry"
      const ok = last && status === "delivered"
      await srv.sql`insert into webhook_attempts (tenant_id, delivery_id, endpoint_id, event_id, attempt, started_at,
          status_code, latency_ms, error, outcome, next_attempt_at)
        values (${tenantId}, ${id}, ${endpointId}, ${eventId}, ${n}, now(), ${ok ? 200 : 503},
          ${10 * n}, ${ok ? null : "HTTP 503"}, ${outcome},
          ${outcome === "retry" ? srv.sql`now() + interval '1 minute'` : null})`
    }
    return { deliveryId: id, eventId }
  }

  interface Attempt {
    id: number
    delivery_id: number
    event_id: string
    event_type: string
    attempt: number
    status_code: number | null
    latency_ms: number | null
    error: string | null
    outcome: string
    next_attempt_at: string | null
    delivery_status: string
  }
  const page = (s: Session, id: number, qs: string) =>
    a.call("GET", `/api/webhooks/endpoints/${id}/deliveries${qs}`, { token: s.token })

  it("pages newest first with next_cursor, null on the last page", async () => {
    const s = await a.signup()
    const ep = await created(s)
    const failed = await seed(s.tenantId, ep.id, "failed", 3)
    const delivered = await seed(s.tenantId, ep.id, "delivered", 2)
    const seen: Attempt[] = []
    let cursor: string | null = null
    let pages = 0
    do {
      const qs: string = `?limit=2${cursor === null ? "" : `&cursor=${cursor}`}`
      const p = await body<{ deliveries: Attempt[]; next_cursor: string | null }>(await page(s, ep.id, qs))
      expect(p.deliveries.length).toBeLessThanOrEqual(2)
      seen.push(...p.deliveries)
      cursor = p.next_cursor
      pages++
    } while (cursor !== null && pages < 10)
    expect(pages).toBe(3)
    expect(seen.map((x) => x.id)).toEqual([...seen.map((x) => x.id)].sort((x, y) => y - x))
    expect(seen.map((x) => [x.delivery_id, x.attempt])).toEqual([
      [delivered.deliveryId, 2],
      [delivered.deliveryId, 1],
      [failed.deliveryId, 3],
      [failed.deliveryId, 2],
      [failed.deliveryId, 1],
    ])
    expect(seen[0]).toMatchObject({
      event_id: delivered.eventId,
      event_type: "call.completed",
      status_code: 200,
      latency_ms: 20,
      error: null,
      outcome: "delivered",
      next_attempt_at: null,
      delivery_status: "delivered",
    })
    expect(seen[3]).toMatchObject({ outcome: "retry", status_code: 503, error: "HTTP 503", delivery_status: "failed" })
    expect(seen[3]!.next_attempt_at).not.toBeNull()

    expect(await errorOf(await page(s, ep.id, "?cursor=bogus"))).toMatchObject({ status: 422, field: "cursor" })
    expect(await errorOf(await page(s, ep.id, "?limit=0"))).toMatchObject({ status: 422, field: "limit" })
    expect(await errorOf(await page(s, ep.id, "?limit=201"))).toMatchObject({ status: 422, field: "limit" })
  })

  it("retry makes a failed delivery due now; delivered is 409; another workspace's is 404", async () => {
    const s = await a.signup()
    const ep = await created(s)
    const failed = await seed(s.tenantId, ep.id, "failed", 7)
    const delivered = await seed(s.tenantId, ep.id, "delivered", 1)
    // Disabled, so a delivery worker running beside this suite leaves the retried row as it is.
    await body(await patch(s, ep.id, { enabled: false }))
    const retry = (who: Session, id: number) =>
      a.call("POST", `/api/webhooks/deliveries/${id}/retry`, { token: who.token })

    expect(await body(await retry(s, failed.deliveryId), 202)).toEqual({ id: failed.deliveryId, status: "pending" })
    const [row] = await srv.sql<[{ status: string; attempts: number; due_in_s: number }]>`
      select status, attempts, extract(epoch from next_attempt_at - now())::float8 as due_in_s
      from webhook_deliveries where id = ${failed.deliveryId}`
    expect(row.status).toBe("pending")
    expect(row.attempts).toBe(7)
    expect(Math.abs(row.due_in_s)).toBeLessThan(5)
    // Pending already: retrying again is fine.
    expect((await retry(s, failed.deliveryId)).status).toBe(202)

    expect(await errorOf(await retry(s, delivered.deliveryId))).toMatchObject({ status: 409, code: "CONFLICT" })
    const [still] = await srv.sql<[{ status: string }]>`
      select status from webhook_deliveries where id = ${delivered.deliveryId}`
    expect(still.status).toBe("delivered")

    const intruder = await a.signup()
    expect(await errorOf(await retry(intruder, failed.deliveryId))).toMatchObject({ status: 404, code: "NOT_FOUND" })
    expect(await errorOf(await retry(s, 999_999_999))).toMatchObject({ status: 404 })

    // A deleted endpoint's deliveries are gone with it.
    await body(await a.call("DELETE", `/api/webhooks/endpoints/${ep.id}`, { token: s.token }))
    expect(await errorOf(await retry(s, failed.deliveryId))).toMatchObject({ status: 404 })
    expect(await errorOf(await page(s, ep.id, ""))).toMatchObject({ status: 404 })
  })
})

describe("scopes", () => {
  it("read keys read; only admin keys create, change, rotate, ping, retry and delete", async () => {
    const s = await a.signup()
    const ep = await created(s)
    const read = (await a.createKey(s, { name: "r", scope: "read" })).secret
    const write = (await a.createKey(s, { name: "w", scope: "write" })).secret
    const admin = (await a.createKey(s, { name: "a", scope: "admin" })).secret

    expect((await a.call("GET", "/api/webhooks/endpoints", { token: read })).status).toBe(200)
    expect((await get(read, ep.id)).status).toBe(200)
    expect((await a.call("GET", `/api/webhooks/endpoints/${ep.id}/deliveries`, { token: read })).status).toBe(200)

    const writes: Array<[string, string, unknown?]> = [
      ["POST", "/api/webhooks/endpoints", { url: "https://hooks.example.invalid/k", events: ["*"] }],
      ["PATCH", `/api/webhooks/endpoints/${ep.id}`, { description: "x" }],
      ["POST", `/api/webhooks/endpoints/${ep.id}/rotate-secret`],
      ["POST", `/api/webhooks/endpoints/${ep.id}/test`],
      ["POST", "/api/webhooks/deliveries/1/retry"],
      ["DELETE", `/api/webhooks/endpoints/${ep.id}`],
    ]
    for (const key of [read, write])
      for (const [method, path, b] of writes)
        expect(await errorOf(await a.call(method, path, { token: key, body: b }))).toMatchObject({
          status: 403,
          code: "INSUFFICIENT_SCOPE",
        })
    expect(await endpointRow(ep.id)).toMatchObject({ version: 1, deleted_at: null })

    const byKey = await created(admin)
    expect(byKey.secret).toMatch(/^whsec_/)
    expect((await patch(admin, byKey.id, { description: "by key" })).status).toBe(200)
    expect((await a.call("DELETE", `/api/webhooks/endpoints/${byKey.id}`, { token: admin })).status).toBe(200)
  })

  it("refuses callers without credentials (401)", async () => {
    expect((await a.call("GET", "/api/webhooks/endpoints")).status).toBe(401)
    expect(
      (
        await a.call("POST", "/api/webhooks/endpoints", {
          body: { url: "https://hooks.example.invalid/", events: ["*"] },
        })
      ).status,
    ).toBe(401)
  })
})

describe("isolation between workspaces", () => {
  it("another workspace's endpoint is 404 on every route and absent from its list", async () => {
    const owner = await a.signup()
    const intruder = await a.signup()
    const ep = await created(owner)
    await created(intruder)
    const attempts: Array<[string, string, unknown?]> = [
      ["GET", `/api/webhooks/endpoints/${ep.id}`],
      ["PATCH", `/api/webhooks/endpoints/${ep.id}`, { enabled: false }],
      ["POST", `/api/webhooks/endpoints/${ep.id}/rotate-secret`],
      ["POST", `/api/webhooks/endpoints/${ep.id}/test`],
      ["GET", `/api/webhooks/endpoints/${ep.id}/deliveries`],
      ["DELETE", `/api/webhooks/endpoints/${ep.id}`],
    ]
    for (const [method, path, b] of attempts)
      expect(await errorOf(await a.call(method, path, { token: intruder.token, body: b }))).toMatchObject({
        status: 404,
        code: "NOT_FOUND",
      })
    const theirs = await body<{ endpoints: Endpoint[] }>(
      await a.call("GET", "/api/webhooks/endpoints", { token: intruder.token }),
    )
    expect(theirs.endpoints.map((e) => e.id)).not.toContain(ep.id)
    expect(await endpointRow(ep.id)).toMatchObject({ version: 1, enabled: true, deleted_at: null })
    const [{ n }] = await srv.sql<[{ n: number }]>`
      select count(*)::int as n from webhook_events where tenant_id in (${owner.tenantId}, ${intruder.tenantId})`
    expect(n).toBe(0)
  })
})

describe("the event catalogue in /openapi.json", () => {
  it("has one webhooks entry per type and ping, each with its data schema and the signature headers", async () => {
    const doc = await body<{
      webhooks: Record<string, { post: { parameters: Array<{ name: string }>; requestBody: any } }>
      paths: Record<string, Record<string, unknown>>
    }>(await fetch(`${srv.url}/openapi.json`))
    expect(Object.keys(doc.webhooks).sort()).toEqual([...EVENT_TYPES, "ping"].sort())
    for (const [type, entry] of Object.entries(doc.webhooks)) {
      const schema = entry.post.requestBody.content["application/json"].schema
      expect(schema.properties.type).toEqual({ const: type })
      expect(schema.required).toEqual(["id", "type", "created_at", "tenant_id", "data"])
      expect(Object.keys(schema.properties.data.properties).length).toBeGreaterThan(0)
      expect(entry.post.parameters.map((p) => p.name)).toEqual(["X-SVC-Event-Id", "X-SVC-Signature", "User-Agent"])
    }
    expect(
      doc.webhooks["approval.resolved"]!.post.requestBody.content["application/json"].schema.properties.data.properties,
    ).toHaveProperty("decided_at")
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        "/api/webhooks/endpoints",
        "/api/webhooks/endpoints/{id}",
        "/api/webhooks/endpoints/{id}/rotate-secret",
        "/api/webhooks/endpoints/{id}/test",
        "/api/webhooks/endpoints/{id}/deliveries",
        "/api/webhooks/deliveries/{id}/retry",
      ]),
    )
    expect(Object.keys(doc.paths["/api/webhooks/endpoints/{id}"]!).sort()).toEqual(["delete", "get", "patch"])
  })
})

describe("the README's receiver", () => {
  // The five lines a user copies, run as written against what the delivery worker signs.
  const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8")
  const section = readme.slice(readme.indexOf("## Outbound webhooks"))
  const code = /```js\n([\s\S]*?)```/.exec(section)?.[1] ?? ""
  const verify = new Function("require", `${code}; return verifyParley`)(createRequire(import.meta.url)) as (
    raw: Buffer,
    header: string | undefined,
    secret: string,
    now?: number,
  ) => boolean

  it("accepts the worker's signature, either secret during a rotation, and refuses the rest", () => {
    // The require, then the function in five lines.
    expect(code.trim().split("\n")).toHaveLength(6)
    const raw = Buffer.from(JSON.stringify({ id: "evt_1", type: "ping", data: { endpoint_id: 1 } }))
    const now = Math.floor(Date.now() / 1000)
    const [oldSecret, newSecret] = [newWebhookSecret(), newWebhookSecret()]
    const header = signWebhook(raw, [newSecret, oldSecret], now)
    expect(verify(raw, header, newSecret)).toBe(true)
    expect(verify(raw, header, oldSecret)).toBe(true)
    expect(verify(raw, signWebhook(raw, [newSecret], now), newSecret)).toBe(true)
    expect(verify(raw, header, newWebhookSecret())).toBe(false)
    expect(verify(Buffer.concat([raw, Buffer.from(" ")]), header, newSecret)).toBe(false)
    expect(verify(raw, signWebhook(raw, [newSecret], now - 301), newSecret)).toBe(false)
    expect(verify(raw, header, newSecret, now + 301)).toBe(false)
    expect(verify(raw, undefined, newSecret)).toBe(false)
    expect(verify(raw, "t=abc,v1=zz", newSecret)).toBe(false)
    expect(verify(raw, header.replace(/v1=[0-9a-f]{4}/, "v1=zzzz"), newSecret)).toBe(false)
  })
})

describe("the key secrets are sealed with", () => {
  it("is kept in the database without a master key, derived from CREDENTIALS_MASTER_KEY with one", async () => {
    const stored = await webhookSecretKey({ ...srv.config, credentialsMasterKey: undefined }, srv.sql)
    expect(stored).toHaveLength(32)
    expect(await webhookSecretKey({ ...srv.config, credentialsMasterKey: undefined }, srv.sql)).toEqual(stored)
    const [row] = await srv.sql<
      [{ value: string }?]
    >`select value from system_secrets where name = 'webhook_secret_key'`
    expect(row?.value.length).toBeGreaterThanOrEqual(32)

    const master = Buffer.alloc(32, 9).toString("base64")
    const derived = await webhookSecretKey({ ...srv.config, credentialsMasterKey: master }, srv.sql)
    expect(derived).toHaveLength(32)
    expect(derived.equals(stored)).toBe(false)
    // Never the master key itself: a provider-credential ciphertext and a webhook one never share a key.
    expect(derived.equals(Buffer.from(master, "base64"))).toBe(false)
    expect(await webhookSecretKey({ ...srv.config, credentialsMasterKey: master }, srv.sql)).toEqual(derived)

    const sealed = webhookSecretBox(derived).seal("whsec_x", 5)
    expect(webhookSecretBox(derived).open(sealed, 5)).toBe("whsec_x")
    expect(() => webhookSecretBox(derived).open(sealed, 6)).toThrow()
    expect(() => webhookSecretBox(stored).open(sealed, 5)).toThrow()
    expect(() => webhookSecretBox(derived).open(`${sealed.slice(0, -4)}AAAA`, 5)).toThrow()
  })
})
