// The delivery worker end to end, in a real server (runtime role included) against local receivers:
// signed posts of the stored bytes, delivered once on 2xx, the retry schedule under a fast clock for
// every failing kind of answer, permanent 4xx, disabled and deleted endpoints, workspace isolation,
// the 5-day disable with its mail, and the metrics.

import pino from "pino"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startWebhookDelivery } from "../../runtime/workers/webhook-delivery.js"
import { makeMemoryBus } from "../../src/platform/bus/memory.bus.js"
import { renderMetrics } from "../../src/platform/metrics.js"
import { readOutbox } from "../../src/providers/mail/outbox.mail.js"
import { MAX_ATTEMPTS, RETRY_SCHEDULE_MS } from "../../src/webhooks/delivery.js"
import { emitEvent, emitEvents, emitPing, pruneOldEvents, recordAttempt } from "../../src/webhooks/outbox.repo.js"
import { api, type Session } from "../support/clients.js"
import { startTestServer, stopSharedServers, type TestServer } from "../support/harness.js"
import {
  type Answer,
  attemptsOf,
  createEndpoint,
  deliveryOf,
  receiverPool,
  signatureValid,
  waitFor,
} from "./delivery.support.js"

// No shared server runs beside this suite: it reads the process's metrics, which would count theirs too.
beforeAll(stopSharedServers)

// 1 min → 1.8 ms … 24 h → 2.6 s: the whole schedule in about 4 s (plus polls and timeouts), well
// inside 5 days → 13 s, so no endpoint of these tests is disabled but the one meant to be.
const SCALE = 0.00003
const TIMEOUT_MS = 400

