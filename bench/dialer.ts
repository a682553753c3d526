// bench/dialer: one runtime process (the real `--role all` process, in a child with --expose-gc)
// driving a 10,000-target run of long simulated calls: calls started/s, peak live calls and actors,
// heap per live call, event-loop delay; against the same number of bare XState actors (no I/O).
import { type ChildProcess, fork } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { connectPostgres, redact, withDatabase } from "../src/platform/Db.js"
import { PROJECT_ROOT } from "../src/platform/paths.js"
import { cpuMicros, healthProbe, type Latencies, machine, record, verifyEmail } from "./lib.js"
import type { BareResult, EldStats, Heap, HostSample } from "./servers/dialer-host.js"

const CALLS = Number(process.env.BENCH_DIALER_CALLS ?? 10_000)
/**
 * SIM_TIME_SCALE of the run. Every call must outlast the ramp for all of them to be up at once:
 * the shortest conversations last ~25 s at scale 1, and 10,000 calls take 60–120 s to start here.
 */
const SCALE = Number(process.env.BENCH_DIALER_SCALE ?? 4)
/** Seconds of steady state at the peak over which the event-loop delay is measured. */
const WINDOW_S = Number(process.env.BENCH_DIALER_WINDOW_S ?? 10)
/** Give up waiting for the ramp after this long. */
const RAMP_LIMIT_S = Number(process.env.BENCH_DIALER_RAMP_LIMIT_S ?? 150)
const CPS = Number(process.env.BENCH_DIALER_CPS ?? 2000)
/** Callees who answer and talk (DESIGN.md: 3–5 agree, 6 declines, 7–9 ask for something and wait for a human). */
const DIGITS = [3, 4, 5, 6, 7, 8, 9]
const TARGET_HEAP_PER_CALL = 25 * 1024
const TARGET_RSS_PER_CALL = 25 * 1024
const TARGET_ELD_P99_MS = 50
const TARGET_CALLS_PER_S = 500
/** The deployment's system key: the bench sets its workspace's dial limits through the admin endpoint. */
export const SYSTEM_KEY = `bench-system-key-${randomBytes(8).toString("hex")}`

/**
 * The settings a bench of one big run shares (dialer, ramp, takeover): the stub gateway, no calling
 * window, pacing and concurrency ceilings well above the run, the system key that sets the
 * workspace's own limits, and room for a 10,000-row audience in one request.
 */
export function bigRunEnv(calls: number): Record<string, string> {
  return {
    HOST: "127.0.0.1",
    PORT: "0",
    LOG_LEVEL: "warn",
    // The stub funds the bench workspace: a DATABASE_URL deployment runs real gateways unless told.
    PAYMENTS: "stub",
    CALLING_HOURS: "any",
    DIALER_CPS_PER_CARRIER: String(CPS),
    DIALER_CPS_PER_TENANT: String(CPS),
    DIALER_MAX_CONCURRENT_PER_WORKFLOW: String(2 * calls),
    DIALER_MAX_CONCURRENT_PER_TENANT: String(2 * calls),
    RUN_CLAIM_INTERVAL_MS: "200",
    DB_POOL_MAX: process.env.BENCH_DIALER_POOL ?? "20",
    SHUTDOWN_TIMEOUT_MS: "1000",
    BODY_LIMIT_BYTES: String(4 * 1024 * 1024),
    SYSTEM_KEY,
  }
}

