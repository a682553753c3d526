// The connect-time address guard on webhook deliveries: a host that resolved publicly when the endpoint
// was saved and privately now (DNS rebinding), a private IP literal, and names resolving to IPv6 forms
// that reach IPv4 or are not globally reachable, are refused when the worker connects; the receiver
// behind them hears nothing, and the workspace reads which host was refused, never the address.
// ALLOW_PRIVATE_PROVIDER_URLS opens loopback to deliveries, and no other private range.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { setHostResolver } from "../../src/providers/outbound.js"
import { emitEvent } from "../../src/webhooks/outbox.repo.js"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { attemptsOf, createEndpoint, deliveryOf, type Receiver, startReceiver, waitFor } from "./delivery.support.js"

/** The first two attempts of a delivery (both refused, so retried), and the receiver never reached. */
async function refusedTwice(srv: TestServer, eventId: string, endpointId: number, error: RegExp, address?: string) {
  const d = await waitFor("a refused attempt", async () => {
    const s = await deliveryOf(srv.sql, eventId, endpointId)
    return (s?.attempts ?? 0) >= 2 ? s : undefined
  })
  // Retried like any connection failure (the name may answer publicly again), never sent.
  expect(d.last_status_code).toBeNull()
  expect(d.last_error).toMatch(error)
  const attempts = await attemptsOf(srv.sql, d.id)
  expect(attempts[0]).toMatchObject({ attempt: 1, outcome: "retry", status_code: null })
  expect(attempts[0]!.error).toMatch(error)
  // The workspace reads these: the internal answer a name led to is not in them.
  if (address !== undefined)
    for (const text of [d.last_error!, ...attempts.map((x) => x.error!)]) expect(text).not.toContain(address)
}

/** Answers each name from the table (an IPv6 answer where it has a colon); other names resolve to nothing. */
function resolveFrom(answers: Readonly<Record<string, string>>) {
  setHostResolver(async (host) => {
    const a = answers[host]
    return a === undefined ? [] : [{ address: a, family: a.includes(":") ? 6 : 4 }]
  })
}

/** An endpoint per name, at the receiver's port. */
const endpointsAt = (srv: TestServer, tenantId: number, port: number, hosts: ReadonlyArray<string>) =>
  Promise.all(
    hosts.map(async (host) => ({
      host,
      ep: await createEndpoint(srv.sql, srv.config, tenantId, `http://${host}:${port}/hook`),
    })),
  )

/** refusedTwice for a name that resolved to `address`: the name is said, the address is not. */
const nameRefusedTwice = (srv: TestServer, eventId: string, endpointId: number, host: string, address: string) =>
  refusedTwice(
    srv,
    eventId,
    endpointId,
    new RegExp(`^refused to connect to ${host.replaceAll(".", "\\.")}: it resolves to a non-public address$`),
    address,
  )

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
    resolveFrom({ "hooks.example.test": "127.0.0.1" })

    const eventId = await emitEvent(srv.sql, { tenantId: session.tenantId, type: "wallet.low", data: {} })
    await nameRefusedTwice(srv, eventId, rebound.id, "hooks.example.test", "127.0.0.1")
    // A literal is the workspace's own text: named as it was given.
    await refusedTwice(srv, eventId, metadata.id, /^refused to connect to 169\.254\.169\.254: not a public address$/)
    expect(receiver.received).toHaveLength(0)
  })

  it("refuses names resolving to IPv6 forms of IPv4 (SIIT, 6to4, local NAT64, Teredo) and documentation", async () => {
    const answers: Record<string, string> = {
      "siit.example.test": "::ffff:0:7f00:1",
      "sixtofour.example.test": "2002:7f00:1::",
      "nat64.example.test": "64:ff9b:1::7f00:1",
      "teredo.example.test": "2001:0:4136:e378:8000:63bf:3fff:fdd2",
      "docs.example.test": "2001:db8::1",
    }
    resolveFrom(answers)
    const eps = await endpointsAt(srv, session.tenantId, receiver.port, Object.keys(answers))
    const eventId = await emitEvent(srv.sql, { tenantId: session.tenantId, type: "wallet.low", data: {} })
    for (const { host, ep } of eps) await nameRefusedTwice(srv, eventId, ep.id, host, answers[host]!)
    expect(receiver.received).toHaveLength(0)
  })
})

describe("webhook delivery address guard with ALLOW_PRIVATE_PROVIDER_URLS", () => {
  let srv: TestServer
  let session: Session
  let receiver: Receiver

  beforeAll(async () => {
    srv = await startTestServer({
      env: { ALLOW_PRIVATE_PROVIDER_URLS: "true", WEBHOOK_RETRY_SCALE: "0.00003", WEBHOOK_TIMEOUT_MS: "2000" },
    })
    session = await api(srv).signup()
    receiver = await startReceiver(200)
  })
  afterAll(async () => {
    setHostResolver(undefined)
    await receiver?.close()
    await srv?.stop()
  })

  it("delivers to loopback, and still refuses every other private range at connect", async () => {
    const answers: Record<string, string> = {
      "loop.example.test": "127.0.0.1",
      "inside.example.test": "10.0.0.1",
      "metadata.example.test": "169.254.169.254",
      "ula.example.test": "fd00::1",
    }
    resolveFrom(answers)
    const [loop, ...refused] = await endpointsAt(srv, session.tenantId, receiver.port, Object.keys(answers))
    const literal = await createEndpoint(srv.sql, srv.config, session.tenantId, "http://10.0.0.1/hook")
    const eventId = await emitEvent(srv.sql, { tenantId: session.tenantId, type: "wallet.low", data: {} })

    const delivered = await waitFor("the loopback delivery", async () => {
      const s = await deliveryOf(srv.sql, eventId, loop!.ep.id)
      return s?.status === "delivered" ? s : undefined
    })
    expect(delivered).toMatchObject({ attempts: 1, last_status_code: 200 })
    for (const { host, ep } of refused) await nameRefusedTwice(srv, eventId, ep.id, host, answers[host]!)
    await refusedTwice(srv, eventId, literal.id, /^refused to connect to 10\.0\.0\.1: not a public address$/)
    // Only the loopback delivery reached the receiver.
    expect(receiver.received.map((r) => r.headers["x-svc-event-id"])).toEqual([eventId])
  })
})
