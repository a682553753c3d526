// bench/sim: a 500-conversation simulation campaign through the real runtime (the `--role all`
// process in a child with --expose-gc, bench/servers/dialer-host.ts, driven over HTTP as an operator
// would: POST /api/sim/campaigns, run-batch until completed), against the same conversations as bare
// call actors (bench/servers/sim-bare.ts: the call machine, sim carrier, sim model and agent loop, no
// runtime): conversations per second, and heap per simulated conversation held for an answer.
import { type ChildProcess, fork } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { connectPostgres, redact, withDatabase } from "../src/platform/Db.js"
import { PROJECT_ROOT } from "../src/platform/paths.js"
import { drawCallees, type SimMix } from "../src/rehearsals/mix.js"
import { machine, record, verifyEmail } from "./lib.js"
import type { Heap, HostSample } from "./servers/dialer-host.js"

const SIZE = Number(process.env.BENCH_SIM_SIZE ?? 500)
const BATCH = Number(process.env.BENCH_SIM_BATCH ?? 100)
/** The campaign's time scale: every ring, utterance and speech time ×SCALE. */
const SCALE = Number(process.env.BENCH_SIM_SCALE ?? 0.01)
/** Conversations held for an answer at once, for the heap figure. */
const HELD = Number(process.env.BENCH_SIM_HELD ?? 100)
const SEED = 17
/** Callees who never ask for anything (a question holds its call until someone answers it). */
const TALK_MIX: SimMix = { agrees: 3, declines: 2, voicemail: 1, busy: 1, "no-answer": 1 }
/** Callees who ask for a discount and hold for the operator's answer. */
const ASK_MIX: SimMix = { "wants-discount": 1 }
const PROMPT = "Win back lapsed members with a discount of up to $20; book callbacks; escalate when asked."

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const kb = (b: number) => `${(b / 1024).toFixed(1)} KB`
const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`
const f1 = (x: number) => x.toFixed(1)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** A forked bench process, with request/reply over IPC. */
interface Child {
  readonly child: ChildProcess
  next<T>(type: string): Promise<T>
  ask<T>(cmd: string, extra?: Record<string, unknown>): Promise<T>
  readonly errors: string[]
}

function startChild(script: string, args: string[], env: Record<string, string>): Child {
  const child = fork(join(PROJECT_ROOT, "bench", "servers", script), args, {
    cwd: PROJECT_ROOT,
    execArgv: ["--expose-gc", "--import", "tsx"],
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe", "ipc"],
  })
  const kill = () => child.kill("SIGKILL")
  process.once("exit", kill)
  child.once("exit", () => process.off("exit", kill))
  const errors: string[] = []
  createInterface({ input: child.stdout! }).on("line", (line) => {
    if (errors.length < 1000) errors.push(line)
  })
  createInterface({ input: child.stderr! }).on("line", (line) => process.stderr.write(`${script}: ${line}\n`))
  const waiting = new Map<string, Array<(m: unknown) => void>>()
  const replies = new Map<number, (m: unknown) => void>()
  child.on("message", (raw) => {
    const m = raw as { type: string; id?: number }
    if (m.type === "reply" && m.id !== undefined) {
      replies.get(m.id)?.(m)
      replies.delete(m.id)
    } else waiting.get(m.type)?.shift()?.(m)
  })
  const exited = new Promise<never>((_, reject) =>
    child.once("exit", (code, signal) => reject(new Error(`${script} exited (${code ?? signal})`))),
  )
  exited.catch(() => {})
  let lastId = 0
  return {
    child,
    errors,
    next: <T>(type: string) =>
      Promise.race([
        new Promise<T>((resolve) => waiting.set(type, [...(waiting.get(type) ?? []), resolve as (m: unknown) => void])),
        exited,
      ]),
    ask: <T>(cmd: string, extra: Record<string, unknown> = {}) => {
      const id = ++lastId
      const p = new Promise<T>((resolve) => replies.set(id, resolve as (m: unknown) => void))
      child.send({ id, cmd, ...extra })
      return Promise.race([p, exited])
    },
  }
}

/** An operator's HTTP client of the measured process. */
function client(base: string) {
  let token: string | undefined
  const call = async (method: string, path: string, body?: unknown): Promise<Json> => {
    const res = await fetch(base + path, {
      method,
      headers: {
        ...(body !== undefined && { "content-type": "application/json" }),
        ...(token !== undefined && { authorization: `Bearer ${token}` }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    })
    const text = await res.text()
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`)
    return text === "" ? {} : (JSON.parse(text) as Json)
  }
  return {
    call,
    signIn: async (outboxFile: string) => {
      const email = `bench-${randomBytes(4).toString("hex")}@example.com`
      const password = "correct horse battery staple"
      await call("POST", "/auth/signup", { email, password, country: "US", full_name: "Bench Sim" })
      await verifyEmail(base, outboxFile, email)
      token = (await call("POST", "/auth/login", { email, password })).token as string
    },
  }
}