const kb = (b: number) => `${(b / 1024).toFixed(1)} KB`
const mib = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`
const f1 = (x: number) => x.toFixed(1)

/** A child running bench/servers/dialer-host.ts, with request/reply over IPC. */
export interface Host {
  readonly child: ChildProcess
  /** The next message of this type (ready, bare). */
  next<T>(type: string): Promise<T>
  /** Log lines the process wrote (LOG_LEVEL=warn: warnings and errors). */
  readonly errors: string[]
  /** Its stderr (uncaught exceptions), last lines. */
  readonly stderr: string[]
}

export function startHost(args: string[], env: Record<string, string>): Host {
  const child = fork(join(PROJECT_ROOT, "bench", "servers", "dialer-host.ts"), args, {
    cwd: PROJECT_ROOT,
    execArgv: [
      "--expose-gc",
      "--import",
      "tsx",
      ...(process.env.BENCH_DIALER_NODE_FLAGS?.split(" ").filter((f) => f !== "") ?? []),
    ],
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe", "ipc"],
  })
  const kill = () => child.kill("SIGKILL")
  process.once("exit", kill)
  child.once("exit", () => process.off("exit", kill))
  const errors: string[] = []
  // Log lines at warn and above (LOG_LEVEL=warn): kept for the report, never left to block the pipe.
  createInterface({ input: child.stdout! }).on("line", (line) => {
    if (!line.startsWith("{"))
      process.stderr.write(`host: ${line}\n`) // V8 tracing flags (BENCH_DIALER_NODE_FLAGS)
    else if (errors.length < 1000) errors.push(line)
  })
  const stderr: string[] = []
  createInterface({ input: child.stderr! }).on("line", (line) => {
    process.stderr.write(`host: ${line}\n`)
    stderr.push(line)
    if (stderr.length > 50) stderr.shift()
  })
  const byType = new Map<string, Array<(m: unknown) => void>>()
  child.on("message", (raw) => {
    const m = raw as { type: string }
    byType.get(m.type)?.shift()?.(m)
  })
  const exited = new Promise<never>((_, reject) =>
    child.once("exit", (code, signal) => reject(new Error(`dialer host exited (${code ?? signal})`))),
  )
  exited.catch(() => {})
  return {
    child,
    errors,
    stderr,
    next: <T>(type: string) => {
      const p = new Promise<T>((resolve) =>
        byType.set(type, [...(byType.get(type) ?? []), resolve as (m: unknown) => void]),
      )
      return Promise.race([p, exited])
    },
  }
}

let lastRequestId = 0

/** Sends a request to the host and resolves with its reply. */
export function ask<T>(host: Host, cmd: string, extra: Record<string, unknown> = {}): Promise<T> {
  const id = ++lastRequestId
  return new Promise<T>((resolve, reject) => {
    const onMessage = (raw: unknown) => {
      const m = raw as { type: string; id?: number }
      if (m.type !== "reply" || m.id !== id) return
      host.child.off("message", onMessage)
      host.child.off("exit", onExit)
      resolve(m as T)
    }
    const onExit = (code: number | null) => reject(new Error(`dialer host exited (${code}) before answering ${cmd}`))
    host.child.on("message", onMessage)
    host.child.once("exit", onExit)
    host.child.send({ id, cmd, ...extra })
  })
}

/** The HTTP calls a customer makes, from signup to a running run. */
export async function setUpRun(
  base: string,
  outboxFile: string,
  phones: string[],
  beforeRun: () => Promise<void>,
): Promise<{ runId: number }> {
  const headers = (token?: string, extra: Record<string, string> = {}) => ({
    ...extra,
    ...(token !== undefined && { authorization: `Bearer ${token}` }),
  })
  const call = async (
    method: string,
    path: string,
    body?: unknown,
    token?: string,
  ): Promise<{ status: number; body: Record<string, unknown> }> => {
    const res = await fetch(base + path, {
      method,
      headers: {
        ...(body !== undefined && { "content-type": "application/json" }),
        ...(token !== undefined && { authorization: `Bearer ${token}` }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    })
    const text = await res.text()
    const parsed = text === "" ? {} : (JSON.parse(text) as Record<string, unknown>)
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`)
    return { status: res.status, body: parsed }
  }
  const email = `bench-${randomBytes(4).toString("hex")}@example.com`
  const password = "correct horse battery staple"
  await call("POST", "/auth/signup", { email, password, country: "US", full_name: "Bench Dialer" })
  await verifyEmail(base, outboxFile, email)
  const login = (await call("POST", "/auth/login", { email, password })).body
  const token = login.token as string
  const tenantId = (login.tenant as { id: number }).id
  // The workspace's own dial limits (a free plan allows 100 calls/s and 1,000 in flight): an admin's.
  const limits = await fetch(`${base}/api/internal/dial-limits`, {
    method: "PUT",
    headers: headers(undefined, {
      "content-type": "application/json",
      "x-system-key": SYSTEM_KEY,
      "x-tenant-id": String(tenantId),
    }),
    body: JSON.stringify({
      calls_per_second: CPS,
      max_concurrent_calls: 2 * phones.length,
      max_concurrent_per_workflow: 2 * phones.length,
    }),
  })
  if (limits.status !== 200) throw new Error(`dial limits: ${limits.status} ${await limits.text()}`)
  // A 180-second call reserves $0.30; one intent of $100,000 covers any run here.
  const intent = (await call("POST", "/billing/topup", { amount_minor: 10_000_000 }, token)).body
  await call("POST", "/billing/webhooks/stub", { external_id: intent.external_id, status: "succeeded" })
  const w = (
    await call(
      "POST",
      "/api/workflows",
      { nl_prompt: "Call members whose membership lapsed and offer a discount of up to $20 to rejoin." },
      token,
    )
  ).body
  for (let i = 0; i < phones.length; i += 10_000) {
    const rows = phones.slice(i, i + 10_000).map((phone, j) => ({ phone, name: `Person ${i + j}` }))
    const aud = (await call("POST", `/api/workflows/${w.id}/audience`, { rows }, token)).body
    if (aud.accepted !== rows.length) throw new Error(`audience: ${JSON.stringify(aud)}`)
  }
  await call(
    "PUT",
    `/api/workflows/${w.id}/compliance`,
    { consent_attestation_text: "All numbers opted in on our website." },
    token,
  )
  await beforeRun()
  const run = (await call("POST", `/api/workflows/${w.id}/run`, undefined, token)).body
  if (run.targets_queued !== phones.length) throw new Error(`run: ${JSON.stringify(run)}`)
  return { runId: run.run_id as number }
}

