// bench/kb (real runs): one `--role all` server process on real Postgres and NATS, two workspaces
// (one with 200 active rules imported through POST /kb/import, one with none) and runs of a few
// hundred simulated calls alternating between them: the process's CPU per stored turn, with and
// without the rules, measured in the same process over the same kind of run.
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { isBanned, prepareCallRules, ruleFor } from "../src/kb/rule-matching.js"
import { redact } from "../src/platform/Db.js"
import type { AgentRule } from "../src/providers/llm/llm.interface.js"
import { cpuMicros, machine, type ServerProcess, scratchDatabase, startProcess, verifyEmail } from "./lib.js"

const ROUNDS = Number(process.env.BENCH_KB_RUN_ROUNDS ?? 7)
/** Numbers per talking sim behaviour (last digit 3–9) in each run's audience. */
const PER_DIGIT = Number(process.env.BENCH_KB_RUN_PER_DIGIT ?? 50)
const DIGITS = [3, 4, 5, 6, 7, 8, 9]
/** SIM_TIME_SCALE: short calls, but slow enough that the process is not saturated (it is not the measure). */
const SCALE = Number(process.env.BENCH_KB_RUN_SCALE ?? 0.2)
/** Unscaled wait for a decision nobody sends (digits 7–9 ask for something): × SCALE. */
const HOLD_MS = 5000
const RUN_LIMIT_MS = 180_000

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}

type Arm = "none" | "rules"

export interface RunRound {
  readonly arm: Arm
  readonly runId: number
  readonly turns: number
  readonly calls: number
  readonly cpuMs: number
  readonly wallS: number
  /** Concessions and other requests the calls proposed (each a row, a bus message, a timeline entry). */
  readonly approvals: number
  /** Characters said by the agent over the run. */
  readonly agentChars: number
}

export interface KbRunResult {
  readonly rounds: ReadonlyArray<RunRound>
  /** Median µs of server CPU per stored turn, per arm. */
  readonly perTurn: Record<Arm, number>
  /** Median of each round's with/without ratio − 1. */
  readonly paired: number
  /** All rounds' CPU over all their turns, with against without, − 1. */
  readonly pooled: number
  /** The lowest and highest of the rounds' ratios − 1. */
  readonly spread: readonly [number, number]
  /** Agent lines as a share of the stored turns (rule-free runs). */
  readonly agentShare: number
  /** What the runs with rules did less of (median per run), when they did: approvals, characters said. */
  readonly less: ReadonlyArray<string>
  /** The server's CPU when idle between runs, as a share of one core. */
  readonly idleCores: number
  /** Stored turns of the rule-free runs the rules would touch: agent lines banned, callee lines triggering. */
  readonly touched: { banned: number; triggered: number; agent: number; callee: number }
  readonly md: string
}