interface ParleyResult {
  readonly ms: number
  readonly batchMs: number[]
  readonly outcomes: Json
  readonly heapBefore: Heap
  readonly heapAfterCampaign: Heap
  readonly heapHeld: Heap & { live: number; questions: number }
  readonly heldBefore: Heap
  readonly answerMs: number
  readonly heldOutcomes: Json
  readonly wallet: { before: number; after: number }
  readonly errors: string[]
  readonly ruleBook: unknown
}

async function measureParley(env: Record<string, string>): Promise<ParleyResult> {
  const host = startChild("dialer-host.ts", ["parley"], env)
  try {
    const ready = await host.next<{ port: number }>("ready")
    const api = client(`http://127.0.0.1:${ready.port}`)
    await api.signIn(join(env.DATA_DIR!, "outbox.jsonl"))
    const w = await api.call("POST", "/api/workflows", { nl_prompt: PROMPT })
    const ruleBook = (await api.call("GET", `/api/workflows/${w.id}`)).rule_book
    const samples: HostSample[] = []
    host.child.on("message", (m) => {
      if ((m as { type: string }).type === "sample") samples.push(m as HostSample)
    })
    const balance = async () => (await api.call("GET", "/billing/balance")).balance_minor as number
    const walletBefore = await balance()

    // A small campaign first, so the heap figures leave out code and caches loaded on first use.
    const warm = await api.call("POST", "/api/sim/campaigns", {
      workflow_id: w.id,
      size: 10,
      batch_size: 10,
      seed: SEED + 1,
      time_scale: SCALE,
      mix: TALK_MIX,
    })
    await api.call("POST", `/api/sim/campaigns/${warm.id}/run-batch`)
    while ((await api.call("GET", `/api/sim/campaigns/${warm.id}`)).state !== "completed") await sleep(50)

    // ---- throughput: SIZE conversations, BATCH at a time, as an operator runs them ----
    const heapBefore = (await host.ask<{ heap: Heap }>("heap")).heap
    const c = await api.call("POST", "/api/sim/campaigns", {
      workflow_id: w.id,
      size: SIZE,
      batch_size: BATCH,
      seed: SEED,
      time_scale: SCALE,
      mix: TALK_MIX,
    })
    await host.ask("watch", { runId: c.run_id })
    const batchMs: number[] = []
    const t0 = performance.now()
    let view: Json = c
    while (view.state !== "completed") {
      const tb = performance.now()
      await api.call("POST", `/api/sim/campaigns/${c.id}/run-batch`)
      do {
        await sleep(20)
        view = await api.call("GET", `/api/sim/campaigns/${c.id}`)
        if (view.state === "failed" || view.state === "awaiting_answer")
          throw new Error(`campaign ${view.state}: ${JSON.stringify(view).slice(0, 400)}`)
      } while (view.state === "running")
      batchMs.push(performance.now() - tb)
      process.stdout.write(
        `  batch ${batchMs.length}: ${view.progress.done}/${SIZE} in ${f1(batchMs.at(-1)! / 1000)} s\n`,
      )
    }
    const ms = performance.now() - t0
    const heapAfterCampaign = (await host.ask<{ heap: Heap }>("heap")).heap

    // ---- heap: HELD conversations holding for the operator's answer at once ----
    const q = await api.call("POST", "/api/sim/campaigns", {
      workflow_id: w.id,
      size: HELD,
      batch_size: Math.min(HELD, 100),
      seed: SEED,
      time_scale: SCALE,
      mix: ASK_MIX,
    })
    await host.ask("watch", { runId: q.run_id })
    const heldBefore = (await host.ask<{ heap: Heap }>("heap")).heap
    await api.call("POST", `/api/sim/campaigns/${q.id}/run-batch`)
    const deadline = Date.now() + 120_000
    while ((samples.at(-1)?.approvals ?? 0) < HELD) {
      if (Date.now() > deadline) throw new Error(`only ${samples.at(-1)?.approvals} questions were asked`)
      await sleep(100)
    }
    const before = samples.at(-1)!
    const held = await host.ask<{ heap: Heap }>("heap")
    const n = samples.length
    while (samples.length < n + 2) await sleep(100)
    const after = samples.at(-1)!
    const pending = (await api.call("GET", "/api/approvals?status=pending&limit=500")).approvals as Json[]
    const mine = pending.filter((p) => p.run_id === q.run_id)
    const ta = performance.now()
    await Promise.all(mine.map((p) => api.call("POST", `/api/approvals/${p.id}/decide`, { decision: "approve" })))
    let heldView: Json
    do {
      await sleep(20)
      heldView = await api.call("GET", `/api/sim/campaigns/${q.id}`)
    } while (heldView.state !== "completed" && heldView.state !== "failed")
    const answerMs = performance.now() - ta
    return {
      ms,
      batchMs,
      outcomes: view.outcomes,
      heapBefore,
      heapAfterCampaign,
      heldBefore,
      heapHeld: {
        ...held.heap,
        live: Math.round((before.live + after.live) / 2),
        questions: Math.round((before.approvals + after.approvals) / 2),
      },
      answerMs,
      heldOutcomes: heldView.outcomes,
      wallet: { before: walletBefore, after: await balance() },
      errors: host.errors.filter((l) => /"level":(50|60)/.test(l)),
      ruleBook,
    }
  } finally {
    host.child.kill("SIGKILL")
  }
}