/** CPU seconds used so far by the measured process and by the local Postgres and NATS servers. */
interface Cpu {
  readonly host: number
  readonly postgres: number
  readonly nats: number
}

/** Sums utime + stime of every process named `comm` (all Postgres backends, say); 0 if none is visible. */
function cpuOfCommand(comm: string): number {
  let micros = 0
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue
    try {
      if (readFileSync(`/proc/${pid}/comm`, "utf8").trim() !== comm) continue
      micros += cpuMicros(Number(pid))
    } catch {
      // gone meanwhile
    }
  }
  return micros / 1e6
}

const cpuNow = (pid: number): Cpu => ({
  host: cpuMicros(pid) / 1e6,
  postgres: cpuOfCommand("postgres"),
  nats: cpuOfCommand("nats-server"),
})
/** Cores used between two readings `seconds` apart. */
const cores = (a: Cpu, b: Cpu, seconds: number): Cpu => ({
  host: (b.host - a.host) / seconds,
  postgres: (b.postgres - a.postgres) / seconds,
  nats: (b.nats - a.nats) / seconds,
})

interface ParleyResult {
  readonly samples: HostSample[]
  readonly heapBefore: Heap
  readonly heapPeak: Heap & { live: number; legs: number; approvals: number }
  readonly rampEld: EldStats
  /** GET /healthz from the bench, one after another every 50 ms over the ramp: latency in ms. */
  readonly rampHealthz: Latencies
  readonly peakEld: EldStats
  readonly rampCpu: Cpu
  readonly peakCpu: Cpu
  /** Transcript turns per second during the peak window (agent and callee lines). */
  readonly peakTurnsPerS: number
  /** Samples up to the end of the peak window (what follows is the forced collection and the stop). */
  readonly windowEndT: number
  readonly reachedAll: boolean
  /** Graceful stop (running.stop()) with the calls still up: how long, or how it failed. */
  readonly stop: { ok: true; ms: number } | { ok: false; why: string }
  readonly errors: string[]
  readonly setupS: number
  readonly snapshot: string | null
}

