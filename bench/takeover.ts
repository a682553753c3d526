// bench/takeover: a runtime process dies holding thousands of live calls; another takes the run over.
// Two real `--role all` processes (bench/servers/dialer-host.ts) share a scratch PostgreSQL database
// and NATS. The first ramps a run of BENCH_TAKEOVER_CALLS long simulated calls until all are up and
// is killed with SIGKILL; the second, already running, claims the run once the lease runs out and
// finalises every orphaned call. Measured: the time from the claim to the last call ended, against
// the baseline of the same run's ramp (the time the first process took to start those calls), and
// checked: every target dialed once, every call settled once, the wallet equal to its ledger.
// Needs DATABASE_URL and NATS_URL: two processes cannot share the embedded defaults.
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { redact } from "../src/platform/Db.js"
import { bigRunEnv, type Host, setUpRun, startHost } from "./dialer.js"
import { machine, record, scratchDatabase } from "./lib.js"
import type { HostSample } from "./servers/dialer-host.js"

const CALLS = Number(process.env.BENCH_TAKEOVER_CALLS ?? 5_000)
/** Long calls (every time ×4): none ends between the ramp and the takeover. */
const SCALE = 4
const LEASE_MS = 3_000
const TARGET_S = 10
const DIGITS = [3, 4, 5, 6, 7, 8, 9]

const f1 = (x: number) => x.toFixed(1)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

