// bench/ramp: does a process's event loop stall while a big run ramps up and its calls end?
// One run of BENCH_RAMP_CALLS simulated calls at real time (SIM_TIME_SCALE 1: every ring, line and
// pause as a callee's), dialed as fast as the workspace's limits allow, measured from `POST /run`
// until the last call has ended (the ramp, the conversations and the settlement wave at their end):
// the measured process's event-loop delay (a 1 ms histogram over the whole stretch) and `GET /healthz`
// from the bench every 20 ms. The baseline is the same process idle, just before the run, measured the
// same way. In `--role all` (real PostgreSQL + NATS, and the embedded defaults), and in
// `--role runtime` beside an api process (real services only). BENCH_RAMP_PROFILE=DIR writes a CPU
// profile of the stretch (bench/servers/dialer-host.ts); the figures of such a run are off.
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { redact } from "../src/platform/Db.js"
import { ask, bigRunEnv, type Host, setUpRun, startHost } from "./dialer.js"
import {
  healthProbe,
  type Latencies,
  machine,
  record,
  type ScratchDatabase,
  type ServerProcess,
  scratchDatabase,
  startProcess,
} from "./lib.js"
import type { EldStats, HostSample } from "./servers/dialer-host.js"

const CALLS = Number(process.env.BENCH_RAMP_CALLS ?? 10_000)
const IDLE_S = 5
/** Give up on the calls ending after this long. */
const LIMIT_S = Number(process.env.BENCH_RAMP_LIMIT_S ?? 240)
const PROBE_EVERY_MS = 20
const GOAL = { eldP99: 20, eldMax: 100, healthzP99: 50 }
const DIGITS = [3, 4, 5, 6, 7, 8, 9]

const f1 = (x: number) => x.toFixed(1)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

interface Measured {
  readonly role: "all" | "runtime"
  readonly idleEld: EldStats
  readonly idleHealthz: Latencies
  readonly eld: EldStats
  readonly healthz: Latencies
  readonly seconds: number
  readonly peakLive: number
  readonly dialed: number
  readonly ended: boolean
  /** The worst 250 ms samples of the stretch: when (s after POST /run), its max delay and live calls. */
  readonly worst: HostSample[]
  readonly errors: number
}

async function measure(role: "all" | "runtime", env: Record<string, string>): Promise<Measured> {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-bench-ramp-"))
  const e = { ...env, DATA_DIR: dataDir, BENCH_HOST_ROLE: role }
  let host: Host | undefined
  let api: ServerProcess | undefined
  try {
    host = startHost(["parley"], e)
    const ready = await host.next<{ port?: number }>("ready")
    let port = ready.port
    if (role === "runtime") {
      // At info: startProcess waits for its "parley started" line.
      api = await startProcess(["--import", "tsx", "src/main/main.ts", "serve", "--role", "api"], {
        ...e,
        LOG_LEVEL: "info",
      })
      port = api.port
    }
    const base = `http://127.0.0.1:${port}`
    const samples: HostSample[] = []
    host.child.on("message", (m) => {
      if ((m as { type: string }).type === "sample") samples.push(m as HostSample)
    })
    const phones = Array.from({ length: CALLS }, (_, i) => `+1415${2_000_000 + i * 10 + DIGITS[i % DIGITS.length]!}`)
    const h = host
    let idleEld: EldStats | undefined
    let idleHealthz: Latencies | undefined
    let probe: ReturnType<typeof healthProbe> | undefined
    let t0 = 0
    /** The host's sample clock at POST /run (its samples begin with the idle baseline). */
    let tRun = 0
    const { runId } = await setUpRun(base, join(dataDir, "outbox.jsonl"), phones, async () => {
      // The baseline: the same process, set up and idle, measured the same way.
      await ask(h, "window-start")
      const idle = healthProbe(base, PROBE_EVERY_MS)
      await sleep(IDLE_S * 1000)
      idleHealthz = await idle.stop()
      idleEld = (await ask<{ eld: EldStats }>(h, "window-end")).eld
      await ask(h, "window-start")
      // Profiled apart from what follows (BENCH_RAMP_PROFILE): POST /run itself.
      if (process.env.BENCH_RAMP_PROFILE) await ask(h, "profile", { name: "run" })
      probe = healthProbe(base, PROBE_EVERY_MS)
      t0 = performance.now()
      tRun = samples.at(-1)?.t ?? 0
    })
    await ask(host, "watch", { runId })
    let ended = false
    let lastPrint = 0
    for (;;) {
      await sleep(250)
      const s = samples.at(-1)
      const now = (performance.now() - t0) / 1000
      if (s !== undefined && now - lastPrint >= 10) {
        lastPrint = now
        process.stdout.write(`  ${role} t=${f1(now)} s dialed ${s.dialed} live ${s.live} eld max ${f1(s.eldMax)} ms\n`)
      }
      if (s !== undefined && s.dialed >= CALLS && s.live === 0) {
        ended = true
        break
      }
      if (now > LIMIT_S) break
    }
    const seconds = (performance.now() - t0) / 1000
    const healthz = await probe!.stop()
    const { eld } = await ask<{ eld: EldStats }>(host, "window-end")
    const worst = [...samples].sort((a, b) => b.eldMax - a.eldMax).slice(0, 5)
    const t = tRun
    return {
      role,
      idleEld: idleEld!,
      idleHealthz: idleHealthz!,
      eld,
      healthz,
      seconds,
      peakLive: Math.max(0, ...samples.map((x) => x.live)),
      dialed: Math.max(0, ...samples.map((x) => x.dialed)),
      ended,
      worst: worst.map((x) => ({ ...x, t: x.t - t })),
      errors: host.errors.filter((l) => /"level":(50|60)/.test(l)).length,
    }
  } finally {
    host?.child.kill("SIGKILL")
    api?.child.kill("SIGKILL")
    rmSync(dataDir, { recursive: true, force: true })
  }
}

