// A dial batch's reservations in one transaction (src/billing: reserveCalls): the same cost per
// call as a single reservation, idempotent per call, never overdrawing (the calls the balance
// cannot pay are refused, the others held), and the wallet agreeing with its ledger.
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { reserveCall, reserveCalls } from "../../src/billing/usage.service.js"
import { callCostMinor } from "../../src/billing/wallet.service.js"
import type { AppServices } from "../../src/main/app.layer.js"
import { api, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
let a: ReturnType<typeof api>

beforeAll(async () => {
  srv = await sharedTestServer()
  a = api(srv)
})
afterAll(async () => srv?.stop())

async function funded(amountMinor: number): Promise<Session> {
  const s = await a.signup({ country: "US" })
  const res = await a.call("POST", "/billing/topup", { token: s.token, body: { amount_minor: amountMinor } })
  const intent = (await res.json()) as { external_id: string }
  const hook = await a.call("POST", "/billing/webhooks/stub", {
    body: { external_id: intent.external_id, status: "succeeded" },
  })
  expect(hook.status).toBe(200)
  return s
}

const run = <A, E, R extends AppServices>(eff: Effect.Effect<A, E, R>): Promise<A> =>
  srv.running.runtime.runPromise(eff as Effect.Effect<A, E, AppServices>)

const balance = async (tenantId: number) => {
  const [w] = await srv.sql<[{ balance_minor: number; sum: number }]>`
    select w.balance_minor, (select coalesce(sum(amount_minor), 0) from ledger_entries l
      where l.tenant_id = w.tenant_id)::bigint as sum from wallets w where w.tenant_id = ${tenantId}`
  return w
}

describe("reserveCalls", () => {
  it("holds each call's cost once, refuses what the balance cannot pay, and replays idempotently", async () => {
    const cost = callCostMinor(180, "USD")
    const s = await funded(cost * 3)
    // Whatever the wallet holds (a signup may come with credit): room for `fits` calls and a part.
    const start = (await balance(s.tenantId)).balance_minor
    const fits = Math.floor(start / cost)
    const refs = Array.from({ length: fits + 2 }, (_, i) => `call:batch-${s.tenantId}-${i}`)
    const first = await run(reserveCalls(s.tenantId, refs, 180))
    expect(first.map((r) => r.ok)).toEqual([...Array(fits).fill(true), false, false])
    expect(first[0]).toEqual({ ok: true, reserved_minor: cost })
    expect(first[fits]).toMatchObject({ ok: false, required_minor: cost })
    const half = start - fits * cost
    const after = await balance(s.tenantId)
    expect(after.balance_minor).toBe(half)
    expect(after.balance_minor).toBe(Number(after.sum))

    // Again, with one call reserved alone in between: nothing is held twice.
    await run(Effect.either(reserveCall(s.tenantId, refs[fits + 1]!, 180)))
    const again = await run(reserveCalls(s.tenantId, refs, 180))
    expect(again.map((r) => r.ok)).toEqual([...Array(fits).fill(true), false, false])
    const [{ n }] = await srv.sql<[{ n: number }]>`
      select count(*)::int as n from usage_reservations where tenant_id = ${s.tenantId}`
    expect(n).toBe(fits)
    expect((await balance(s.tenantId)).balance_minor).toBe(half)
  })
})