export async function benchTakeover(): Promise<void> {
  const baseUrl = process.env.DATABASE_URL
  const natsUrl = process.env.NATS_URL
  if (!baseUrl || !natsUrl) {
    process.stdout.write("takeover: skipped (needs DATABASE_URL and NATS_URL: two processes share them)\n")
    return
  }
  const loadBefore = loadavg()[0]!
  const db = await scratchDatabase(baseUrl, "parley_bench_takeover", 2)
  const dataDir = mkdtempSync(join(tmpdir(), "parley-bench-takeover-"))
  const env: Record<string, string> = {
    ...bigRunEnv(CALLS),
    DATA_DIR: dataDir,
    DATABASE_URL: db.url,
    NATS_URL: natsUrl,
    BUS_NAMESPACE: `bench${randomBytes(4).toString("hex")}`,
    SIM_TIME_SCALE: String(SCALE),
    RUN_LEASE_MS: String(LEASE_MS),
    APPROVAL_HOLD_MS: "600000",
  }
  const hosts: Host[] = []
  try {
    const first = startHost(["parley"], env)
    hosts.push(first)
    const a = await first.next<{ port: number; instance: string }>("ready")
    const samples: HostSample[] = []
    first.child.on("message", (m) => {
      if ((m as { type: string }).type === "sample") samples.push(m as HostSample)
    })
    const phones = Array.from({ length: CALLS }, (_, i) => `+1415${2_000_000 + i * 10 + DIGITS[i % DIGITS.length]!}`)
    let t0 = 0
    const { runId } = await setUpRun(`http://127.0.0.1:${a.port}`, join(dataDir, "outbox.jsonl"), phones, async () => {
      t0 = performance.now()
    })
    first.child.send({ id: 0, cmd: "watch", runId })

    // The ramp on the first process, until every call is live.
    for (;;) {
      await sleep(100)
      const s = samples.at(-1)
      if (s !== undefined && s.live >= CALLS) break
      if (performance.now() - t0 > 180_000) throw new Error(`the ramp stalled at ${s?.live ?? 0} live calls`)
    }
    const rampS = (performance.now() - t0) / 1000
    process.stdout.write(`run ${runId}: ${CALLS} calls live on the first process after ${f1(rampS)} s\n`)

    // The survivor is up (claiming nothing: the run is leased) before the owner dies.
    const second = startHost(["parley"], env)
    hosts.push(second)
    const b = await second.next<{ port: number; instance: string }>("ready")
    await sleep(1_000)

    const [{ live }] = await db.sql<[{ live: number }]>`
      select count(*)::int as live from calls where run_id = ${runId} and status <> 'ended'`
    first.child.kill("SIGKILL")
    const tKill = performance.now()
    let tClaim = 0
    let tDone = 0
    for (;;) {
      await sleep(50)
      const [r] = await db.sql<[{ owner: string | null; open: number; status: string }]>`
        select r.owner_instance as owner, r.status,
          (select count(*)::int from calls c where c.run_id = r.id and c.status <> 'ended') as open
        from runs r where r.id = ${runId}`
      if (tClaim === 0 && (r.owner === b.instance || r.open < live)) tClaim = performance.now()
      if (r.open === 0) {
        tDone = performance.now()
        break
      }
      if (performance.now() - tKill > 120_000) throw new Error(`${r.open} calls still open 120 s after the kill`)
    }
    const leaseS = (tClaim - tKill) / 1000
    const takeoverS = (tDone - tClaim) / 1000

    // Every target dialed once; every orphan finalised by the survivor and settled once.
    const [check] = await db.sql<
      [{ targets: number; dialed_twice: number; lost: number; reserved: number; double_settled: number }]
    >`
      select
        (select count(*)::int from run_targets where run_id = ${runId}) as targets,
        (select count(*)::int from (select run_target_id from calls where run_id = ${runId}
          group by run_target_id having count(*) > 1) x) as dialed_twice,
        (select count(*)::int from dial_decisions where run_id = ${runId} and reason = 'owner_lost') as lost,
        (select count(*)::int from usage_reservations u join calls c on u.call_ref = 'call:' || c.id
          where c.run_id = ${runId} and u.status = 'reserved') as reserved,
        (select count(*)::int from (select l.reference from ledger_entries l
          join calls c on l.reference = 'call:' || c.id
          where c.run_id = ${runId} and l.kind = 'call_reservation' group by l.reference having count(*) > 1) y)
          as double_settled`
    const [wallet] = await db.sql<[{ balance: string; sum: string }]>`
      select w.balance_minor::text as balance,
        (select sum(amount_minor) from ledger_entries l where l.tenant_id = w.tenant_id)::text as sum
      from wallets w join runs r on r.tenant_id = w.tenant_id where r.id = ${runId}`
    const exact =
      check.targets === CALLS &&
      check.dialed_twice === 0 &&
      check.lost === live &&
      check.reserved === 0 &&
      check.double_settled === 0 &&
      wallet.balance === wallet.sum
    const errors = second.errors.filter((l) => /"level":(50|60)/.test(l))
    process.stdout.write(
      `takeover: lease ran out ${f1(leaseS)} s after the kill; ${live} orphans finalised in ${f1(takeoverS)} s; ` +
        `${exact ? "exact" : `NOT exact: ${JSON.stringify({ ...check, live, ...wallet })}`}\n`,
    )
    const met = takeoverS < TARGET_S && exact
    record(
      "takeover",
      [
        `## takeover — a runtime process dies holding ${live} live calls; another finalises them`,
        "",
        `Machine: ${machine()}; PostgreSQL ${db.pgVersion} and NATS on the same machine (${redact(baseUrl)}). ` +
          `Run ${new Date().toISOString().slice(0, 10)}; 1-minute load average ${loadBefore.toFixed(1)} before. ` +
          `Two real \`--role all\` processes (bench/servers/dialer-host.ts) on one scratch database: the first ` +
          `ramps a run of ${CALLS} simulated calls at SIM_TIME_SCALE ${SCALE} (none ends before the kill) and ` +
          `is killed with SIGKILL once all are live; the second is already up and claims the run when its ` +
          `lease (RUN_LEASE_MS ${LEASE_MS}) runs out. The baseline is the same run's ramp: the time the first ` +
          `process took to start the calls the second then finalises.`,
        "",
        "| stretch | seconds | calls/s |",
        "|---|---:|---:|",
        `| ramp on the first process (baseline): \`POST /run\` → ${CALLS} live | ${f1(rampS)} | ` +
          `${Math.round(CALLS / rampS)} |`,
        `| kill → the survivor claims the run (the lease) | ${f1(leaseS)} | — |`,
        `| **claim → every orphan ended, settled and its target moved on** | **${f1(takeoverS)}** | ` +
          `${Math.round(live / takeoverS)} |`,
        "",
        `**Takeover / ramp: ${(takeoverS / rampS).toFixed(2)}×.** Target: ${CALLS} live calls taken over in under ` +
          `${TARGET_S} s, ${met ? "met" : "**not met**"}. Checked after: ${check.targets} targets, ` +
          `${check.dialed_twice} dialed twice, ${check.lost} \`owner_lost\` decisions for ${live} orphans, ` +
          `${check.reserved} reservations left open, ${check.double_settled} calls reserved twice, wallet ` +
          `${wallet.balance === wallet.sum ? "equal to" : "**not equal to**"} its ledger; errors logged by the ` +
          `survivor: ${errors.length}.`,
      ].join("\n"),
    )
  } finally {
    for (const h of hosts) h.child.kill("SIGKILL")
    await db.drop()
    rmSync(dataDir, { recursive: true, force: true })
  }
}