async function measureParley(env: Record<string, string>): Promise<ParleyResult> {
  const host = startHost(["parley"], env)
  try {
    const ready = await host.next<{ port: number }>("ready")
    const pid = host.child.pid!
    const base = `http://127.0.0.1:${ready.port}`
    // Distinct valid US numbers (415-2xx-xxxx) whose last digits cycle through the talking callees.
    const phones = Array.from({ length: CALLS }, (_, i) => `+1415${2_000_000 + i * 10 + DIGITS[i % DIGITS.length]!}`)
    const samples: HostSample[] = []
    host.child.on("message", (m) => {
      if ((m as { type: string }).type === "sample") samples.push(m as HostSample)
    })

    const tSetup = performance.now()
    let heapBefore: Heap | undefined
    let cpuRamp0: Cpu | undefined
    let tRamp0 = 0
    let probe: ReturnType<typeof healthProbe> | undefined
    const { runId } = await setUpRun(base, join(env.DATA_DIR!, "outbox.jsonl"), phones, async () => {
      heapBefore = (await ask<{ heap: Heap }>(host, "heap")).heap
      await ask(host, "snapshot", { name: "before" })
      // The ramp's event-loop window and CPU count open as the run is started.
      await ask(host, "window-start")
      cpuRamp0 = cpuNow(pid)
      tRamp0 = performance.now()
      probe = healthProbe(base, 50)
    })
    const setupS = (performance.now() - tSetup) / 1000
    await ask(host, "watch", { runId })
    process.stdout.write(
      `run ${runId} started: ${CALLS} targets, SIM_TIME_SCALE ${SCALE}; setup took ${f1(setupS)} s\n`,
    )

    // The ramp: until every target has been dialed, or the live count stops growing.
    let lastPrint = 0
    let best = { live: 0, at: 0 }
    let reachedAll = false
    for (;;) {
      await new Promise((r) => setTimeout(r, 250))
      const s = samples.at(-1)
      const now = (performance.now() - tRamp0) / 1000
      if (s === undefined) continue
      if (s.live > best.live * 1.005) best = { live: s.live, at: now }
      if (now - lastPrint >= 5) {
        lastPrint = now
        process.stdout.write(
          `  t=${f1(now)} s dialed ${s.dialed} live ${s.live} legs ${s.legs} approvals ${s.approvals} heap ` +
            `${mib(s.heapUsed)} eld p99 ${f1(s.eldP99)} ms\n`,
        )
      }
      if (s.dialed >= CALLS) {
        reachedAll = true
        break
      }
      if (now - best.at > 10 || now > RAMP_LIMIT_S) break
    }
    const rampHealthz = await probe!.stop()
    const { eld: rampEld } = await ask<{ eld: EldStats }>(host, "window-end")
    const rampCpu = cores(cpuRamp0!, cpuNow(pid), (performance.now() - tRamp0) / 1000)

    // Steady state at the peak: every call up, talking or holding for a decision.
    const { turns: turns0 } = await ask<{ turns: number }>(host, "turns")
    const cpu0 = cpuNow(pid)
    const tw = performance.now()
    await ask(host, "window-start")
    await new Promise((r) => setTimeout(r, WINDOW_S * 1000))
    const { eld: peakEld } = await ask<{ eld: EldStats }>(host, "window-end")
    const windowS = (performance.now() - tw) / 1000
    const peakCpu = cores(cpu0, cpuNow(pid), windowS)
    const { turns: turns1 } = await ask<{ turns: number }>(host, "turns")
    const windowEndT = samples.at(-1)!.t

    // Heap at the peak; live calls from the samples either side of the collection.
    const before = samples.at(-1)!
    const peak = await ask<{ heap: Heap; legs: number }>(host, "heap")
    const n = samples.length
    while (samples.length < n + 2) await new Promise((r) => setTimeout(r, 100))
    const after = samples.at(-1)!
    const { path: snapshot } = await ask<{ path: string | null }>(host, "snapshot", { name: "peak" })

    const stop = await Promise.race([
      ask<{ stopMs: number }>(host, "stop").then((r) => ({ ok: true as const, ms: r.stopMs })),
      new Promise<{ ok: false; why: string }>((resolve) =>
        setTimeout(() => resolve({ ok: false, why: "no answer in 30 s" }), 30_000),
      ),
    ]).catch(async () => {
      await new Promise((r) => setTimeout(r, 200)) // the rest of stderr
      const why = host.stderr.find((l) => /Error/.test(l)) ?? "exited without a reason on stderr"
      return { ok: false as const, why: `the process died: ${why.trim()}` }
    })
    return {
      samples,
      heapBefore: heapBefore!,
      heapPeak: {
        ...peak.heap,
        live: Math.round((before.live + after.live) / 2),
        legs: peak.legs,
        approvals: after.approvals,
      },
      rampEld,
      rampHealthz,
      peakEld,
      rampCpu,
      peakCpu,
      peakTurnsPerS: (turns1 - turns0) / windowS,
      windowEndT,
      reachedAll,
      stop,
      errors: host.errors,
      setupS,
      snapshot,
    }
  } finally {
    host.child.kill("SIGKILL")
  }
}