describe("webhook delivery worker", () => {
  let srv: TestServer
  let a: Session
  let b: Session
  const receivers = receiverPool()
  const receiver = receivers.start

  beforeAll(async () => {
    srv = await startTestServer({
      env: {
        ALLOW_PRIVATE_PROVIDER_URLS: "true",
        WEBHOOK_RETRY_SCALE: String(SCALE),
        WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
      },
    })
    const client = api(srv)
    a = await client.signup()
    b = await client.signup()
  })
  afterAll(async () => {
    await receivers.closeAll()
    await srv?.stop()
  })

  const emit = (tenantId: number, data: Record<string, unknown> = { call_id: 1 }) =>
    emitEvent(srv.sql, { tenantId, type: "call.completed", data })

  it("posts the stored bytes once, signed, with the contract's headers, and records the delivery", async () => {
    const r = await receiver(200)
    const ep = await createEndpoint(srv.sql, srv.config, a.tenantId, r.url)
    const eventId = await emit(a.tenantId, { call_id: 42, note: "héllo ✓" })
    const d = await waitFor("delivered", async () => {
      const s = await deliveryOf(srv.sql, eventId, ep.id)
      return s?.status === "delivered" ? s : undefined
    })
    expect(d).toMatchObject({ attempts: 1, locked_by: null, last_status_code: 200, last_error: null })
    expect(d.delivered_at).not.toBeNull()

    expect(r.received).toHaveLength(1)
    const got = r.received[0]!
    const [{ body }] = await srv.sql<
      [{ body: string }]
    >`select body::text as body from webhook_events where id = ${eventId}`
    expect(got.body.equals(Buffer.from(body, "utf8"))).toBe(true)
    expect(JSON.parse(got.body.toString())).toMatchObject({
      id: eventId,
      type: "call.completed",
      tenant_id: a.tenantId,
      data: { call_id: 42, note: "héllo ✓" },
    })
    expect(got.headers["content-type"]).toBe("application/json")
    expect(got.headers["user-agent"]).toBe("Parley-Webhooks/0.3.0")
    expect(got.headers["x-svc-event-id"]).toBe(eventId)
    const sig = got.headers["x-svc-signature"] as string
    expect(sig).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/)
    expect(signatureValid(got.body, sig, ep.secret)).toBe(true)
    expect(signatureValid(got.body, sig, "whsec_wrong")).toBe(false)

    const attempts = await attemptsOf(srv.sql, d.id)
    expect(attempts).toHaveLength(1)
    expect(attempts[0]).toMatchObject({ attempt: 1, outcome: "delivered", status_code: 200, error: null })
    expect(attempts[0]!.next_attempt_at).toBeNull()

    // Exactly once: nothing more arrives.
    await new Promise((res) => setTimeout(res, 800))
    expect(r.received).toHaveLength(1)
  })

  it("posts each delivery once while several workers claim side by side", async () => {
    // Two more workers beside the server's own, on the same database: only the leases keep them apart.
    const others = ["side-1", "side-2"].map((me) =>
      startWebhookDelivery({
        sql: srv.sql,
        bus: makeMemoryBus(),
        log: pino({ level: "silent" }),
        config: srv.config,
        me,
        mail: undefined,
      }),
    )
    try {
      const c = await api(srv).signup()
      const r = await receiver(200)
      const ep = await createEndpoint(srv.sql, srv.config, c.tenantId, r.url)
      const ids = await srv.sql.begin((tx) =>
        emitEvents(
          tx,
          Array.from({ length: 200 }, (_, i) => ({
            tenantId: c.tenantId,
            type: "call.completed" as const,
            data: { i },
          })),
        ),
      )
      await waitFor("every delivery delivered", async () => {
        const [x] = await srv.sql<[{ n: number }]>`
          select count(*)::int as n from webhook_deliveries where endpoint_id = ${ep.id} and status = 'delivered'`
        return x.n === ids.length ? true : undefined
      })
      // Every event reached the receiver; a second post of one follows a recorded failed attempt
      // (under this suite's 400 ms timeout a busy machine answers late now and then: at least once).
      const got = r.received.map((x) => x.headers["x-svc-event-id"] as string)
      expect(new Set(got)).toEqual(new Set(ids))
      const [x] = await srv.sql<[{ attempts: number; distinct_attempts: number; delivered: number }]>`
        select count(*)::int as attempts, count(distinct (delivery_id, attempt))::int as distinct_attempts,
          count(*) filter (where outcome = 'delivered')::int as delivered
        from webhook_attempts where endpoint_id = ${ep.id}`
      expect(x.delivered).toBe(ids.length)
      expect(x.distinct_attempts).toBe(x.attempts)
      // Two workers holding one delivery at once would both post it, and only one could record its
      // attempt: the receiver would count more posts than there are attempts on record.
      expect(got.length).toBeLessThanOrEqual(x.attempts)
    } finally {
      await Promise.all(others.map((w) => w.stop()))
    }
  })

  it("signs with both secrets during a rotation, and with the new one alone once the old one expired", async () => {
    const r = await receiver(200)
    const old = "whsec_the_secret_before_the_rotation_0123456789abc"
    const rotating = await createEndpoint(srv.sql, srv.config, a.tenantId, r.url, {
      previousSecret: old,
      previousExpiresInSeconds: 3600,
    })
    const expired = await createEndpoint(srv.sql, srv.config, a.tenantId, r.url, {
      previousSecret: old,
      previousExpiresInSeconds: -1,
    })
    const eventId = await emit(a.tenantId)
    await waitFor("both delivered", async () => (r.received.length >= 2 ? true : undefined))
    const byEndpoint = async (id: number) => {
      const d = await deliveryOf(srv.sql, eventId, id)
      return d?.status === "delivered" ? d : undefined
    }
    await waitFor("rotating delivered", () => byEndpoint(rotating.id))
    await waitFor("expired delivered", () => byEndpoint(expired.id))
    const sigs = r.received.map((x) => ({ body: x.body, sig: x.headers["x-svc-signature"] as string }))
    const two = sigs.find((s) => s.sig.split(",").length === 3)!
    const one = sigs.find((s) => s.sig.split(",").length === 2)!
    expect(two.sig).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/)
    expect(signatureValid(two.body, two.sig, rotating.secret)).toBe(true)
    expect(signatureValid(two.body, two.sig, old)).toBe(true)
    expect(signatureValid(one.body, one.sig, expired.secret)).toBe(true)
    expect(signatureValid(one.body, one.sig, old)).toBe(false)
  })

  it("retries 500, 408, 429, 301 and a hanging receiver on the schedule, then fails the delivery", async () => {
    const kinds = [
      { answer: 500 as const, status: 500, error: /HTTP 500/ },
      { answer: 408 as const, status: 408, error: /HTTP 408/ },
      { answer: 429 as const, status: 429, error: /HTTP 429/ },
      {
        answer: { status: 301, headers: { location: "http://127.0.0.1:1/elsewhere" } },
        status: 301,
        error: /redirects are not followed/,
      },
      { answer: "hang" as const, status: null, error: new RegExp(`no answer within ${TIMEOUT_MS} ms`) },
    ]
    const cases = await Promise.all(
      kinds.map(async (k) => {
        const r = await receiver(k.answer)
        const ep = await createEndpoint(srv.sql, srv.config, a.tenantId, r.url)
        return { ...k, r, ep }
      }),
    )
    const eventId = await emit(a.tenantId)
    for (const c of cases) {
      const d = await waitFor(
        `the ${c.status ?? "hanging"} delivery to fail`,
        async () => {
          const s = await deliveryOf(srv.sql, eventId, c.ep.id)
          return s?.status === "failed" ? s : undefined
        },
        30_000,
      )
      expect(d).toMatchObject({ attempts: MAX_ATTEMPTS, last_status_code: c.status, locked_by: null })
      expect(d.last_error).toMatch(c.error)
      expect(c.r.received).toHaveLength(MAX_ATTEMPTS)
      // Every attempt carried the same event id, freshly signed.
      for (const got of c.r.received) {
        expect(got.headers["x-svc-event-id"]).toBe(eventId)
        expect(signatureValid(got.body, got.headers["x-svc-signature"] as string, c.ep.secret)).toBe(true)
      }
      const attempts = await attemptsOf(srv.sql, d.id)
      expect(attempts.map((x) => x.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7])
      expect(attempts.map((x) => x.outcome)).toEqual([...Array(6).fill("retry"), "failed"])
      for (const x of attempts) {
        expect(x.status_code).toBe(c.status)
        expect(x.error).toMatch(c.error)
      }
      expect(attempts[6]!.next_attempt_at).toBeNull()
      // Each retry was scheduled one step of the schedule (× scale, ±10%) after its attempt ended.
      const gaps = attempts.slice(0, 6).map((x) => x.next_attempt_at!.getTime() - x.started_at.getTime() - x.latency_ms)
      gaps.forEach((g, i) => {
        const step = RETRY_SCHEDULE_MS[i]! * SCALE
        // Below: jitter only (the database's clock is read after the attempt ended). Above: jitter and
        // however long recording waited on a machine the whole suite shares.
        expect(g).toBeGreaterThanOrEqual(step * 0.9 - 15)
        expect(g).toBeLessThanOrEqual(step * 1.1 + 400)
      })
      // The steps that stand clear of that noise keep the schedule's order.
      expect(gaps[2]!).toBeLessThan(gaps[4]!)
      expect(gaps[3]!).toBeLessThan(gaps[4]!)
      expect(gaps[4]!).toBeLessThan(gaps[5]!)
      // And no attempt went out before it was due.
      for (let i = 1; i < attempts.length; i++)
        expect(attempts[i]!.started_at.getTime()).toBeGreaterThanOrEqual(
          attempts[i - 1]!.next_attempt_at!.getTime() - 5,
        )
    }
  }, 60_000)

  it("fails a delivery for good on 410 and 400, after one attempt", async () => {
    for (const status of [410, 400]) {
      const r = await receiver({ status, body: `gone ${"x".repeat(1000)}` })
      const ep = await createEndpoint(srv.sql, srv.config, a.tenantId, r.url)
      const eventId = await emit(a.tenantId)
      const d = await waitFor(`the ${status} delivery to fail`, async () => {
        const s = await deliveryOf(srv.sql, eventId, ep.id)
        return s?.status === "failed" ? s : undefined
      })
      expect(d).toMatchObject({ attempts: 1, last_status_code: status })
      // The receiver's answer is kept short in the list.
      expect(d.last_error!.startsWith(`HTTP ${status}: gone x`)).toBe(true)
      expect(d.last_error!.length).toBeLessThan(260)
      const attempts = await attemptsOf(srv.sql, d.id)
      expect(attempts).toMatchObject([{ attempt: 1, outcome: "failed", status_code: status, next_attempt_at: null }])
      await new Promise((res) => setTimeout(res, 300))
      expect(r.received).toHaveLength(1)
    }
  })

  it("delivers after a receiver recovers (a 1 MiB answer), and clears the failing streak", async () => {
    // Two 503s, then 200 with a body far past the read limit.
    const r = await receiver((n) => (n <= 2 ? 503 : { status: 200, body: "y".repeat(1024 * 1024) }))
    const ep = await createEndpoint(srv.sql, srv.config, a.tenantId, r.url)
    const eventId = await emit(a.tenantId)
    await waitFor("a failing streak", async () => {
      const [row] = await srv.sql<[{ failing_since: Date | null }]>`
        select failing_since from webhook_endpoints where id = ${ep.id}`
      return row.failing_since ?? undefined
    })
    const d = await waitFor("delivered after retries", async () => {
      const s = await deliveryOf(srv.sql, eventId, ep.id)
      return s?.status === "delivered" ? s : undefined
    })
    expect(d).toMatchObject({ attempts: 3, last_status_code: 200, last_error: null })
    expect((await attemptsOf(srv.sql, d.id)).map((x) => [x.outcome, x.status_code])).toEqual([
      ["retry", 503],
      ["retry", 503],
      ["delivered", 200],
    ])
    const [row] = await srv.sql<[{ failing_since: Date | null; enabled: boolean }]>`
      select failing_since, enabled from webhook_endpoints where id = ${ep.id}`
    expect(row).toEqual({ failing_since: null, enabled: true })
  })

  it("stops reading an answer at 64 KiB: a 2xx whose body never ends is delivered, within the timeout", async () => {
    const r = await receiver("endless")
    const ep = await createEndpoint(srv.sql, srv.config, b.tenantId, r.url)
    const eventId = await emit(b.tenantId)
    const d = await waitFor("delivered", async () => {
      const s = await deliveryOf(srv.sql, eventId, ep.id)
      return s?.status !== "pending" ? s : undefined
    })
    expect(d).toMatchObject({ status: "delivered", attempts: 1, last_status_code: 200 })
    const [attempt] = await attemptsOf(srv.sql, d.id)
    expect(attempt!.latency_ms).toBeLessThan(TIMEOUT_MS)
  })

  it("judges by the status line: a 2xx whose body stalls is delivered, a stalling 503 is retried", async () => {
    // Each answers its status line and a little body, then nothing, the response never ending: past the
    // attempt's timeout, so a verdict waiting for the body would be a timeout's.
    const stalledOk = await receiver({ status: 200, body: "accepted, more to follow", stall: true })
    const stalledBusy = await receiver((n) =>
      n === 1 ? { status: 503, body: "busy, more to follow", stall: true } : 200,
    )
    const ok = await createEndpoint(srv.sql, srv.config, b.tenantId, stalledOk.url)
    const busy = await createEndpoint(srv.sql, srv.config, b.tenantId, stalledBusy.url)
    const eventId = await emit(b.tenantId)
    const delivered = await waitFor("the stalled 200 settled", async () => {
      const s = await deliveryOf(srv.sql, eventId, ok.id)
      return s !== undefined && s.attempts > 0 ? s : undefined
    })
    expect(delivered).toMatchObject({ status: "delivered", attempts: 1, last_status_code: 200, last_error: null })
    expect(await attemptsOf(srv.sql, delivered.id)).toMatchObject([{ attempt: 1, outcome: "delivered", error: null }])
    const retried = await waitFor("the stalled 503 delivered on its retry", async () => {
      const s = await deliveryOf(srv.sql, eventId, busy.id)
      return s?.status === "delivered" ? s : undefined
    })
    expect(retried.attempts).toBe(2)
    const attempts = await attemptsOf(srv.sql, retried.id)
    expect(attempts.map((x) => [x.outcome, x.status_code])).toEqual([
      ["retry", 503],
      ["delivered", 200],
    ])
    // The snippet is what arrived before the body stalled, not a timeout.
    expect(attempts[0]!.error).toBe("HTTP 503: busy, more to follow")
    await new Promise((res) => setTimeout(res, 300))
    expect(stalledOk.received).toHaveLength(1)
  })

  it("leaves a delivery leased by another process alone until the lease runs out, then delivers it", async () => {
    const r = await receiver(200)
    const ep = await createEndpoint(srv.sql, srv.config, b.tenantId, r.url)
    // A process that claimed the delivery and died: its lease is still running.
    const eventId = await srv.sql.begin(async (tx) => {
      const id = await emitEvent(tx, { tenantId: b.tenantId, type: "call.completed", data: {} })
      await tx`update webhook_deliveries set locked_until = now() + interval '1500 milliseconds', locked_by = 'ghost'
        where event_id = ${id}`
      return id
    })
    await new Promise((res) => setTimeout(res, 900))
    expect(r.received).toHaveLength(0)
    expect(await deliveryOf(srv.sql, eventId, ep.id)).toMatchObject({ status: "pending", locked_by: "ghost" })
    const d = await waitFor("delivered once the lease ran out", async () => {
      const s = await deliveryOf(srv.sql, eventId, ep.id)
      return s?.status === "delivered" ? s : undefined
    })
    expect(d).toMatchObject({ attempts: 1, locked_by: null })
    expect(r.received).toHaveLength(1)
  })

  it("records an attempt only for the process still holding the lease", async () => {
    const ep = await createEndpoint(srv.sql, srv.config, b.tenantId, "http://127.0.0.1:9/unused", { enabled: false })
    // Deliveries of a disabled endpoint are never claimed: this one is ours to lease by hand.
    const eventId = await emitPing(srv.sql, b.tenantId, ep.id)
    const d = (await deliveryOf(srv.sql, eventId!, ep.id))!
    await srv.sql`update webhook_deliveries set locked_by = 'holder', locked_until = now() + interval '1 minute'
      where id = ${d.id}`
    const attempt = (me: string) =>
      srv.sql.begin((tx) =>
        recordAttempt(tx, {
          deliveryId: d.id,
          me,
          attempt: 1,
          startedAt: new Date(),
          outcome: "retry",
          statusCode: 503,
          latencyMs: 5,
          error: "HTTP 503",
          retryInMs: 60_000,
        }),
      )
    expect(await attempt("someone-else")).toBe(false)
    expect(await attemptsOf(srv.sql, d.id)).toHaveLength(0)
    expect(await attempt("holder")).toBe(true)
    const after = (await deliveryOf(srv.sql, eventId!, ep.id))!
    expect(after).toMatchObject({ status: "pending", attempts: 1, locked_by: null, last_status_code: 503 })
    const [row] = await attemptsOf(srv.sql, d.id)
    expect(row).toMatchObject({ attempt: 1, outcome: "retry", status_code: 503 })
    // Due about a minute later, by the database's clock.
    const [{ due_in }] = await srv.sql<[{ due_in: number }]>`
      select extract(epoch from next_attempt_at - now())::float8 as due_in from webhook_deliveries where id = ${d.id}`
    expect(due_in).toBeGreaterThan(55)
    expect(due_in).toBeLessThanOrEqual(60)
    // Released: a second record by the former holder changes nothing.
    expect(await attempt("holder")).toBe(false)
  })

  it("sends nothing to a disabled or deleted endpoint, pings included", async () => {
    const r = await receiver(200)
    const disabled = await createEndpoint(srv.sql, srv.config, a.tenantId, r.url)
    const deleted = await createEndpoint(srv.sql, srv.config, a.tenantId, r.url)
    // The deliveries exist (made while the endpoints were live), and the endpoints change in the same
    // commit: the worker must skip them when it claims, not only when events are emitted.
    const eventId = await srv.sql.begin(async (tx) => {
      const id = await emitEvent(tx, { tenantId: a.tenantId, type: "call.completed", data: {} })
      await tx`update webhook_endpoints set enabled = false where id = ${disabled.id}`
      await tx`update webhook_endpoints set deleted_at = now() where id = ${deleted.id}`
      return id
    })
    const ping = await emitPing(srv.sql, a.tenantId, disabled.id)
    expect(ping).toBeDefined()
    // An event emitted after the change makes no delivery for them at all.
    const later = await emit(a.tenantId)
    await new Promise((res) => setTimeout(res, 1200))
    expect(r.received).toHaveLength(0)
    for (const [ev, id] of [
      [eventId, disabled.id],
      [eventId, deleted.id],
      [ping!, disabled.id],
    ] as const)
      expect(await deliveryOf(srv.sql, ev, id)).toMatchObject({ status: "pending", attempts: 0, locked_by: null })
    expect(await deliveryOf(srv.sql, later, disabled.id)).toBeUndefined()
    expect(await deliveryOf(srv.sql, later, deleted.id)).toBeUndefined()
    // Parked: out of the due index, so no poll scans past them (migration 0037).
    const due = () =>
      srv.sql<Array<{ endpoint_id: number; event_id: string }>>`
        select endpoint_id, event_id from webhook_deliveries
        where endpoint_id in (${disabled.id}, ${deleted.id}) and status = 'pending' and next_attempt_at is not null
        order by id`
    expect(await due()).toEqual([])

    // Enabled again through the API: what waited is due at once and delivered; the deleted one's never.
    const res = await api(srv).call("PATCH", `/api/webhooks/endpoints/${disabled.id}`, {
      token: a.token,
      body: { enabled: true },
    })
    expect(res.status).toBe(200)
    await waitFor("the parked deliveries delivered", async () => (r.received.length >= 2 ? true : undefined))
    expect(r.received.map((x) => x.headers["x-svc-event-id"]).sort()).toEqual([eventId, ping!].sort())
    // The attempt is recorded once the receiver has answered: a moment after it got the request.
    for (const ev of [eventId, ping!])
      await expect.poll(() => deliveryOf(srv.sql, ev, disabled.id)).toMatchObject({ status: "delivered", attempts: 1 })
    expect(await deliveryOf(srv.sql, eventId, deleted.id)).toMatchObject({ status: "pending", attempts: 0 })
    expect(await due()).toEqual([])

    // Disabled again with a delivery in its retry schedule: parked, then due at once when enabled.
    await srv.sql`update webhook_endpoints set enabled = false where id = ${disabled.id}`
    const waiting = (await emitPing(srv.sql, a.tenantId, disabled.id))!
    const retried = await api(srv).call(
      "POST",
      `/api/webhooks/deliveries/${(await deliveryOf(srv.sql, waiting, disabled.id))!.id}/retry`,
      {
        token: a.token,
      },
    )
    expect(retried.status).toBe(202)
    expect(await due()).toEqual([])
    await new Promise((res) => setTimeout(res, 600))
    expect(r.received).toHaveLength(2)
  })

  it("keeps workspaces apart: A's events never reach B's endpoint", async () => {
    const ra = await receiver(200)
    const rb = await receiver(200)
    const epA = await createEndpoint(srv.sql, srv.config, a.tenantId, ra.url)
    const epB = await createEndpoint(srv.sql, srv.config, b.tenantId, rb.url)
    const eventId = await emit(a.tenantId)
    await waitFor("A's delivery", async () =>
      (await deliveryOf(srv.sql, eventId, epA.id))?.status === "delivered" ? true : undefined,
    )
    await new Promise((res) => setTimeout(res, 500))
    expect(ra.received.map((x) => x.headers["x-svc-event-id"])).toEqual([eventId])
    expect(rb.received).toHaveLength(0)
    expect(await deliveryOf(srv.sql, eventId, epB.id)).toBeUndefined()
    // A ping names an endpoint of its own workspace only.
    expect(await emitPing(srv.sql, a.tenantId, epB.id)).toBeUndefined()
  })

  it("disables an endpoint failing for 5 days (× scale) and mails the workspace's admins", async () => {
    const r = await receiver(500)
    const young = await createEndpoint(srv.sql, srv.config, b.tenantId, r.url)
    const old = await createEndpoint(srv.sql, srv.config, b.tenantId, r.url)
    // 5 days × 0.00003 = 13 s: one endpoint failing for 20 s already, the other since just now.
    await srv.sql`update webhook_endpoints set failing_since = now() - interval '20 seconds' where id = ${old.id}`
    await srv.sql`update webhook_endpoints set failing_since = now() where id = ${young.id}`
    const eventId = await emit(b.tenantId)
    const row = await waitFor("the old endpoint disabled", async () => {
      const [x] = await srv.sql<[{ enabled: boolean; disabled_reason: string | null }]>`
        select enabled, disabled_reason from webhook_endpoints where id = ${old.id}`
      return x.enabled ? undefined : x
    })
    expect(row).toEqual({ enabled: false, disabled_reason: "failing" })
    const mail = await waitFor("the admins' mail", async () => {
      // (Earlier tests' endpoints that kept failing for 13 s are disabled and mailed about too.)
      const m = readOutbox(srv.config.outboxFile).filter(
        (x) => x.kind === "webhook_endpoint_disabled" && x.text.includes(`(endpoint ${old.id})`),
      )
      return m.length > 0 ? m : undefined
    })
    expect(mail).toHaveLength(1)
    expect(mail[0]).toMatchObject({ to: b.email, subject: "Parley disabled a failing webhook endpoint" })
    expect(mail[0]!.text).toContain(r.url)
    // The young streak keeps its endpoint enabled (its first attempt failed too).
    await waitFor("the young endpoint's first attempt", async () =>
      ((await deliveryOf(srv.sql, eventId, young.id))?.attempts ?? 0) >= 1 ? true : undefined,
    )
    const [y] = await srv.sql<[{ enabled: boolean }]>`select enabled from webhook_endpoints where id = ${young.id}`
    expect(y.enabled).toBe(true)
    // The disabled endpoint's delivery waits: nothing more is posted to it.
    const d = (await deliveryOf(srv.sql, eventId, old.id))!
    expect(d).toMatchObject({ status: "pending", attempts: 1 })
    await new Promise((res) => setTimeout(res, 600))
    expect((await deliveryOf(srv.sql, eventId, old.id))!.attempts).toBe(1)
  })

  it("retention deletes settled events past 30 days, keeping those still due to a live endpoint", async () => {
    const r = await receiver(200)
    // Disabled: the worker leaves its deliveries pending, as a paused endpoint's would stay.
    const paused = await createEndpoint(srv.sql, srv.config, b.tenantId, r.url, { enabled: false })
    const gone = await createEndpoint(srv.sql, srv.config, b.tenantId, r.url, { enabled: false })
    const ping = async (ep: number, status: "pending" | "delivered" | "failed", daysOld: number) => {
      const id = (await emitPing(srv.sql, b.tenantId, ep))!
      await srv.sql`update webhook_deliveries set status = ${status} where event_id = ${id}`
      await srv.sql`update webhook_events set created_at = now() - make_interval(days => ${daysOld}) where id = ${id}`
      return id
    }
    const oldDelivered = await ping(paused.id, "delivered", 31)
    const oldFailed = await ping(paused.id, "failed", 40)
    const oldPending = await ping(paused.id, "pending", 31)
    const oldPendingToDeleted = await ping(gone.id, "pending", 31)
    const recentDelivered = await ping(paused.id, "delivered", 29)
    await srv.sql`update webhook_endpoints set deleted_at = now() where id = ${gone.id}`
    const deliveryId = (await deliveryOf(srv.sql, oldDelivered, paused.id))!.id
    await srv.sql`insert into webhook_attempts (tenant_id, delivery_id, endpoint_id, event_id, attempt, started_at,
      outcome) values (${b.tenantId}, ${deliveryId}, ${paused.id}, ${oldDelivered}, 1, now(), 'delivered')`

    expect(await pruneOldEvents(srv.sql, 30, 1000)).toBe(3)
    const all = [oldDelivered, oldFailed, oldPending, oldPendingToDeleted, recentDelivered]
    const left = await srv.sql<{ id: string }[]>`select id from webhook_events where id in ${srv.sql(all)}`
    expect(left.map((x) => x.id).sort()).toEqual([oldPending, recentDelivered].sort())
    // Their deliveries and attempts went with them.
    expect(await deliveryOf(srv.sql, oldDelivered, paused.id)).toBeUndefined()
    expect(await attemptsOf(srv.sql, deliveryId)).toHaveLength(0)
    expect(await pruneOldEvents(srv.sql, 30, 1000)).toBe(0)
  })
})

