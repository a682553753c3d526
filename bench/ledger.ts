// bench/ledger: debits/s and latency of postEntry (wallet row lock, idempotency lookup, balance
// update, ledger insert) by N writers on one hot wallet, against a bare balance update; real Postgres.
import { randomBytes } from "node:crypto"
import { loadavg } from "node:os"
import { postEntry } from "../src/billing/ledger.repo.js"
import { openWallet } from "../src/billing/wallet.repo.js"
import { redact, type Sql } from "../src/platform/Db.js"
import { migrate } from "../src/platform/Migrator.js"
import { machine, record, scratchDatabase } from "./lib.js"

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2)
const WRITERS = Number(process.env.BENCH_WRITERS ?? 32)
const WARMUP_SECONDS = 1
/** Each wallet starts here: far more than any run can spend at one minor unit a debit. */
const START_MINOR = 1_000_000_000_000

type Variant = "bare" | "tx" | "ledger"
const LABEL: Record<Variant, string> = {
  bare: "bare `update wallets set balance_minor = balance_minor - 1` (autocommit, no ledger row)",
  tx: "the same update inside `sql.begin` (BEGIN/COMMIT round trips, still no ledger row)",
  ledger: "`postEntry` debit of 1 in `sql.begin` (lock, key lookup, update, insert)",
}

interface Phase {
  readonly ops: number
  readonly seconds: number
  readonly latencies: number[]
}