interface BareResult {
  readonly ms: number
  readonly outcomes: Record<string, number>
  readonly heapBefore: Heap
  readonly heapHeld: Heap
  readonly held: number
  readonly answerMs: number
}

async function measureBare(ruleBook: unknown): Promise<BareResult> {
  const bare = startChild("sim-bare.ts", [], { SIM_SCALE: String(SCALE), SIM_RULE_BOOK: JSON.stringify(ruleBook) })
  try {
    await bare.next("ready")
    const talk = drawCallees(SEED, SIZE, TALK_MIX).map((c) => c.phone)
    const waves = await bare.ask<{ ms: number; outcomes: Record<string, number> }>("waves", {
      phones: talk,
      batch: BATCH,
    })
    const heapBefore = (await bare.ask<{ heap: Heap }>("heap")).heap
    await bare.ask("hold", { phones: drawCallees(SEED, HELD, ASK_MIX).map((c) => c.phone) })
    const held = await bare.ask<{ heap: Heap; live: number }>("heap")
    const answered = await bare.ask<{ ms: number }>("answer")
    return {
      ms: waves.ms,
      outcomes: waves.outcomes,
      heapBefore,
      heapHeld: held.heap,
      held: held.live,
      answerMs: answered.ms,
    }
  } finally {
    bare.child.kill("SIGKILL")
  }
}