async function call(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  token?: string,
): Promise<Record<string, unknown>> {
  const raw = typeof body === "string"
  const res = await fetch(base + path, {
    method,
    headers: {
      ...(body !== undefined && { "content-type": raw ? "application/octet-stream" : "application/json" }),
      ...(token !== undefined && { authorization: `Bearer ${token}` }),
    },
    ...(body !== undefined && { body: raw ? body : JSON.stringify(body) }),
  })
  const text = await res.text()
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`)
  return text === "" ? {} : (JSON.parse(text) as Record<string, unknown>)
}

/** A verified, funded workspace; its owner's token. */
async function workspace(base: string, outbox: string, label: string): Promise<string> {
  const email = `bench-kb-${label}-${randomBytes(4).toString("hex")}@example.com`
  const password = "correct horse battery staple"
  await call(base, "POST", "/auth/signup", { email, password, country: "US", full_name: `Bench KB ${label}` })
  await verifyEmail(base, outbox, email)
  const token = (await call(base, "POST", "/auth/login", { email, password })).token as string
  const intent = await call(base, "POST", "/billing/topup", { amount_minor: 10_000_000 }, token)
  await call(base, "POST", "/billing/webhooks/stub", { external_id: intent.external_id, status: "succeeded" })
  return token
}

/** A workflow ready to run over its own `PER_DIGIT × 7` numbers (never dialed before in this bench). */
async function workflow(base: string, token: string, firstNumber: number): Promise<number> {
  const w = await call(
    base,
    "POST",
    "/api/workflows",
    { nl_prompt: "Call members whose membership lapsed and offer a discount of up to $20 to rejoin." },
    token,
  )
  const rows = Array.from({ length: PER_DIGIT * DIGITS.length }, (_, i) => ({
    phone: `+1415${2_000_000 + (firstNumber + i) * 10 + DIGITS[i % DIGITS.length]!}`,
    name: `Person ${i}`,
  }))
  const aud = await call(base, "POST", `/api/workflows/${w.id}/audience`, { rows }, token)
  if (aud.accepted !== rows.length) throw new Error(`audience: ${JSON.stringify(aud)}`)
  await call(
    base,
    "PUT",
    `/api/workflows/${w.id}/compliance`,
    { consent_attestation_text: "All numbers opted in on our website." },
    token,
  )
  return w.id as number
}

export async function benchKbRun(rules: ReadonlyArray<AgentRule>): Promise<KbRunResult> {
  const baseUrl = process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/postgres"
  const natsUrl = process.env.NATS_URL || "nats://127.0.0.1:4222"
  const loadBefore = loadavg()[0]!
  const scratch = await scratchDatabase(baseUrl, "parley_bench_kb")
  const { sql } = scratch
  const dataDir = mkdtempSync(join(tmpdir(), "parley-bench-kb-"))
  const calls = PER_DIGIT * DIGITS.length
  const env = {
    HOST: "127.0.0.1",
    PORT: "0",
    DATABASE_URL: scratch.url,
    NATS_URL: natsUrl,
    BUS_NAMESPACE: `benchkb${randomBytes(4).toString("hex")}`,
    DATA_DIR: dataDir,
    OUTBOX_FILE: join(dataDir, "outbox.jsonl"),
    LOG_LEVEL: "info",
    PAYMENTS: "stub",
    DB_POOL_MAX: "10",
    SIM_TIME_SCALE: String(SCALE),
    CALLING_HOURS: "any",
    DIALER_CPS_PER_CARRIER: "1000",
    DIALER_CPS_PER_TENANT: "1000",
    DIALER_MAX_CONCURRENT_PER_WORKFLOW: String(2 * calls),
    DIALER_MAX_CONCURRENT_PER_TENANT: String(2 * calls),
    RUN_CLAIM_INTERVAL_MS: "200",
    APPROVAL_HOLD_MS: String(HOLD_MS),
    SHUTDOWN_TIMEOUT_MS: "1000",
  }
  process.stdout.write(
    `real runs: database ${redact(scratch.url)}, NATS ${natsUrl}; ${calls} calls a run, SIM_TIME_SCALE ${SCALE}\n`,
  )
  const problems: string[] = []
  let server: ServerProcess | undefined
  try {
    server = await startProcess(["--import", "tsx", "src/main/main.ts", "serve", "--role", "all"], env)
    createInterface({ input: server.child.stdout! }).on("line", (line) => {
      if (line.startsWith("{") && ((JSON.parse(line) as { level?: number }).level ?? 0) >= 50 && problems.length < 5)
        problems.push(line.slice(0, 300))
    })
    const pid = server.child.pid!
    const base = `http://127.0.0.1:${server.port}`
    const token: Record<Arm, string> = {
      none: await workspace(base, env.OUTBOX_FILE, "none"),
      rules: await workspace(base, env.OUTBOX_FILE, "rules"),
    }
    const file = JSON.stringify({
      rules: rules.map((r) => ({
        bucket: r.bucket,
        title: r.title,
        body: r.body,
        trigger: r.trigger,
        workflow_id: null,
        priority: r.priority,
        status: "active",
      })),
    })
    const imported = await call(base, "POST", "/kb/import?format=json", file, token.rules)
    if (imported.created !== rules.length) throw new Error(`import: ${JSON.stringify(imported)}`)

    // Every workflow up front (a warm-up run each, then the rounds), so no set-up work is measured.
    const flows: Record<Arm, number[]> = { none: [], rules: [] }
    let next = 0
    for (let i = 0; i <= ROUNDS; i++)
      for (const arm of ["none", "rules"] as const) {
        flows[arm].push(await workflow(base, token[arm], next))
        next += calls
      }
    await sleep(2000)
    const i0 = cpuMicros(pid)
    await sleep(5000)
    const idleCores = (cpuMicros(pid) - i0) / 5e6

    const runOnce = async (arm: Arm, workflowId: number): Promise<RunRound> => {
      const c0 = cpuMicros(pid)
      const t0 = performance.now()
      const runId = (await call(base, "POST", `/api/workflows/${workflowId}/run`, undefined, token[arm]))
        .run_id as number
      for (;;) {
        await sleep(100)
        const [r] = await sql<[{ status: string }]>`select status from runs where id = ${runId}`
        if (r!.status !== "running") break
        if (performance.now() - t0 > RUN_LIMIT_MS) throw new Error(`run ${runId} still running after 180 s`)
      }
      // The last turns may still be on their way to the table.
      let turns = -1
      for (;;) {
        const [c] = await sql<[{ n: number }]>`select count(*)::int as n from turns where run_id = ${runId}`
        if (c!.n === turns) break
        turns = c!.n
        await sleep(200)
      }
      const cpuMs = (cpuMicros(pid) - c0) / 1000
      const wallS = (performance.now() - t0) / 1000
      const [k] = await sql<[{ calls: number; approvals: number; chars: number }]>`
        select (select count(*)::int from calls where run_id = ${runId}) as calls,
          (select count(*)::int from approvals where run_id = ${runId}) as approvals,
          (select coalesce(sum(length(text)), 0)::int from turns
            where run_id = ${runId} and speaker = 'agent') as chars`
      return { arm, runId, turns, calls: k!.calls, cpuMs, wallS, approvals: k!.approvals, agentChars: k!.chars }
    }

    const rounds: RunRound[] = []
    for (let i = 0; i <= ROUNDS; i++) {
      const order = i % 2 === 0 ? (["none", "rules"] as const) : (["rules", "none"] as const)
      for (const arm of order) {
        const r = await runOnce(arm, flows[arm][i]!)
        process.stdout.write(
          `${i === 0 ? "warm-up" : `round ${i}`} ${arm}: run ${r.runId}, ${r.calls} calls, ${r.turns} turns, ` +
            `${r.approvals} approvals, ${r.agentChars} agent chars, ` +
            `${r.cpuMs.toFixed(0)} ms CPU in ${r.wallS.toFixed(1)} s: ${((r.cpuMs * 1000) / r.turns).toFixed(0)} ` +
            `µs/turn\n`,
        )
        if (i > 0) rounds.push(r)
        await sleep(500)
      }
    }

    // What the rules would have done to the rule-free runs' stored turns.
    const noneRuns = rounds.filter((r) => r.arm === "none").map((r) => r.runId)
    const stored = await sql<Array<{ speaker: string; text: string; name: string | null }>>`
      select t.speaker, t.text, a.name from turns t join audience_targets a on a.id = t.target_id
      where t.run_id = any(${noneRuns}) and t.speaker in ('agent', 'callee')`
    const touched = { banned: 0, triggered: 0, agent: 0, callee: 0 }
    const prepared = new Map<string, ReturnType<typeof prepareCallRules>>()
    for (const t of stored) {
      const name = t.name ?? ""
      let p = prepared.get(name)
      if (p === undefined) prepared.set(name, (p = prepareCallRules(rules, { name, agentName: "", company: "" })))
      if (t.speaker === "agent") {
        touched.agent++
        if (isBanned(t.text, p)) touched.banned++
      } else {
        touched.callee++
        if (ruleFor(t.text, null, p) !== undefined) touched.triggered++
      }
    }

    const per = (arm: Arm) => rounds.filter((r) => r.arm === arm).map((r) => (r.cpuMs * 1000) / r.turns)
    const perTurn = { none: median(per("none")), rules: median(per("rules")) }
    const pairedAll = per("rules").map((x, i) => x / per("none")[i]! - 1)
    const paired = median(pairedAll)
    const pct = (x: number) => `${x >= 0 ? "+" : ""}${(x * 100).toFixed(1)}%`
    const rows = Array.from({ length: ROUNDS }, (_, i) => {
      const n = rounds.filter((r) => r.arm === "none")[i]!
      const w = rounds.filter((r) => r.arm === "rules")[i]!
      const cell = (r: RunRound) =>
        `${r.turns} | ${r.cpuMs.toFixed(0)} | ${r.wallS.toFixed(1)} | ${((r.cpuMs * 1000) / r.turns).toFixed(0)}`
      const first = (i + 1) % 2 === 0 ? "without first" : "with first"
      return `| ${i + 1} (${first}) | ${cell(n)} | ${cell(w)} | ${pct(pairedAll[i]!)} |`
    })
    const meanTurns = median(rounds.map((r) => r.turns / r.calls))
    const of = (arm: Arm, f: (r: RunRound) => number) => median(rounds.filter((r) => r.arm === arm).map(f))
    const md =
      `Machine: ${machine()}; PostgreSQL ${scratch.pgVersion} and NATS on the same machine (scratch database, ` +
      `bus namespace of its own). Run ${new Date().toISOString().slice(0, 10)}; 1-minute load average ` +
      `${loadBefore.toFixed(1)} before and ${loadavg()[0]!.toFixed(1)} after (the machine is shared; CI was ` +
      `running). One \`src/main/main.ts serve --role all\` process (tsx, LOG_LEVEL=info, DB_POOL_MAX 10) with ` +
      `two workspaces set up over HTTP as customers would (signup, verification, stub top-up): one imported ` +
      `${rules.length} workspace-wide rules through \`POST /kb/import?format=json\` (the mix below), the other ` +
      `has none. Each run is a workflow of its own over ${calls} numbers never dialed before (last digits ` +
      `cycling 3–9: all answer and talk; 7–9 ask for something and wait ${((HOLD_MS * SCALE) / 1000).toFixed(1)} ` +
      `s for a decision nobody sends), SIM_TIME_SCALE ${SCALE}, CALLING_HOURS=any; every workflow is created ` +
      `before the first run. Measured per run: the server process's CPU (utime + stime from /proc) from just ` +
      `before \`POST /run\` to the run's \`completed\` with its turns all stored, over \`count(*) from turns ` +
      `where run_id\` (agent, callee and system lines; ${meanTurns.toFixed(1)} a call). A warm-up run each, ` +
      `then ${ROUNDS} rounds alternating which goes first; medians. Idle, the process uses ` +
      `${(idleCores * 100).toFixed(1)}% of a core (timers, claim loop), counted in both. In the rule-free runs ` +
      `the rules would ban ${touched.banned} of ${touched.agent} agent lines and ${touched.triggered} of ` +
      `${touched.callee} callee lines meet a trigger. The rules change the calls a little: a run's calls ` +
      `proposed ${of("none", (r) => r.approvals)} concessions or requests without the rules and ` +
      `${of("rules", (r) => r.approvals)} with them, and the agent said ${of("none", (r) => r.agentChars)} ` +
      `characters without and ${of("rules", (r) => r.agentChars)} with (medians per run).\n\n` +
      `| round | without: turns | CPU ms | wall s | µs/turn | with 200 rules: turns | CPU ms | wall s | ` +
      `µs/turn | with / without |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n${rows.join("\n")}\n` +
      `| **median** | | | | **${perTurn.none.toFixed(0)}** | | | | **${perTurn.rules.toFixed(0)}** | ` +
      `**${pct(paired)}** |\n` +
      (problems.length > 0 ? `\nErrors logged by the server (first): \`${problems[0]!.replace(/`/g, "'")}\`\n` : "")
    const noneTurns = rounds.filter((r) => r.arm === "none").reduce((a, r) => a + r.turns, 0)
    const spread = [Math.min(...pairedAll), Math.max(...pairedAll)] as const
    const less: string[] = []
    for (const [what, f] of [
      ["requests for a decision", (r: RunRound) => r.approvals],
      ["characters said by the agent", (r: RunRound) => r.agentChars],
    ] as const) {
      const d = 1 - of("rules", f) / of("none", f)
      if (d > 0.005) less.push(`${(d * 100).toFixed(1)}% fewer ${what}`)
    }
    const agentShare = touched.agent / noneTurns
    const sum = (arm: Arm, f: (r: RunRound) => number) =>
      rounds.filter((r) => r.arm === arm).reduce((a, r) => a + f(r), 0)
    const pooled =
      sum("rules", (r) => r.cpuMs) / sum("rules", (r) => r.turns) / (sum("none", (r) => r.cpuMs) / noneTurns) - 1
    return { rounds, perTurn, paired, pooled, spread, agentShare, less, idleCores, touched, md }
  } finally {
    await server?.stop()
    await scratch.drop()
    rmSync(dataDir, { recursive: true, force: true })
  }
}