const quantile = (sorted: readonly number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN

/** WRITERS loops calling `op` until `seconds` have passed; latency of every call, in ms. */
async function drive(seconds: number, op: (writer: number, i: number) => Promise<void>): Promise<Phase> {
  const latencies: number[] = []
  const t0 = performance.now()
  const deadline = t0 + seconds * 1000
  await Promise.all(
    Array.from({ length: WRITERS }, async (_, w) => {
      for (let i = 0; performance.now() < deadline; i++) {
        const s = performance.now()
        await op(w, i)
        latencies.push(performance.now() - s)
      }
    }),
  )
  return { ops: latencies.length, seconds: (performance.now() - t0) / 1000, latencies }
}

async function newWallet(sql: Sql, name: string): Promise<number> {
  return (await sql.begin(async (tx) => {
    const [t] = await tx<
      [{ id: number }]
    >`insert into tenants (name, country, currency) values (${name}, 'US', 'USD') returning id`
    await openWallet(tx, t.id, "USD")
    const credit = await postEntry(tx, {
      tenantId: t.id,
      amountMinor: START_MINOR,
      kind: "bench_credit",
      idempotencyKey: `bench:${t.id}:start`,
    })
    if (!credit.ok) throw new Error("could not credit the bench wallet")
    return t.id
  })) as number
}

async function walletState(sql: Sql, tenantId: number): Promise<{ balance: number; sum: number; entries: number }> {
  const [row] = await sql<[{ balance: number; sum: number; entries: number }]>`
    select w.balance_minor as balance,
      (select coalesce(sum(e.amount_minor), 0) from ledger_entries e where e.tenant_id = w.tenant_id)::bigint as sum,
      (select count(*) from ledger_entries e where e.tenant_id = w.tenant_id)::bigint as entries
    from wallets w where w.tenant_id = ${tenantId}`
  return row
}

export async function benchLedger(): Promise<void> {
  const base = process.env.DATABASE_URL
  if (base === undefined || base === "") {
    process.stdout.write(
      "bench ledger needs real PostgreSQL: " +
        "set DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/parley_dev); skipped.\n",
    )
    return
  }
  const loadBefore = loadavg()[0]!
  const scratch = await scratchDatabase(base, "parley_bench", WRITERS)
  const { url, sql } = scratch
  process.stdout.write(
    `scratch database ${redact(url)}; ${WRITERS} writers, ${ROUNDS} rounds of ${SECONDS} s per variant\n`,
  )
  try {
    await migrate(sql)
    const [server] = await sql<
      [{ version: string; sync: string }]
    >`select split_part(version(), ' ', 2) as version, current_setting('synchronous_commit') as sync`
    const hot = await newWallet(sql, "bench hot wallet")
    const cold = await newWallet(sql, "bench baseline wallet")
    const tag = randomBytes(4).toString("hex")
    let ledgerDebits = 0
    let baselineDebits = 0

    const ops: Record<Variant, (round: string) => (w: number, i: number) => Promise<void>> = {
      bare: () => async () => {
        await sql`update wallets set balance_minor = balance_minor - 1 where tenant_id = ${cold}`
        baselineDebits++
      },
      tx: () => async () => {
        await sql.begin((tx) => tx`update wallets set balance_minor = balance_minor - 1 where tenant_id = ${cold}`)
        baselineDebits++
      },
      ledger: (round) => async (w, i) => {
        const r = await sql.begin((tx) =>
          postEntry(tx, {
            tenantId: hot,
            amountMinor: -1,
            kind: "bench_debit",
            idempotencyKey: `${tag}:${round}:${w}:${i}`,
          }),
        )
        if (!r.ok || r.replayed) throw new Error(`debit ${round}:${w}:${i} was not posted: ${JSON.stringify(r)}`)
        ledgerDebits++
      },
    }

    const variants: Variant[] = ["bare", "tx", "ledger"]
    for (const v of variants) await drive(WARMUP_SECONDS, ops[v](`warm-${v}`))
    const phases: Record<Variant, Phase[]> = { bare: [], tx: [], ledger: [] }
    for (let round = 0; round < ROUNDS; round++) {
      for (const v of round % 2 === 0 ? variants : [...variants].reverse()) {
        const p = await drive(SECONDS, ops[v](`r${round}`))
        phases[v].push(p)
        const sorted = [...p.latencies].sort((a, b) => a - b)
        process.stdout.write(
          `round ${round + 1} ${v}: ${Math.round(p.ops / p.seconds)} debits/s, p50 ` +
            `${quantile(sorted, 0.5).toFixed(2)} ms, p99 ${quantile(sorted, 0.99).toFixed(2)} ms\n`,
        )
      }
    }

    // Every debit landed exactly once: balance = start + sum of the debit entries, one entry each.
    const h = await walletState(sql, hot)
    if (h.balance !== h.sum || h.balance !== START_MINOR - ledgerDebits || h.entries !== 1 + ledgerDebits)
      throw new Error(`hot wallet inconsistent: ${JSON.stringify(h)} after ${ledgerDebits} debits from ${START_MINOR}`)
    const c = await walletState(sql, cold)
    if (c.balance !== START_MINOR - baselineDebits)
      throw new Error(`baseline wallet lost updates: ${JSON.stringify(c)} after ${baselineDebits} debits`)

    const summary = (ps: Phase[]) => {
      const sorted = ps.flatMap((p) => p.latencies).sort((a, b) => a - b)
      const ops = ps.reduce((a, p) => a + p.ops, 0)
      return {
        ops,
        rate: ops / ps.reduce((a, p) => a + p.seconds, 0),
        p50: quantile(sorted, 0.5),
        p99: quantile(sorted, 0.99),
      }
    }
    const s = { bare: summary(phases.bare), tx: summary(phases.tx), ledger: summary(phases.ledger) }
    const row = (v: Variant) =>
      `| ${LABEL[v]} | ${Math.round(s[v].rate)} | ${s[v].p50.toFixed(2)} | ${s[v].p99.toFixed(2)} | ${s[v].ops} |`
    const md =
      `## ledger — postEntry debits on one hot wallet vs a bare balance update\n\n` +
      `Machine: ${machine()}; PostgreSQL ${server.version} on the same machine over TCP loopback ` +
      `(synchronous_commit=${server.sync}). Run ${new Date().toISOString().slice(0, 10)}; scratch database, ` +
      `${WRITERS} writers on a pool of ${WRITERS} connections, each looping one debit of 1 minor unit after ` +
      `the last, all on one wallet; ${ROUNDS} rounds of ${SECONDS} s per variant in alternating order after a ` +
      `${WARMUP_SECONDS} s warm-up. Throughput over all rounds, latency percentiles over every debit. 1-minute ` +
      `load average ${loadBefore.toFixed(1)} before and ${loadavg()[0]!.toFixed(1)} after (the machine is ` +
      `shared).\n\n` +
      `| variant | debits/s | p50 ms | p99 ms | debits |\n` +
      `|---|---:|---:|---:|---:|\n` +
      `${row("bare")}\n` +
      `${row("tx")}\n` +
      `${row("ledger")}\n\n` +
      `**Ledger / bare update: ${((s.ledger.rate / s.bare.rate) * 100).toFixed(0)}% of the throughput** ` +
      `(${(s.ledger.rate / s.bare.rate).toFixed(2)}×; ${(s.ledger.rate / s.tx.rate).toFixed(2)}× the update in ` +
      `a transaction).\n` +
      `Verified after the run: the hot wallet's balance equals the start plus the sum of its ${ledgerDebits} ` +
      `debit entries (one entry per debit), and the baseline wallet lost no update.\n` +
      `One wallet serialises every writer on its row lock, so this is the ceiling for a single tenant's ` +
      `debits; the lock is held across the transaction's round trips (four statements and COMMIT for a post).`
    process.stdout.write(`\n${md}\n`)
    record("ledger", md)
  } finally {
    await scratch.drop()
  }
}
