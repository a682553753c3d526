// Call endings in groups (runtime/actors/settlements.ts; src/billing: settleCalls): a group settles each
// reservation exactly once, charging what a single settlement charges, idempotently (a replayed
// group, a call twice in a group, a call settled alone before) and the wallet agreeing with its
// ledger; the grouper puts whatever arrives while a group is written into the next one.

import type { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { reserveCalls, settleCall, settleCalls } from "../../src/billing/usage.service.js"
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

const wallet = async (tenantId: number) => {
  const [w] = await srv.sql<[{ balance_minor: number; sum: number }]>`
    select w.balance_minor, (select coalesce(sum(amount_minor), 0) from ledger_entries l
      where l.tenant_id = w.tenant_id)::bigint as sum from wallets w where w.tenant_id = ${tenantId}`
  return { balance: Number(w.balance_minor), sum: Number(w.sum) }
}

describe("settleCalls", () => {
  it("settles each call once, as settleCall would, across workspaces, and replays idempotently", async () => {
    const cost = callCostMinor(180, "USD")
    const [s1, s2] = [await funded(cost * 40), await funded(cost * 40)]
    const refsOf = (s: Session, n: number) => Array.from({ length: n }, (_, i) => `call:grp-${s.tenantId}-${i}`)
    const [r1, r2] = [refsOf(s1, 30), refsOf(s2, 30)]
    expect((await run(reserveCalls(s1.tenantId, r1, 180))).every((r) => r.ok)).toBe(true)
    expect((await run(reserveCalls(s2.tenantId, r2, 180))).every((r) => r.ok)).toBe(true)
    const before = [await wallet(s1.tenantId), await wallet(s2.tenantId)]

    // Seconds per call: unanswered (released whole), some, and more than was held (capped).
    const secondsOf = (i: number) => [0, 17, 60, 179, 600][i % 5]!
    // One call of each workspace settled alone first: the group answers it as it stands.
    const alone = await run(settleCall(r1[3]!, 999))
    const items = [...r1, ...r2].map((callRef, i) => ({ callRef, connectedSeconds: secondsOf(i % 30) }))
    // A call twice in one group, and a call ref nobody reserved.
    const group = [
      ...items,
      { callRef: r2[0]!, connectedSeconds: 600 },
      { callRef: "call:nobody", connectedSeconds: 5 },
    ]
    const out = await run(settleCalls(group))
    expect(out).toHaveLength(group.length)
    expect(out.at(-1)).toBeUndefined()
    expect(out[3]).toEqual(alone)
    expect(out.at(-2)).toEqual(out[30])
    for (const [i, r] of out.slice(0, 60).entries()) {
      if (i === 3) continue
      const seconds = secondsOf(i % 30)
      expect(r).toEqual({
        call_ref: group[i]!.callRef,
        reserved_minor: cost,
        status: seconds > 0 ? "settled" : "released",
        settled_minor: Math.min(cost, callCostMinor(seconds, "USD")),
      })
    }

    // Each workspace paid exactly what it was charged; the wallets agree with their ledgers.
    for (const [k, s] of [s1, s2].entries()) {
      const charged = out
        .slice(k * 30, k * 30 + 30)
        .reduce((n, r, i) => n + (k === 0 && i === 3 ? 0 : (r?.settled_minor ?? 0)), 0)
      const w = await wallet(s.tenantId)
      const aloneCharge = k === 0 ? (alone?.settled_minor ?? 0) : 0
      expect(w.balance).toBe(before[k]!.balance + 30 * cost - charged - aloneCharge)
      expect(w.balance).toBe(w.sum)
    }

    // Replayed (a retried group): the same answers, nothing posted again.
    const ledgerCount = async () =>
      (
        await srv.sql<[{ n: number }]>`select count(*)::int as n from ledger_entries
          where tenant_id in (${s1.tenantId}, ${s2.tenantId})`
      )[0].n
    const entries = await ledgerCount()
    expect(await run(settleCalls(group))).toEqual(out)
    expect(await ledgerCount()).toBe(entries)
    const [{ open }] = await srv.sql<[{ open: number }]>`select count(*)::int as open from usage_reservations
      where tenant_id in (${s1.tenantId}, ${s2.tenantId}) and status = 'reserved'`
    expect(open).toBe(0)
  })

  it("two groups settling the same calls at once charge each call once", async () => {
    const cost = callCostMinor(180, "USD")
    const s = await funded(cost * 20)
    const refs = Array.from({ length: 20 }, (_, i) => `call:race-${s.tenantId}-${i}`)
    expect((await run(reserveCalls(s.tenantId, refs, 180))).every((r) => r.ok)).toBe(true)
    const start = await wallet(s.tenantId)
    const items = refs.map((callRef) => ({ callRef, connectedSeconds: 30 }))
    const [x, y] = await Promise.all([run(settleCalls(items)), run(settleCalls([...items].reverse()))])
    expect(y.reverse()).toEqual(x)
    const w = await wallet(s.tenantId)
    expect(w.balance).toBe(start.balance + 20 * (cost - callCostMinor(30, "USD")))
    expect(w.balance).toBe(w.sum)
  })
})
