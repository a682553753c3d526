// The connect-time address guard on webhook deliveries (ALLOW_PRIVATE_PROVIDER_URLS unset): a host
// that resolved publicly when the endpoint was saved and privately now (DNS rebinding), and a private
// IP literal, are refused when the worker connects; the receiver behind them hears nothing.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { setHostResolver } from "../../src/providers/outbound.js"
import { emitEvent } from "../../src/webhooks/outbox.repo.js"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { attemptsOf, createEndpoint, deliveryOf, type Receiver, startReceiver, waitFor } from "./delivery.support.js"

describe("webhook delivery address guard", () => {
  let srv: TestServer
  let session: Session
  let receiver: Receiver

  beforeAll(async () => {
    srv = await startTestServer({ env: { WEBHOOK_RETRY_SCALE: "0.00003", WEBHOOK_TIMEOUT_MS: "2000" } })
    session = await api(srv).signup()
    receiver = await startReceiver(200)
  })
  afterAll(async () => {
    setHostResolver(undefined)
    await receiver?.close()
    await srv?.stop()
  })

  it("refuses at connect a name that now resolves to a private address, and a private literal", async () => {
    // Saved while the name resolved publicly; by the time the worker connects it points inside.
    setHostResolver(async () => [{ address: "93.184.216.34", family: 4 }])
    const rebound = await createEndpoint(
      srv.sql,
      srv.config,
      session.tenantId,
      `http://hooks.example.test:${receiver.port}/hook`,
    )
    const metadata = await createEndpoint(srv.sql, srv.config, session.tenantId, "http://169.254.169.254/latest")
    setHostResolver(async (host) => (host === "hooks.example.test" ? [{ address: "127.0.0.1", family: 4 }] : []))

    const eventId = await emitEvent(srv.sql, { tenantId: session.tenantId, type: "wallet.low", data: {} })
    for (const [ep, error] of [
      [rebound, /refused to connect to hooks\.example\.test: it resolves to 127\.0\.0\.1, not a public address/],
      [metadata, /refused to connect to 169\.254\.169\.254: not a public address/],
    ] as const) {
      const d = await waitFor("a refused attempt", async () => {
        const s = await deliveryOf(srv.sql, eventId, ep.id)
        return (s?.attempts ?? 0) >= 2 ? s : undefined
      })
      // Retried like any connection failure (the name may answer publicly again), never sent.
      expect(d.last_status_code).toBeNull()
      expect(d.last_error).toMatch(error)
      const attempts = await attemptsOf(srv.sql, d.id)
      expect(attempts[0]).toMatchObject({ attempt: 1, outcome: "retry", status_code: null })
      expect(attempts[0]!.error).toMatch(error)
    }
    expect(receiver.received).toHaveLength(0)
  })
})