async function measureBare(): Promise<BareResult> {
  const host = startHost(["bare", String(CALLS), String(SCALE), String(WINDOW_S)], {})
  try {
    return await host.next<BareResult>("bare")
  } finally {
    host.child.kill("SIGKILL")
  }
}

export async function benchDialer(): Promise<void> {
  const baseUrl = process.env.DATABASE_URL
  const natsUrl = process.env.NATS_URL
  const real = baseUrl !== undefined && baseUrl !== ""
  const loadBefore = loadavg()[0]!
  const dataDir = mkdtempSync(join(tmpdir(), "parley-bench-dialer-"))
  const name = `parley_bench_${randomBytes(5).toString("hex")}`
  const admin = real ? connectPostgres(baseUrl, 1) : undefined
  let pgVersion = ""
  const env: Record<string, string> = {
    ...bigRunEnv(CALLS),
    DATA_DIR: dataDir,
    BUS_NAMESPACE: `bench${randomBytes(4).toString("hex")}`,
    SIM_TIME_SCALE: String(SCALE),
    // Scaled by SIM_TIME_SCALE: nobody decides, so a call that asked for something holds to its max duration.
    APPROVAL_HOLD_MS: String(600_000),
  }
  if (real) {
    await admin!.unsafe(`create database ${name}`)
    env.DATABASE_URL = withDatabase(baseUrl, name)
    const [v] = await admin!<[{ version: string }]>`select split_part(version(), ' ', 2) as version`
    pgVersion = v.version
  }
  if (natsUrl !== undefined && natsUrl !== "") env.NATS_URL = natsUrl
  for (const k of ["BENCH_DIALER_PROFILE", "BENCH_DIALER_HEAP_SNAPSHOT"]) if (process.env[k]) env[k] = process.env[k]!
  process.stdout.write(
    `${CALLS} calls, SIM_TIME_SCALE ${SCALE}; database ` +
      `${real ? redact(env.DATABASE_URL!) : "embedded PGlite (slow: the headline needs DATABASE_URL)"}; bus ` +
      `${env.NATS_URL ?? "in-process"}\n`,
  )
  let p: ParleyResult
  let b: BareResult
  try {
    b = await measureBare()
    process.stdout.write(
      `bare: ${b.actors} actors started in ${f1(b.startMs)} ms; ` +
        `${kb((b.heapAfter.heapUsed - b.heapBefore.heapUsed) / b.alive)} heap each; eld p99 ${f1(b.eld.p99)} ` +
        `ms\n`,
    )
    p = await measureParley(env)
  } finally {
    await admin?.unsafe(`drop database if exists ${name} with (force)`)
    await admin?.end({ timeout: 5 })
    rmSync(dataDir, { recursive: true, force: true })
  }

  // ---- figures ----
  const s = p.samples.filter((x) => x.t <= p.windowEndT)
  const t0 = s[0]?.t ?? 0
  const peakLive = Math.max(...s.map((x) => x.live))
  const peakLegs = Math.max(...s.map((x) => x.legs))
  const peakApprovals = Math.max(...s.map((x) => x.approvals))
  const peakActors = Math.max(...s.map((x) => x.live + x.approvals)) + 1
  const dialed = Math.max(...s.map((x) => x.dialed))
  const first = s.find((x) => x.dialed > 0)
  const last = s.find((x) => x.dialed >= dialed)
  const rampSeconds = first && last ? (last.t - first.t) / 1000 : NaN
  const rampRate = first && last ? (last.dialed - first.dialed) / rampSeconds : NaN
  const atPeak = s.at(-1)!
  /** Calls started per second over each 5-second stretch, from POST run to the end of the peak window. */
  const rows: string[] = []
  let maxRate = 0
  for (let i = 0, from = 0; i < s.length; i++) {
    const x = s[i]!
    if (x.t - s[from]!.t < 5000 && i < s.length - 1) continue
    const span = s.slice(from + 1, i + 1)
    const rate = (x.dialed - s[from]!.dialed) / ((x.t - s[from]!.t) / 1000)
    maxRate = Math.max(maxRate, rate)
    rows.push(
      `| ${f1((x.t - t0) / 1000)} | ${x.dialed} | ${Math.round(rate)} | ${x.live} | ${x.legs} | ` +
        `${x.approvals} | ${mib(x.heapUsed)} | ${f1(Math.max(...span.map((y) => y.eldP99)))} | ` +
        `${f1(Math.max(...span.map((y) => y.eldMax)))} |`,
    )
    from = i
  }
  const heapPerCall = (p.heapPeak.heapUsed - p.heapBefore.heapUsed) / p.heapPeak.live
  const heapPerBare = (b.heapAfter.heapUsed - b.heapBefore.heapUsed) / b.alive
  const rssPerCall = (p.heapPeak.rss - p.heapBefore.rss) / p.heapPeak.live
  const errorLines = p.errors.filter((l) => /"level":(50|60)/.test(l))
  const warnLines = p.errors.filter((l) => /"level":40/.test(l))
  const met = {
    calls: peakLive >= CALLS,
    rate: rampRate >= TARGET_CALLS_PER_S,
    eld: p.peakEld.p99 < TARGET_ELD_P99_MS && p.rampEld.p99 < TARGET_ELD_P99_MS,
    healthz: p.rampHealthz.p99 < TARGET_ELD_P99_MS,
    heap: heapPerCall < TARGET_HEAP_PER_CALL,
    rss: rssPerCall <= TARGET_RSS_PER_CALL,
  }
  const yes = (ok: boolean) => (ok ? "met" : "**not met**")
  const pct = (c: Cpu) =>
    `${Math.round(c.host * 100)}% / ${Math.round(c.postgres * 100)}% / ${Math.round(c.nats * 100)}%`
  const db = real
    ? `PostgreSQL ${pgVersion} on the same machine over TCP loopback (scratch database), ` +
      `${natsUrl ? "NATS on the same machine" : "the in-process bus"}`
    : "embedded PGlite and the in-process bus (slow; not the headline)"

  const md =
    `## dialer — one runtime process, ${CALLS} concurrent simulated calls vs ${CALLS} bare XState actors\n\n` +
    `Machine: ${machine()}; ${db}. Run ${new Date().toISOString().slice(0, 10)}. The measured process is the ` +
    `real \`--role all\` process (\`serve()\` in a child started with \`--expose-gc\`, ` +
    `bench/servers/dialer-host.ts); the bench sets the run up over HTTP as a customer would (signup, stub ` +
    `top-up, workflow, a ${CALLS}-row JSON audience, attestation, \`POST /run\`). The callees' last digits ` +
    `cycle through 3–9: all answer and talk, and 7–9 ask for something and hold for a decision nobody sends. ` +
    `SIM_TIME_SCALE ${SCALE}: every ring, utterance and speech time is ×${SCALE}, so a call makes 1/${SCALE} ` +
    `of the real-time event rate and lasts long enough to overlap the ramp (at 1 the shortest end after ~25 ` +
    `s); ${dialed === atPeak.live ? "no call had ended" : `${dialed - atPeak.live} calls had ended`} by the ` +
    `end of the peak window. CPS ceilings ${CPS}; the workspace's own dial limits ` +
    `(\`PUT /api/internal/dial-limits\`) ${CPS} calls/s and ${2 * CALLS} in flight; DB_POOL_MAX ${env.DB_POOL_MAX}, ` +
    `LOG_LEVEL=warn. Live calls: calls rows between \`beginAttempt\` and \`finishAttempt\` (a call actor ` +
    `each); legs: the sim's \`activeLegs\`; heaps: \`heapUsed\` after two forced full collections, before ` +
    `\`POST /run\` and at the peak. The baseline: ${CALLS} actors of a 3-state machine (ring → talk, a delayed ` +
    `self-transition every 1.5–4 s ×${SCALE}, final), no I/O, in a process of their own. 1-minute load average ` +
    `${loadBefore.toFixed(1)} before and ${loadavg()[0]!.toFixed(1)} after (the machine is shared).\n\n` +
    `| | Parley runtime | bare XState actors |\n` +
    `|---|---:|---:|\n` +
    `| started | ${dialed} calls in ${f1(rampSeconds)} s: **${Math.round(rampRate)} calls/s** (best 5 s: ` +
    `${Math.round(maxRate)}/s) | ${b.actors} in ${f1(b.startMs)} ms ` +
    `(${Math.round(b.actors / (b.startMs / 1000))}/s) |\n` +
    `| peak concurrent | **${peakLive} live calls** (${peakLegs} sim legs) | ${b.alive} actors |\n` +
    `| peak actors | ${peakActors} (${peakLive} call + ${peakApprovals} approval + 1 run; each call actor has ` +
    `1–2 invoked children besides) | ${b.alive} |\n` +
    `| heap per live call / actor | **${kb(heapPerCall)}** ` +
    `(+${mib(p.heapPeak.heapUsed - p.heapBefore.heapUsed)} over ${p.heapPeak.live} calls, from ` +
    `${mib(p.heapBefore.heapUsed)}) | ${kb(heapPerBare)} |\n` +
    `| RSS per live call / actor | ${kb(rssPerCall)} | ${kb((b.heapAfter.rss - b.heapBefore.rss) / b.alive)} |` +
    `\n| event-loop delay at the peak (${WINDOW_S} s) p50 / p99 / max | ${f1(p.peakEld.p50)} / ` +
    `**${f1(p.peakEld.p99)}** / ${f1(p.peakEld.max)} ms | ${f1(b.eld.p50)} / ${f1(b.eld.p99)} / ` +
    `${f1(b.eld.max)} ms |\n` +
    `| event-loop delay over the ramp p99 / max | ${f1(p.rampEld.p99)} / ${f1(p.rampEld.max)} ms | — |\n` +
    `| \`GET /healthz\` over the ramp p50 / p99 / max (${p.rampHealthz.n} requests, ${p.rampHealthz.failed} ` +
    `failed) | ${f1(p.rampHealthz.p50)} / **${f1(p.rampHealthz.p99)}** / ${f1(p.rampHealthz.max)} ms | — |\n` +
    `| load at the peak | ${Math.round(p.peakTurnsPerS)} transcript turns/s ` +
    `(${f1((p.peakTurnsPerS * 60) / Math.max(1, peakLive))} per call-minute) | ` +
    `${Math.round(b.transitions / b.windowS)} transitions/s |\n` +
    `| CPU, Parley / Postgres / NATS (share of one core): ramp; peak | ${pct(p.rampCpu)}; ${pct(p.peakCpu)} | ` +
    `— |\n\n` +
    `**Overhead: ${(heapPerCall / heapPerBare).toFixed(1)}× the heap of a bare actor per live call; event-loop ` +
    `p99 at the peak ${(p.peakEld.p99 / Math.max(b.eld.p99, 0.001)).toFixed(1)}× the bare actors'.**\n` +
    `Targets: ${CALLS} concurrent calls on one process ${yes(met.calls)} (peak ${peakLive}); at least ` +
    `${TARGET_CALLS_PER_S} calls started/s ${yes(met.rate)} (${Math.round(rampRate)}/s); event-loop p99 ` +
    `under ${TARGET_ELD_P99_MS} ms ${yes(met.eld)} (${f1(p.peakEld.p99)} ms at the peak, ${f1(p.rampEld.p99)} ` +
    `ms over the ramp); \`/healthz\` p99 over the ramp under ${TARGET_ELD_P99_MS} ms ${yes(met.healthz)} ` +
    `(${f1(p.rampHealthz.p99)} ms); RSS growth per live call at most ${TARGET_RSS_PER_CALL / 1024} KB ` +
    `${yes(met.rss)} (${kb(rssPerCall)}); heap per live call under ${TARGET_HEAP_PER_CALL / 1024} KB ` +
    `${yes(met.heap)} (${kb(heapPerCall)}).\n` +
    `Errors logged by the process: ${errorLines.length}` +
    (errorLines.length > 0 ? ` (first: \`${errorLines[0]!.slice(0, 200).replace(/`/g, "'")}\`)` : "") +
    `; warnings ${warnLines.length}. Graceful shutdown (\`running.stop()\`, SHUTDOWN_TIMEOUT_MS=1000) with the ` +
    `calls still up: ` +
    `${p.stop.ok ? `${f1(p.stop.ms / 1000)} s` : `**failed** (${p.stop.why.replace(/`/g, "'")})`}.\n\n` +
    `From \`POST /run\` to the end of the peak window, every 5 s (eld: the worst 250 ms sample of the stretch; ` +
    `heap without a forced collection):\n\n` +
    `| t s | dialed | calls/s | live calls | legs | approvals | heap | eld p99 ms | eld max ms |\n` +
    `|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n` +
    `${rows.join("\n")}`
  process.stdout.write(`\n${md}\n`)
  if (p.snapshot !== null) process.stdout.write(`\nheap snapshot at the peak: ${p.snapshot}\n`)
  if (errorLines.length > 0) process.stdout.write(`\nerror lines (first 5):\n${errorLines.slice(0, 5).join("\n")}\n`)
  if (!real && process.env.BENCH_DIALER_RECORD_EMBEDDED !== "1") {
    process.stdout.write(
      "\nembedded run: not recorded in RESULTS.md " +
        "(set DATABASE_URL and NATS_URL for the headline, or BENCH_DIALER_RECORD_EMBEDDED=1)\n",
    )
    return
  }
  if (process.env.BENCH_DIALER_RECORD === "0") return
  record("dialer", md)
}