describe("webhook metrics", () => {
  // A server of its own, started once the suite above stopped its own: no delivery but this test's
  // runs in this process while the counters are compared, so every change is an exact count.
  let srv: TestServer
  const receivers = receiverPool()
  const receiver = receivers.start
  beforeAll(async () => {
    srv = await startTestServer({
      env: { ALLOW_PRIVATE_PROVIDER_URLS: "true", WEBHOOK_RETRY_SCALE: String(SCALE), WEBHOOK_TIMEOUT_MS: "2000" },
    })
  })
  afterAll(async () => {
    await receivers.closeAll()
    await srv?.stop()
  })

  it("counts delivered, failed by reason and outcome, lag, queued, and the oldest due delivery's wait", async () => {
    const c = await api(srv).signup()
    const value = (text: string, re: RegExp) => Number(re.exec(text)?.[1] ?? 0)
    const failed = (reason: string, outcome: string) =>
      new RegExp(`^parley_webhook_attempts_failed_total\\{reason="${reason}",outcome="${outcome}"\\} (\\d+)`, "m")
    const series = {
      delivered: /^parley_webhook_deliveries_delivered_total (\d+)/m,
      gone: failed("status_4xx", "failed"),
      busy: failed("status_5xx", "retry"),
      slow: failed("timeout", "retry"),
      lag: /^parley_webhook_lag_seconds_count (\d+)/m,
    }
    const allFailed = (text: string) =>
      [...text.matchAll(/^parley_webhook_attempts_failed_total\{[^}]*\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0)
    const before = await renderMetrics()

    // One event to four endpoints: 200; 410 (failed for good); 503 then 200; no answer in time then 200.
    const only = { events: ["call.completed"] }
    const eps = await Promise.all(
      [200, 410, (n: number) => (n === 1 ? 503 : 200), (n: number) => (n === 1 ? "hang" : 200)].map(async (a) => {
        const r = await receiver(a as Answer | ((n: number) => Answer))
        return { r, ep: await createEndpoint(srv.sql, srv.config, c.tenantId, r.url, only) }
      }),
    )
    const eventId = await emitEvent(srv.sql, { tenantId: c.tenantId, type: "call.completed", data: { call_id: 1 } })
    for (const { ep } of eps)
      await waitFor("settled", async () =>
        (await deliveryOf(srv.sql, eventId, ep.id))?.status !== "pending" ? true : undefined,
      )
    expect(eps.map((x) => x.r.received.length)).toEqual([1, 1, 2, 2])

    // Three deliveries to an endpoint of their own: two due in an hour; one due an hour ago and held by
    // a process that never finishes it (a stalled queue, which no claim samples).
    const stalled = await createEndpoint(srv.sql, srv.config, c.tenantId, "http://127.0.0.1:9/unused", {
      events: ["call.failed"],
    })
    await srv.sql.begin(async (tx) => {
      for (let i = 0; i < 3; i++) await emitEvent(tx, { tenantId: c.tenantId, type: "call.failed", data: { i } })
      await tx`update webhook_deliveries set next_attempt_at = now() + interval '1 hour'
        where endpoint_id = ${stalled.id}`
      await tx`update webhook_deliveries set next_attempt_at = now() - interval '1 hour', locked_by = 'ghost',
          locked_until = now() + interval '1 hour'
        where id = (select min(id) from webhook_deliveries where endpoint_id = ${stalled.id})`
    })
    const after = await renderMetrics()
    const delta = (re: RegExp) => value(after, re) - value(before, re)
    expect(delta(series.delivered)).toBe(3)
    expect(delta(series.gone)).toBe(1)
    expect(delta(series.busy)).toBe(1)
    expect(delta(series.slow)).toBe(1)
    expect(allFailed(after) - allFailed(before)).toBe(3)
    // The lag of first attempts only: one per delivery, retries not counted again.
    expect(delta(series.lag)).toBe(4)
    expect(value(after, /^parley_webhook_deliveries_queued (\d+)/m)).toBe(3)
    const oldest = value(after, /^parley_webhook_oldest_due_seconds (\S+)/m)
    expect(oldest).toBeGreaterThanOrEqual(3600)
    expect(oldest).toBeLessThan(3660)
  }, 30_000)
})