export async function benchSim(): Promise<void> {
  const baseUrl = process.env.DATABASE_URL
  const natsUrl = process.env.NATS_URL
  const real = baseUrl !== undefined && baseUrl !== ""
  const loadBefore = loadavg()[0]!
  const dataDir = mkdtempSync(join(tmpdir(), "parley-bench-sim-"))
  const name = `parley_bench_${randomBytes(5).toString("hex")}`
  const admin = real ? connectPostgres(baseUrl, 1) : undefined
  let pgVersion = ""
  const env: Record<string, string> = {
    HOST: "127.0.0.1",
    PORT: "0",
    DATA_DIR: dataDir,
    LOG_LEVEL: "warn",
    PAYMENTS: "stub",
    BUS_NAMESPACE: `bench${randomBytes(4).toString("hex")}`,
    // A whole batch in flight at once (the default cap is 20 calls per workflow).
    DIALER_MAX_CONCURRENT_PER_WORKFLOW: String(Math.max(BATCH, HELD)),
    DIALER_MAX_CONCURRENT_PER_TENANT: String(2 * Math.max(BATCH, HELD)),
    RUN_CLAIM_INTERVAL_MS: "200",
    DB_POOL_MAX: "20",
    SHUTDOWN_TIMEOUT_MS: "1000",
  }
  if (real) {
    await admin!.unsafe(`create database ${name}`)
    env.DATABASE_URL = withDatabase(baseUrl, name)
    const [v] = await admin!<[{ version: string }]>`select split_part(version(), ' ', 2) as version`
    pgVersion = v.version
  }
  if (natsUrl !== undefined && natsUrl !== "") env.NATS_URL = natsUrl
  process.stdout.write(
    `${SIZE} simulated conversations in batches of ${BATCH}, time scale ${SCALE}; database ` +
      `${real ? redact(env.DATABASE_URL!) : "embedded PGlite"}; bus ${env.NATS_URL ?? "in-process"}\n`,
  )
  let p: ParleyResult
  let b: BareResult
  try {
    p = await measureParley(env)
    process.stdout.write(`parley: ${SIZE} in ${f1(p.ms / 1000)} s\n`)
    b = await measureBare(p.ruleBook)
    process.stdout.write(`bare: ${SIZE} in ${f1(b.ms / 1000)} s\n`)
  } finally {
    await admin?.unsafe(`drop database if exists ${name} with (force)`)
    await admin?.end({ timeout: 5 })
    rmSync(dataDir, { recursive: true, force: true })
  }

  const rate = SIZE / (p.ms / 1000)
  const bareRate = SIZE / (b.ms / 1000)
  const heldPer = (p.heapHeld.heapUsed - p.heldBefore.heapUsed) / Math.max(1, p.heapHeld.live)
  const barePer = (b.heapHeld.heapUsed - b.heapBefore.heapUsed) / Math.max(1, b.held)
  const retained = (p.heapAfterCampaign.heapUsed - p.heapBefore.heapUsed) / SIZE
  const bareOutcomes = Object.entries(b.outcomes)
    .sort()
    .map(([k, v]) => `${k} ${v}`)
    .join(", ")
  const outcomes = Object.entries(p.outcomes as Record<string, unknown>)
    .filter(([, v]) => typeof v === "number" && v > 0)
    .map(([k, v]) => `${k} ${v}`)
    .join(", ")
  const db = real
    ? `PostgreSQL ${pgVersion} on the same machine over TCP loopback (scratch database), ` +
      `${natsUrl ? "NATS on the same machine" : "the in-process bus"}`
    : "embedded PGlite and the in-process bus"
  const md =
    `## sim — a ${SIZE}-conversation simulation campaign through the runtime vs ${SIZE} bare call actors\n\n` +
    `Machine: ${machine()}; ${db}. Run ${new Date().toISOString().slice(0, 10)}. The measured process is the ` +
    `real \`--role all\` process (bench/servers/dialer-host.ts); the bench acts as an operator over HTTP: ` +
    `signup, a workflow, \`POST /api/sim/campaigns\` (size ${SIZE}, batch_size ${BATCH}, time_scale ${SCALE}, ` +
    `seed ${SEED}, a mix of callees who never ask for anything: ${JSON.stringify(TALK_MIX)}), then ` +
    `\`run-batch\` and \`GET\` every 20 ms until the batch is done, until the campaign is completed. ` +
    `DIALER_MAX_CONCURRENT_PER_WORKFLOW ${env.DIALER_MAX_CONCURRENT_PER_WORKFLOW} (a batch in flight at once). ` +
    `The baseline (bench/servers/sim-bare.ts, its own process): the same ${SIZE} numbers (\`drawCallees\` with ` +
    `the same seed and mix) in waves of ${BATCH}, each a call actor of the same call machine with the same sim ` +
    `carrier, sim model, rule book and agent loop, and nothing else: no Postgres, bus, dialer, turn stream, ` +
    `approval rows or snapshots. Heap: \`heapUsed\` after two forced full collections, with ${HELD} ` +
    `conversations of a second campaign (every callee a discount seeker) each holding for the operator's answer ` +
    `(a call actor, its sim leg and, in Parley, an approval actor), minus the heap just before its run-batch. ` +
    `1-minute load average ${loadBefore.toFixed(1)} before and ${loadavg()[0]!.toFixed(1)} after ` +
    `(the machine is shared).\n\n` +
    `| | Parley runtime (campaign API) | bare call actors |\n` +
    `|---|---:|---:|\n` +
    `| ${SIZE} conversations, batches of ${BATCH} | ${f1(p.ms / 1000)} s: **${f1(rate)} conversations/s** ` +
    `(batches ${p.batchMs.map((x) => f1(x / 1000)).join(" / ")} s) | ${f1(b.ms / 1000)} s: ${f1(bareRate)} ` +
    `conversations/s |\n` +
    `| heap per conversation holding for an answer | **${kb(heldPer)}** ` +
    `(+${mib(p.heapHeld.heapUsed - p.heldBefore.heapUsed)} over ${p.heapHeld.live} live calls, ` +
    `${p.heapHeld.questions} pending questions) | ${kb(barePer)} ` +
    `(${b.held} actors) |\n` +
    `| ${HELD} questions approved → every conversation ended | ${f1(p.answerMs)} ms (HTTP decide ×${HELD}, ` +
    `bus, resume, campaign completed) | ${f1(b.answerMs)} ms |\n` +
    `| heap growth over the whole campaign, once completed (after a 10-conversation warm-up) | ` +
    `${kb(retained)} per conversation | — |\n` +
    `| outcomes | ${outcomes} | ${bareOutcomes} |\n` +
    `| wallet | ${p.wallet.before} → ${p.wallet.after} (minor units) | — |\n\n` +
    `**Through the runtime: ${(rate / bareRate).toFixed(2)}× the bare actors' conversations per second; ` +
    `${(heldPer / Math.max(1, barePer)).toFixed(1)}× their heap per held conversation.** ` +
    `Errors logged by the process: ${p.errors.length}` +
    (p.errors.length > 0 ? ` (first: \`${p.errors[0]!.slice(0, 200).replace(/`/g, "'")}\`)` : "") +
    "."
  process.stdout.write(`\n${md}\n`)
  if (process.env.BENCH_SIM_RECORD === "0") return
  record("sim", md)
}