export async function benchRamp(): Promise<void> {
  const baseUrl = process.env.DATABASE_URL
  const natsUrl = process.env.NATS_URL
  const loadBefore = loadavg()[0]!
  const env: Record<string, string> = {
    ...bigRunEnv(CALLS),
    SIM_TIME_SCALE: "1",
    // Nobody decides: a callee who asked for something holds the product's 20 s, then the call goes on.
    APPROVAL_HOLD_MS: "20000",
    ...(process.env.BENCH_RAMP_PROFILE && { BENCH_DIALER_PROFILE: process.env.BENCH_RAMP_PROFILE }),
  }
  const runs: Array<Measured & { setting: string }> = []
  const only = process.env.BENCH_RAMP_ONLY // "real-all", "real-runtime" or "embedded"
  const want = (k: string) => only === undefined || only === k
  if (baseUrl && natsUrl) {
    for (const role of ["all", "runtime"] as const) {
      if (!want(`real-${role}`)) continue
      const db: ScratchDatabase = await scratchDatabase(baseUrl, "parley_bench_ramp")
      try {
        const bus = `bench${randomBytes(4).toString("hex")}`
        const m = await measure(role, { ...env, DATABASE_URL: db.url, NATS_URL: natsUrl, BUS_NAMESPACE: bus })
        runs.push({ ...m, setting: `PostgreSQL ${db.pgVersion} + NATS` })
      } finally {
        await db.drop()
      }
    }
  }
  if (want("embedded")) runs.push({ ...(await measure("all", env)), setting: "embedded defaults" })

  const ok = (m: Measured) => ({
    eldP99: m.eld.p99 < GOAL.eldP99,
    eldMax: m.eld.max < GOAL.eldMax,
    healthz: m.role === "runtime" || m.healthz.p99 < GOAL.healthzP99,
  })
  const rows = runs.map((m) => {
    const g = ok(m)
    const mark = (v: boolean, s: string) => (v ? s : `**${s}**`)
    return (
      `| ${m.setting}, \`--role ${m.role}\` | ${m.dialed} dialed, ${m.peakLive} live at most, ` +
      `${m.ended ? `all ended after ${f1(m.seconds)} s` : `**not all ended in ${f1(m.seconds)} s**`} | ` +
      `${f1(m.idleEld.p99)} / ${f1(m.idleEld.max)} | ${mark(g.eldP99, f1(m.eld.p99))} / ` +
      `${mark(g.eldMax, f1(m.eld.max))} | ${f1(m.eld.p99 / Math.max(m.idleEld.p99, 0.001))}× | ` +
      `${f1(m.idleHealthz.p99)} | ${m.role === "runtime" ? "(api process) " : ""}${f1(m.healthz.p50)} / ` +
      `${mark(g.healthz, f1(m.healthz.p99))} / ${f1(m.healthz.max)} (${m.healthz.n}, ${m.healthz.failed} failed) | ` +
      `${m.errors} |`
    )
  })
  const worst = runs.map(
    (m) =>
      `- ${m.setting}, \`--role ${m.role}\`: ` +
      m.worst.map((w) => `${f1(w.t / 1000)} s: ${f1(w.eldMax)} ms (${w.live} live, ${w.dialed} dialed)`).join("; "),
  )
  const met = runs.every((m) => Object.values(ok(m)).every(Boolean))
  const md = [
    `## ramp — the event loop and \`/healthz\` while a run of ${CALLS} calls ramps up and ends, ` +
      "vs the same process idle",
    "",
    `Machine: ${machine()}. Run ${new Date().toISOString().slice(0, 10)}; 1-minute load average ` +
      `${loadBefore.toFixed(1)} before, ${loadavg()[0]!.toFixed(1)} after. The measured process is bench/servers/` +
      `dialer-host.ts (the real \`serve()\`); the bench sets the run up over HTTP as a customer would, with the ` +
      `workspace's own limits at 2000 calls/s and ${2 * CALLS} in flight. SIM_TIME_SCALE 1: calls of real ` +
      `length (~25–60 s; a callee who asks for something holds 20 s for a decision nobody sends). Measured ` +
      `from \`POST /run\` until the last call ended (ramp, conversations, settlement wave): event-loop delay ` +
      `(1 ms resolution, the whole stretch) and \`GET /healthz\` from the bench, one after another with ` +
      `${PROBE_EVERY_MS} ms between. Baseline: the same process idle for ${IDLE_S} s just before \`POST /run\`` +
      (baseUrl ? ` (database ${redact(baseUrl)})` : "") +
      ".",
    "",
    "| setting | the run | idle eld p99 / max ms | run eld p99 / max ms | eld p99 run / idle | idle `/healthz` " +
      "p99 ms | run `/healthz` p50 / p99 / max ms (n, failed) | errors logged |",
    "|---|---|---:|---:|---:|---:|---:|---:|",
    ...rows,
    "",
    `Goals: event-loop p99 < ${GOAL.eldP99} ms and max < ${GOAL.eldMax} ms, \`/healthz\` p99 < ` +
      `${GOAL.healthzP99} ms: ${met ? "met" : "**not met**"}. The worst 250 ms stretches (after \`POST /run\`):`,
    "",
    ...worst,
  ].join("\n")
  process.stdout.write(`\n${md}\n`)
  if (only === undefined) record("ramp", md)
}
