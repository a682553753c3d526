// Ledger invariants through postEntry on a real migrated database: generated sequences of credits,
// debits, overdraws, replays and key conflicts checked against a model, tampering, and real races.
import { randomUUID } from "node:crypto"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type LedgerEntry, type PostEntry, type PostResult, postEntry } from "../../src/billing/ledger.repo.js"
import { openWallet } from "../../src/billing/wallet.repo.js"
import { connectPostgres, type Sql } from "../../src/platform/Db.js"
import { realServices, sharedTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
/** The server's own client; on embedded PGlite it is the only connection there can be. */
let sql: Sql
/** Many connections to the same database on real Postgres, so concurrent posts really race. */
let racer: Sql
/** A second tenant, to post earlier keys to (a key is global: that must throw). */
let otherTenant: number

beforeAll(async () => {
  srv = await sharedTestServer()
  sql = srv.sql
  racer = realServices ? connectPostgres(srv.config.databaseUrl!, 20) : sql
  otherTenant = await newTenant()
})
afterAll(async () => {
  if (racer !== undefined && racer !== sql) await racer.end({ timeout: 5 })
  await srv?.stop()
})

async function newTenant(): Promise<number> {
  return (await sql.begin(async (tx) => {
    const [t] = await tx<
      [{ id: number }]
    >`insert into tenants (name, country, currency) values ('ledger property', 'IN', 'INR') returning id`
    await openWallet(tx, t.id, "INR")
    return t.id
  })) as number
}

const post = (p: PostEntry, client: Sql = sql): Promise<PostResult> =>
  client.begin((tx) => postEntry(tx, p)) as Promise<PostResult>

interface Snapshot {
  readonly balance: number
  readonly sum: number
  readonly count: number
}

async function snapshot(tenantId: number): Promise<Snapshot> {
  const [row] = await sql<[Snapshot]>`
    select w.balance_minor as balance,
      (select coalesce(sum(e.amount_minor), 0) from ledger_entries e where e.tenant_id = w.tenant_id)::bigint as sum,
      (select count(*) from ledger_entries e where e.tenant_id = w.tenant_id)::bigint as count
    from wallets w where w.tenant_id = ${tenantId}`
  return row
}

const entriesOf = (tenantId: number): Promise<LedgerEntry[]> =>
  sql<LedgerEntry[]>`select * from ledger_entries where tenant_id = ${tenantId} order by id`

/** (c): each entry's balance_after_minor is the running sum of amounts up to it, in id order. */
function expectRunningSums(entries: readonly LedgerEntry[], start = 0): void {
  let running = start
  for (const e of entries) {
    running += e.amount_minor
    expect(e.balance_after_minor, `entry ${e.id} (${e.idempotency_key})`).toBe(running)
    expect(e.balance_after_minor).toBeGreaterThanOrEqual(0)
  }
}

// ---------------------------------------------------------------------------------------------
// Operations, their generators, and one executor that runs a sequence and records every step.

type Op =
  | { readonly op: "credit"; readonly amount: number }
  /** May be larger than the balance: then it must be refused and change nothing. */
  | { readonly op: "debit"; readonly amount: number }
  /** Debits exactly the balance, to reach zero (skipped at zero: a zero amount is not an entry). */
  | { readonly op: "drain" }
  /** Posts an earlier successful key again, same tenant and amount. */
  | { readonly op: "replay"; readonly pick: number }
  /** Posts an earlier key with a different amount: must throw. */
  | { readonly op: "conflict"; readonly pick: number; readonly delta: number }
  /** Posts an earlier key, same amount, to another tenant: must throw. */
  | { readonly op: "foreign"; readonly pick: number }

const credit = fc.integer({ min: 1, max: 5_000 }).map((amount): Op => ({ op: "credit", amount }))
// Mostly affordable debits, some far larger than any balance a sequence builds up.
const debit = fc
  .oneof(
    { arbitrary: fc.integer({ min: 1, max: 3_000 }), weight: 3 },
    { arbitrary: fc.integer({ min: 3_001, max: 200_000 }), weight: 1 },
  )
  .map((amount): Op => ({ op: "debit", amount }))
const drain = fc.constant<Op>({ op: "drain" })
const replay = fc.nat().map((pick): Op => ({ op: "replay", pick }))
const conflict = fc
  .record({ pick: fc.nat(), delta: fc.integer({ min: -6_000, max: 6_000 }).filter((d) => d !== 0) })
  .map(({ pick, delta }): Op => ({ op: "conflict", pick, delta }))
const foreign = fc.nat().map((pick): Op => ({ op: "foreign", pick }))

type Weights = Partial<Record<Op["op"], number>>
const ops = (w: Weights, maxLength = 30) =>
  fc.array(
    fc.oneof(
      { arbitrary: credit, weight: w.credit ?? 4 },
      { arbitrary: debit, weight: w.debit ?? 4 },
      { arbitrary: drain, weight: w.drain ?? 1 },
      { arbitrary: replay, weight: w.replay ?? 2 },
      { arbitrary: conflict, weight: w.conflict ?? 1 },
      { arbitrary: foreign, weight: w.foreign ?? 1 },
    ),
    { minLength: 1, maxLength, size: "max" },
  )

interface Step {
  readonly op: Op
  /** What was posted; undefined when the op had nothing to act on (a replay before any entry). */
  readonly request: PostEntry | undefined
  /** For replay/conflict/foreign: the entry first posted under the reused key. */
  readonly original: LedgerEntry | undefined
  readonly before: Snapshot
  readonly after: Snapshot
  readonly result: PostResult | undefined
  readonly error: Error | undefined
}

interface Trace {
  readonly tenantId: number
  readonly steps: readonly Step[]
  readonly otherBefore: Snapshot
  readonly otherAfter: Snapshot
}

const NUM_RUNS = 30

async function execute(sequence: readonly Op[], prefix: readonly Op[] = []): Promise<Trace> {
  const tenantId = await newTenant()
  const runKey = randomUUID()
  const otherBefore = await snapshot(otherTenant)
  const posted: LedgerEntry[] = []
  const steps: Step[] = []
  let before = await snapshot(tenantId)
  for (const [i, op] of [...prefix, ...sequence].entries()) {
    const earlier = posted.length > 0 && "pick" in op ? posted[op.pick % posted.length] : undefined
    let request: PostEntry | undefined
    switch (op.op) {
      case "credit":
        request = { tenantId, amountMinor: op.amount, kind: "test_credit", idempotencyKey: `${runKey}:${i}` }
        break
      case "debit":
        request = { tenantId, amountMinor: -op.amount, kind: "test_debit", idempotencyKey: `${runKey}:${i}` }
        break
      case "drain":
        if (before.balance > 0)
          request = { tenantId, amountMinor: -before.balance, kind: "test_debit", idempotencyKey: `${runKey}:${i}` }
        break
      case "replay":
        if (earlier)
          request = {
            tenantId,
            amountMinor: earlier.amount_minor,
            kind: earlier.kind,
            idempotencyKey: earlier.idempotency_key,
          }
        break
      case "conflict": {
        if (!earlier) break
        let amount = earlier.amount_minor + op.delta
        if (amount === 0) amount = -earlier.amount_minor
        request = { tenantId, amountMinor: amount, kind: earlier.kind, idempotencyKey: earlier.idempotency_key }
        break
      }
      case "foreign":
        if (earlier)
          request = {
            tenantId: otherTenant,
            amountMinor: earlier.amount_minor,
            kind: earlier.kind,
            idempotencyKey: earlier.idempotency_key,
          }
        break
    }
    let result: PostResult | undefined
    let error: Error | undefined
    if (request) {
      try {
        result = await post(request)
      } catch (e) {
        // Only reused keys may throw; anything else is a real failure of the test.
        if (op.op !== "conflict" && op.op !== "foreign") throw e
        error = e as Error
      }
      if (result?.ok && !result.replayed) posted.push(result.entry)
    }
    const after = await snapshot(tenantId)
    steps.push({ op, request, original: earlier, before, after, result, error })
    before = after
  }
  return { tenantId, steps, otherBefore, otherAfter: await snapshot(otherTenant) }
}

// ---------------------------------------------------------------------------------------------

describe("ledger properties (generated sequences through postEntry)", () => {
  it("(a) the balance always equals the sum of the tenant's entries", async () => {
    await fc.assert(
      fc.asyncProperty(ops({}), async (sequence) => {
        const { steps } = await execute(sequence)
        let model = 0
        for (const s of steps) {
          if (s.result?.ok && !s.result.replayed) model += s.result.entry.amount_minor
          expect(s.after.balance).toBe(s.after.sum)
          expect(s.after.balance).toBe(model)
        }
      }),
      { numRuns: NUM_RUNS },
    )
  }, 60_000)

  it("(b) the balance never goes below zero, and an overdrawing debit is refused and changes nothing", async () => {
    await fc.assert(
      fc.asyncProperty(ops({ debit: 8, drain: 2, replay: 1, conflict: 0, foreign: 0 }), async (sequence) => {
        const { steps } = await execute(sequence)
        for (const s of steps) {
          expect(s.after.balance).toBeGreaterThanOrEqual(0)
          if (s.request === undefined || s.request.amountMinor > 0 || s.op.op === "replay") continue
          const amount = -s.request.amountMinor
          if (amount > s.before.balance) {
            expect(s.result).toEqual({ ok: false, reason: "insufficient_funds", balanceMinor: s.before.balance })
            expect(s.after).toEqual(s.before)
          } else {
            expect(s.result).toMatchObject({
              ok: true,
              replayed: false,
              entry: { amount_minor: -amount, balance_after_minor: s.before.balance - amount },
            })
            expect(s.after).toEqual({
              balance: s.before.balance - amount,
              sum: s.before.sum - amount,
              count: s.before.count + 1,
            })
          }
        }
      }),
      { numRuns: NUM_RUNS },
    )
  }, 60_000)

  it("(c) each entry's balance_after_minor is the running sum up to it, by id", async () => {
    await fc.assert(
      fc.asyncProperty(ops({}), async (sequence) => {
        const { tenantId, steps } = await execute(sequence)
        const entries = await entriesOf(tenantId)
        expectRunningSums(entries)
        const fresh = steps.flatMap((s) => (s.result?.ok && !s.result.replayed ? [s.result.entry] : []))
        expect(entries).toEqual(fresh)
        expect(entries.at(-1)?.balance_after_minor ?? 0).toBe(steps.at(-1)!.after.balance)
      }),
      { numRuns: NUM_RUNS },
    )
  }, 60_000)

  it("(d) replaying a key returns the first entry and changes nothing; " +
    "a reused key with another amount or tenant throws", async () => {
    await fc.assert(
      fc.asyncProperty(ops({ credit: 3, debit: 3, drain: 1, replay: 4, conflict: 2, foreign: 1 }), async (sequence) => {
        // Start with one credit so there is always a key to reuse.
        const { steps, otherBefore, otherAfter } = await execute(sequence, [{ op: "credit", amount: 1_000 }])
        for (const s of steps) {
          if (s.request === undefined || s.original === undefined) continue
          if (s.op.op === "replay") {
            expect(s.error).toBeUndefined()
            expect(s.result).toEqual({ ok: true, replayed: true, entry: s.original })
          } else {
            expect(s.result).toBeUndefined()
            expect(s.error?.message).toMatch(/was used for a different entry/)
          }
          expect(s.after).toEqual(s.before)
        }
        expect(otherAfter).toEqual(otherBefore)
      }),
      { numRuns: NUM_RUNS },
    )
  }, 60_000)

  type Tamper =
    | { readonly t: "update"; readonly column: keyof typeof SET; readonly pick: number; readonly all: boolean }
    | { readonly t: "delete"; readonly pick: number; readonly all: boolean }
  const SET = {
    amount_minor: "amount_minor = amount_minor + 1",
    balance_after_minor: "balance_after_minor = balance_after_minor + 1000",
    kind: "kind = 'tampered'",
    reference: "reference = 'tampered'",
    idempotency_key: "idempotency_key = idempotency_key || ':tampered'",
    tenant_id: "tenant_id = (select min(id) from tenants)",
    created_at: "created_at = created_at - interval '1 day'",
  } as const
  const tamper: fc.Arbitrary<Tamper> = fc.oneof(
    fc.record({
      t: fc.constant("update" as const),
      column: fc.constantFrom(...(Object.keys(SET) as Array<keyof typeof SET>)),
      pick: fc.nat(),
      all: fc.boolean(),
    }),
    fc.record({ t: fc.constant("delete" as const), pick: fc.nat(), all: fc.boolean() }),
  )

  it("(e) ledger rows can't be updated, deleted or truncated: every attempt is an error", async () => {
    await fc.assert(
      fc.asyncProperty(
        ops({ conflict: 0, foreign: 0 }, 15),
        fc.array(tamper, { minLength: 1, maxLength: 6 }),
        async (sequence, tampers) => {
          const { tenantId } = await execute(sequence, [{ op: "credit", amount: 1_000 }])
          const rows = await entriesOf(tenantId)
          const wallet = await snapshot(tenantId)
          for (const t of tampers) {
            const target = rows[t.pick % rows.length]!.id
            const where = t.all ? "tenant_id = $1" : "id = $1"
            const param = t.all ? tenantId : target
            const attempt =
              t.t === "update"
                ? sql.unsafe(`update ledger_entries set ${SET[t.column]} where ${where}`, [param])
                : sql.unsafe(`delete from ledger_entries where ${where}`, [param])
            await expect(attempt).rejects.toMatchObject({ code: "42501" })
          }
          await expect(sql`truncate ledger_entries`).rejects.toMatchObject({ code: "42501" })
          await expect(
            sql.begin(async (tx) => tx`delete from ledger_entries where tenant_id = ${tenantId}`),
          ).rejects.toMatchObject({ code: "42501" })
          expect(await entriesOf(tenantId)).toEqual(rows)
          expect(await snapshot(tenantId)).toEqual(wallet)
        },
      ),
      { numRuns: NUM_RUNS },
    )
  }, 60_000)
})

// ---------------------------------------------------------------------------------------------

describe("ledger under concurrency", () => {
  interface Timed<A> {
    readonly value: A
    readonly pid: number
    /** Transaction start and end as the database saw them, in µs since the epoch. */
    readonly t0: number
    readonly t1: number
  }

  /** Runs postEntry in its own transaction on the racing client, noting when it ran and where. */
  const timedPost = (p: PostEntry): Promise<Timed<PostResult>> =>
    racer.begin(async (tx) => {
      const [a] = await tx<
        [{ pid: number; t: number }]
      >`select pg_backend_pid()::bigint as pid, (extract(epoch from clock_timestamp()) * 1e6)::bigint as t`
      const value = await postEntry(tx, p)
      const [b] = await tx<[{ t: number }]>`select (extract(epoch from clock_timestamp()) * 1e6)::bigint as t`
      return { value, pid: a.pid, t0: a.t, t1: b.t }
    }) as Promise<Timed<PostResult>>

  /** Waits for every transaction to end (none left running when one fails), then unwraps them. */
  async function settleAll<A>(ps: ReadonlyArray<Promise<A>>): Promise<A[]> {
    const settled = await Promise.allSettled(ps)
    const failed = settled.find((s) => s.status === "rejected")
    if (failed) throw failed.reason
    return settled.map((s) => (s as PromiseFulfilledResult<A>).value)
  }

  /** The most transactions that were open at one instant. */
  function maxOverlap(xs: ReadonlyArray<Timed<unknown>>): number {
    const events = xs
      .flatMap((x) => [[x.t0, 1] as const, [x.t1, -1] as const])
      .sort((p, q) => p[0] - q[0] || p[1] - q[1])
    let open = 0
    let max = 0
    for (const [, d] of events) max = Math.max(max, (open += d))
    return max
  }

  it("40 concurrent debits never overdraw, never lose an update, " +
    "and succeed exactly as a serial order allows", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 5_000, max: 15_000 }),
        fc.array(fc.integer({ min: 1, max: 1_000 }), { minLength: 40, maxLength: 40 }),
        async (start, amounts) => {
          const tenantId = await newTenant()
          const runKey = randomUUID()
          const seed = await post({
            tenantId,
            amountMinor: start,
            kind: "test_credit",
            idempotencyKey: `${runKey}:seed`,
          })
          expect(seed.ok).toBe(true)
          const results = await settleAll(
            amounts.map((amount, i) =>
              timedPost({ tenantId, amountMinor: -amount, kind: "test_debit", idempotencyKey: `${runKey}:${i}` }),
            ),
          )

          const entries = await entriesOf(tenantId)
          const after = await snapshot(tenantId)
          const succeeded = results.flatMap((r, i) => (r.value.ok ? [amounts[i]!] : []))
          const spent = succeeded.reduce((a, b) => a + b, 0)
          expect(after.balance).toBeGreaterThanOrEqual(0)
          expect(after.balance).toBe(start - spent)
          expect(after.balance).toBe(after.sum)
          expect(after.count).toBe(1 + succeeded.length)
          expectRunningSums(entries)
          // Every balance the wallet ever had after a commit, in order.
          const states = new Set(entries.map((e) => e.balance_after_minor))
          for (const [i, r] of results.entries()) {
            if (r.value.ok) {
              expect(r.value.replayed).toBe(false)
              expect(r.value.entry.amount_minor).toBe(-amounts[i]!)
            } else {
              // Refused at a balance the wallet really had, too small for it; balances only fall,
              // so it would still be refused at the end: no serial order lets it through either.
              expect(r.value.reason).toBe("insufficient_funds")
              expect(states.has(r.value.balanceMinor)).toBe(true)
              expect(amounts[i]!).toBeGreaterThan(r.value.balanceMinor)
              expect(amounts[i]!).toBeGreaterThan(after.balance)
            }
          }
          if (realServices) {
            expect(new Set(results.map((r) => r.pid)).size).toBeGreaterThan(1)
            expect(maxOverlap(results)).toBeGreaterThan(1)
          }
        },
      ),
      { numRuns: 4 },
    )
  }, 60_000)

  it("30 concurrent posts with the same idempotency key credit exactly once", async () => {
    const tenantId = await newTenant()
    const key = `${randomUUID()}:same`
    const results = await settleAll(
      Array.from({ length: 30 }, () =>
        timedPost({ tenantId, amountMinor: 700, kind: "test_credit", idempotencyKey: key }),
      ),
    )
    const values = results.map((r) => r.value)
    expect(values.every((v) => v.ok)).toBe(true)
    const entries = values.flatMap((v) => (v.ok ? [v] : []))
    expect(entries.filter((v) => !v.replayed)).toHaveLength(1)
    expect(new Set(entries.map((v) => v.entry.id)).size).toBe(1)
    expect(await snapshot(tenantId)).toEqual({ balance: 700, sum: 700, count: 1 })
    if (realServices) expect(maxOverlap(results)).toBeGreaterThan(1)
  }, 30_000)
})

describe("ledger range", () => {
  it("refuses a post that would take the balance past exact integers, changing nothing", async () => {
    const tenantId = await newTenant()
    expect(
      await post({ tenantId, amountMinor: Number.MAX_SAFE_INTEGER, kind: "test", idempotencyKey: `max:${tenantId}` }),
    ).toMatchObject({ ok: true })
    await expect(post({ tenantId, amountMinor: 2, kind: "test", idempotencyKey: `over:${tenantId}` })).rejects.toThrow(
      RangeError,
    )
    expect(await snapshot(tenantId)).toEqual({
      balance: Number.MAX_SAFE_INTEGER,
      sum: Number.MAX_SAFE_INTEGER,
      count: 1,
    })
  })
})
