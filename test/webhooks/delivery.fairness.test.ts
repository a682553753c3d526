// Fair delivery: receivers that hang (each attempt held for the whole 10 s timeout) get at most
// IN_FLIGHT_PER_WORKSPACE posts of a process in flight per workspace (IN_FLIGHT_PER_FAILING_ENDPOINT
// for an endpoint already failing), so another workspace's delivery, due after all of theirs, is still
// posted at once rather than after their timeouts.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  IN_FLIGHT_PER_ENDPOINT,
  IN_FLIGHT_PER_FAILING_ENDPOINT,
  IN_FLIGHT_PER_WORKSPACE,
} from "../../src/webhooks/delivery.js"
import { emitEvents } from "../../src/webhooks/outbox.repo.js"
import { api } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { createEndpoint, deliveryOf, receiverPool, waitFor } from "./delivery.support.js"

describe("webhook delivery under hanging receivers", () => {
  let srv: TestServer
  const receivers = receiverPool()

  beforeAll(async () => {
    // The attempt timeout stays at its default (10 s): a hanging receiver holds its slot that long.
    srv = await startTestServer({ env: { ALLOW_PRIVATE_PROVIDER_URLS: "true" } })
  })
  afterAll(async () => {
    // Closing the receivers ends the hanging posts, so the server stops without waiting out their timeouts.
    await receivers.closeAll()
    await srv?.stop()
  })

  it("caps what one endpoint and one workspace hold in flight; another workspace is posted meanwhile", async () => {
    const client = api(srv)
    const noisy = await client.signup()
    const quiet = await client.signup()
    // Five hanging endpoints in one workspace, ten events each: 50 posts that would take every one of the
    // process's 32 slots for 10 s.
    const hanging = await Promise.all(
      Array.from({ length: 5 }, async () => {
        const r = await receivers.start("hang")
        return { r, ep: await createEndpoint(srv.sql, srv.config, noisy.tenantId, r.url) }
      }),
    )
    const ok = await receivers.start(200)
    const quietEp = await createEndpoint(srv.sql, srv.config, quiet.tenantId, ok.url)

    // The noisy events first and the quiet one last, in one commit (so one claim sees them all): due at
    // the same time, the quiet delivery is behind all fifty.
    const quietId = await srv.sql.begin(async (tx) => {
      await emitEvents(
        tx,
        Array.from({ length: 10 }, (_, i) => ({
          tenantId: noisy.tenantId,
          type: "call.completed" as const,
          data: { i },
        })),
      )
      return (await emitEvents(tx, [{ tenantId: quiet.tenantId, type: "call.completed", data: {} }]))[0]!
    })

    const delivered = await waitFor("the quiet workspace's delivery", async () => {
      const d = await deliveryOf(srv.sql, quietId, quietEp.id)
      return d?.status === "delivered" ? d : undefined
    })
    expect(delivered.attempts).toBe(1)
    // Delivered while every noisy post was still hanging: none of their attempts has ended yet (the
    // first would end at the 10 s timeout), so the quiet one did not wait for a slot to free.
    const [{ ended }] = await srv.sql<[{ ended: number }]>`
      select count(*)::int as ended from webhook_attempts where tenant_id = ${noisy.tenantId}`
    expect(ended).toBe(0)

    // The noisy workspace holds its cap, each endpoint no more than its own.
    const leased = await srv.sql<{ endpoint_id: number; n: number }[]>`
      select endpoint_id, count(*)::int as n from webhook_deliveries
      where tenant_id = ${noisy.tenantId} and locked_until > now() group by endpoint_id`
    expect(leased.reduce((n, x) => n + x.n, 0)).toBe(IN_FLIGHT_PER_WORKSPACE)
    for (const x of leased) expect(x.n).toBeLessThanOrEqual(IN_FLIGHT_PER_ENDPOINT)
    // What the receivers heard is what was leased: nothing beyond the caps was posted.
    const posted = () => hanging.map((h) => h.r.received.length)
    await waitFor("the noisy posts", async () =>
      posted().reduce((n, x) => n + x, 0) >= IN_FLIGHT_PER_WORKSPACE ? true : undefined,
    )
    await new Promise((r) => setTimeout(r, 500))
    expect(posted().reduce((n, x) => n + x, 0)).toBe(IN_FLIGHT_PER_WORKSPACE)
    for (const n of posted()) expect(n).toBeLessThanOrEqual(IN_FLIGHT_PER_ENDPOINT)
  }, 30_000)

  it("gives an endpoint already failing two posts in flight, however long its queue", async () => {
    const down = await api(srv).signup()
    const r = await receivers.start("hang")
    const ep = await createEndpoint(srv.sql, srv.config, down.tenantId, r.url)
    await srv.sql`update webhook_endpoints set failing_since = now() - interval '1 hour' where id = ${ep.id}`
    await srv.sql.begin((tx) =>
      emitEvents(
        tx,
        Array.from({ length: 10 }, (_, i) => ({
          tenantId: down.tenantId,
          type: "call.completed" as const,
          data: { i },
        })),
      ),
    )
    await waitFor("the failing endpoint's posts", async () =>
      r.received.length >= IN_FLIGHT_PER_FAILING_ENDPOINT ? true : undefined,
    )
    await new Promise((res) => setTimeout(res, 500))
    expect(r.received.length).toBe(IN_FLIGHT_PER_FAILING_ENDPOINT)
    const [{ leased }] = await srv.sql<[{ leased: number }]>`
      select count(*)::int as leased from webhook_deliveries where endpoint_id = ${ep.id} and locked_until > now()`
    expect(leased).toBe(IN_FLIGHT_PER_FAILING_ENDPOINT)
  }, 30_000)
})
