// bench/voice: N concurrent calls heard as audio, through an api process and a runtime process on
// real PostgreSQL and NATS, with the offline providers (flite, WebRTC VAD, PocketSphinx listening for
// the simulated callees' lines). The simulated carrier (in the runtime process, as MEDIA_STREAMS=all
// runs it) connects each answered call's media stream to the api's WebSocket and sends and receives
// 50 frames a second each way for the whole call; callees 3–5 agree, 6 declines and speaks over the
// agent. Measured over a steady window with every call up: event-loop delay (p99, max) of each
// process, CPU per call-second and memory per call; over the whole run, from the stored turns: end of
// the callee's speech → the agent's first audio (p50, p95) and the pipeline's own part of it (the
// turn minus the endpointing window, recognition and synthesis); from the simulated carrier's
// metrics: barge-in → clear (p95) and agent frames more than a frame behind their sentence's pace.
// Baseline, in the same script: the same N calls with MEDIA_STREAMS=none (text turns, no audio).

import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { redact } from "../src/platform/Db.js"
import { freePort } from "../test/support/nginx.js"
import { bigRunEnv, setUpRun } from "./dialer.js"
import {
  cpuMicros,
  machine,
  record,
  type ScratchDatabase,
  type ServerProcess,
  scratchDatabase,
  startProcess,
} from "./lib.js"

const CALLS = Number(process.env.BENCH_VOICE_CALLS ?? 200)
/** Seconds of steady state (every call up) over which delay, CPU and memory are measured. */
const WINDOW_S = Number(process.env.BENCH_VOICE_WINDOW_S ?? 20)
const LIMIT_S = Number(process.env.BENCH_VOICE_LIMIT_S ?? 240)
/** Real time: a simulated call's audio runs at the simulator's time scale, and the bench is of real-time audio. */
const SCALE = "1"
const DIGITS = [3, 4, 5, 6]
const GOAL = { overheadP95: 60, clearP95: 200, totalP50: 800, eldP99: 20 }

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const f0 = (x: number) => x.toFixed(0)
const f1 = (x: number) => x.toFixed(1)

/** A scrape of /metrics: each sample by name and labels (`name{a="b"}`). */
async function scrape(port: number): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
  const out = new Map<string, number>()
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue
    const at = line.lastIndexOf(" ")
    out.set(line.slice(0, at), Number(line.slice(at + 1)))
  }
  return out
}

const rssOf = (pid: number): number =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) * 1024

const percentile = (xs: number[], p: number): number => {
  if (xs.length === 0) return Number.NaN
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!
}

/** The p-th percentile of a scraped histogram (the upper bound of its bucket). */
function histogramPercentile(m: Map<string, number>, name: string, p: number): number {
  const buckets = [...m.entries()]
    .filter(([k]) => k.startsWith(`${name}_bucket{`))
    .map(([k, v]) => ({
      le: k.includes('le="+Inf"') ? Number.POSITIVE_INFINITY : Number(/le="([^"]+)"/.exec(k)![1]),
      v,
    }))
    .sort((a, b) => a.le - b.le)
  const total = buckets.at(-1)?.v ?? 0
  if (total === 0) return Number.NaN
  return buckets.find((b) => b.v >= (p / 100) * total)!.le
}

interface ProcessWindow {
  readonly eldP99: number
  readonly eldMax: number
  readonly cpuS: number
  readonly rssIdle: number
  readonly rssPeak: number
}

interface Measured {
  readonly media: boolean
  readonly api: ProcessWindow
  readonly runtime: ProcessWindow
  readonly live: number
  readonly windowS: number
  readonly seconds: number
  readonly outcomes: Record<string, number>
  readonly totals: number[]
  readonly overheads: number[]
  readonly stages: Record<string, number[]>
  readonly clearP95: number
  readonly clears: number
  readonly framesOnTime: number
  readonly framesLate: number
  readonly interrupted: number
}

async function measure(db: ScratchDatabase, natsUrl: string, media: boolean): Promise<Measured> {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-bench-voice-"))
  const [apiMetrics, runtimeMetrics] = [await freePort(), await freePort()]
  const env = {
    ...bigRunEnv(CALLS),
    DATABASE_URL: db.url,
    NATS_URL: natsUrl,
    DATA_DIR: dataDir,
    LOG_LEVEL: "info",
    SIM_TIME_SCALE: SCALE,
    MEDIA_STREAMS: media ? "all" : "none",
    // About as many decoders as callees speak at once (a quarter of the calls), loaded before the calls.
    SPEECH_DECODERS_WARM: String(Math.min(64, Math.ceil(CALLS / 3))),
    // Nobody is asked anything: callees 3–6 never propose.
    APPROVAL_HOLD_MS: "20000",
    BUS_NAMESPACE: `voice${media ? "m" : "t"}${process.pid}`,
  }
  let api: ServerProcess | undefined
  let runtime: ServerProcess | undefined
  try {
    const prof0 = process.env.BENCH_VOICE_PROFILE
    const apiProfile = prof0 === undefined || !media ? [] : ["--cpu-prof", `--cpu-prof-dir=${prof0}/api`]
    api = await startProcess([...apiProfile, "--import", "tsx", "src/main/main.ts", "serve", "--role", "api"], {
      ...env,
      METRICS_PORT: String(apiMetrics),
    })
    const base = `http://127.0.0.1:${api.port}`
    // BENCH_VOICE_PROFILE=DIR: CPU profiles of both processes (the figures of such a run are off).
    const prof = process.env.BENCH_VOICE_PROFILE
    const profile = prof === undefined || !media ? [] : ["--cpu-prof", `--cpu-prof-dir=${prof}`]
    runtime = await startProcess([...profile, "--import", "tsx", "src/main/main.ts", "serve", "--role", "runtime"], {
      ...env,
      METRICS_PORT: String(runtimeMetrics),
      MEDIA_STREAM_URL: `ws://127.0.0.1:${api.port}`,
    })
    const pids = { api: api.child.pid!, runtime: runtime.child.pid! }
    const phones = Array.from({ length: CALLS }, (_, i) => `+1415${3_000_000 + i * 10 + DIGITS[i % DIGITS.length]!}`)
    const idle = { api: rssOf(pids.api), runtime: rssOf(pids.runtime) }
    const t0 = performance.now()
    const { runId } = await setUpRun(base, join(dataDir, "outbox.jsonl"), phones, async () => {})
    // The ramp: until every call is up (answered and talking), then the window.
    const liveNow = async () => (await scrape(runtimeMetrics)).get("parley_runtime_live_calls") ?? 0
    const connected = async () =>
      Number(
        (
          await db.sql<[{ n: number }]>`
            select count(*)::int as n from calls where run_id = ${runId} and status = 'connected'`
        )[0].n,
      )
    for (;;) {
      if ((await connected()) >= CALLS * 0.95) break
      if ((performance.now() - t0) / 1000 > LIMIT_S) throw new Error("the calls never all connected")
      await sleep(250)
    }
    await Promise.all([scrape(apiMetrics), scrape(runtimeMetrics)]) // resets the event-loop histograms
    const cpu0 = { api: cpuMicros(pids.api), runtime: cpuMicros(pids.runtime) }
    const w0 = performance.now()
    let liveSum = 0
    let liveN = 0
    const peak = { api: 0, runtime: 0 }
    while ((performance.now() - w0) / 1000 < WINDOW_S) {
      await sleep(1000)
      liveSum += await connected()
      liveN++
      peak.api = Math.max(peak.api, rssOf(pids.api))
      peak.runtime = Math.max(peak.runtime, rssOf(pids.runtime))
    }
    const windowS = (performance.now() - w0) / 1000
    const [am, rm] = await Promise.all([scrape(apiMetrics), scrape(runtimeMetrics)])
    const cpu1 = { api: cpuMicros(pids.api), runtime: cpuMicros(pids.runtime) }
    const win = (m: Map<string, number>, who: "api" | "runtime"): ProcessWindow => ({
      eldP99: (m.get('parley_event_loop_delay_seconds{stat="p99"}') ?? 0) * 1000,
      eldMax: (m.get('parley_event_loop_delay_seconds{stat="max"}') ?? 0) * 1000,
      cpuS: (cpu1[who] - cpu0[who]) / 1e6,
      rssIdle: idle[who],
      rssPeak: peak[who],
    })
    // The rest of the run, to its end.
    for (;;) {
      const [r] = await db.sql<[{ status: string }]>`select status from runs where id = ${runId}`
      if (r.status === "completed" && (await liveNow()) === 0) break
      if ((performance.now() - t0) / 1000 > LIMIT_S) throw new Error("the run did not complete")
      await sleep(500)
    }
    const seconds = (performance.now() - t0) / 1000
    const end = await scrape(runtimeMetrics)
    const outcomes: Record<string, number> = {}
    for (const o of await db.sql<{ outcome: string; n: number }[]>`
      select outcome, count(*)::int as n from run_targets where run_id = ${runId} group by outcome`)
      outcomes[o.outcome] = o.n
    const turns = await db.sql<{ latency_ms: Record<string, number> | null; interrupted: boolean }[]>`
      select latency_ms, interrupted from turns where run_id = ${runId} and speaker = 'agent'`
    const lat = turns.flatMap((t) => (t.latency_ms === null ? [] : [t.latency_ms]))
    const stages: Record<string, number[]> = {}
    for (const k of ["endpointing", "transcript", "model", "synthesis", "hop"]) stages[k] = lat.map((l) => l[k]!)
    return {
      media,
      api: win(am, "api"),
      runtime: win(rm, "runtime"),
      live: liveSum / Math.max(1, liveN),
      windowS,
      seconds,
      outcomes,
      totals: lat.map((l) => l.total!),
      overheads: lat.map((l) => l.total! - l.endpointing! - l.transcript! - l.synthesis!),
      stages,
      clearP95: histogramPercentile(end, "parley_sim_barge_in_clear_seconds", 95) * 1000,
      clears: end.get("parley_sim_barge_in_clear_seconds_count") ?? 0,
      framesOnTime: end.get('parley_sim_agent_frames_total{timing="on_time"}') ?? 0,
      framesLate: end.get('parley_sim_agent_frames_total{timing="late"}') ?? 0,
      interrupted: turns.filter((t) => t.interrupted).length,
    }
  } finally {
    await runtime?.stop()
    await api?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

export async function benchVoice(): Promise<void> {
  const baseUrl = process.env.DATABASE_URL
  const natsUrl = process.env.NATS_URL
  if (baseUrl === undefined || natsUrl === undefined) {
    process.stdout.write("bench/voice needs DATABASE_URL and NATS_URL (api and runtime processes): skipped\n")
    return
  }
  const loadBefore = loadavg()[0]!
  const results: Measured[] = []
  for (const media of [false, true]) {
    const db = await scratchDatabase(baseUrl, "bench_voice")
    try {
      // Migrated by the api process as it starts (the runtime waits for it).
      results.push(await measure(db, natsUrl, media))
    } finally {
      await db.drop()
    }
    const r = results.at(-1)!
    process.stdout.write(
      `  ${media ? "audio" : "text"}: ${f0(r.live)} calls up, api eld p99 ${f1(r.api.eldP99)} ms, runtime eld p99 ` +
        `${f1(r.runtime.eldP99)} ms, cpu ${f1(r.api.cpuS + r.runtime.cpuS)} s in ${f0(r.windowS)} s\n`,
    )
  }
  const [text, audio] = results as [Measured, Measured]
  const callSeconds = (m: Measured) => m.live * m.windowS
  const perCallS = (m: Measured, w: ProcessWindow) => (w.cpuS / callSeconds(m)) * 1000
  const memPerCall = (w: ProcessWindow, m: Measured) => (w.rssPeak - w.rssIdle) / Math.max(1, m.live)
  const p = (xs: number[], q: number) => f0(percentile(xs, q))
  const late = audio.framesLate / Math.max(1, audio.framesLate + audio.framesOnTime)
  const ok = (b: boolean) => (b ? "met" : "**not met**")
  const overheadP95 = percentile(audio.overheads, 95)
  const eldWorst = Math.max(audio.api.eldP99, audio.runtime.eldP99)
  const row = (cells: readonly string[]) => `| ${cells.join(" | ")} |`
  const eldCell = (w: ProcessWindow) => `${f1(w.eldP99)} / ${f1(w.eldMax)} ms`
  const times = (x: number, y: number) => `${f1(x / Math.max(0.01, y))}×`
  const eldGoal = (w: ProcessWindow) => `p99 < ${GOAL.eldP99} ms: ${ok(w.eldP99 < GOAL.eldP99)}`
  const kib = (b: number) => `${f0(b / 1024)}`
  const stage = (k: string) => `${k} ${p(audio.stages[k]!, 50)}/${p(audio.stages[k]!, 95)}`
  const p50 = percentile(audio.totals, 50)
  const lines = [
    `### bench/voice — ${CALLS} concurrent calls heard as audio (api + runtime processes, real PostgreSQL + NATS)`,
    "",
    `Machine: ${machine()}; load average before: ${f1(loadBefore)}. Database: ${redact(baseUrl)}.`,
    "Offline providers: flite (Debian's when installed), WebRTC VAD, PocketSphinx with the simulated callees'",
    "phrase list (worker threads). The simulated carrier runs in the runtime process. Baseline: the same calls",
    `as text turns (MEDIA_STREAMS=none), same script. Window: ${f0(audio.windowS)} s with ${f0(audio.live)} calls up`,
    `(baseline ${f0(text.live)}).`,
    "",
    row(["", "text (baseline)", "audio", "audio / text", "goal"]),
    row(["---", "---:", "---:", "---:", "---"]),
    row([
      "api event-loop p99 / max",
      eldCell(text.api),
      eldCell(audio.api),
      times(audio.api.eldP99, text.api.eldP99),
      eldGoal(audio.api),
    ]),
    row([
      "runtime event-loop p99 / max",
      eldCell(text.runtime),
      eldCell(audio.runtime),
      times(audio.runtime.eldP99, text.runtime.eldP99),
      eldGoal(audio.runtime),
    ]),
    row([
      "api CPU per call-second",
      `${f1(perCallS(text, text.api))} ms`,
      `${f1(perCallS(audio, audio.api))} ms`,
      times(perCallS(audio, audio.api), perCallS(text, text.api)),
      "",
    ]),
    row([
      "runtime CPU per call-second",
      `${f1(perCallS(text, text.runtime))} ms`,
      `${f1(perCallS(audio, audio.runtime))} ms`,
      times(perCallS(audio, audio.runtime), perCallS(text, text.runtime)),
      "",
    ]),
    row([
      "memory per call, api / runtime (peak RSS over idle)",
      `${kib(memPerCall(text.api, text))} / ${kib(memPerCall(text.runtime, text))} KiB`,
      `${kib(memPerCall(audio.api, audio))} / ${kib(memPerCall(audio.runtime, audio))} KiB`,
      "",
      "",
    ]),
    row(["outcomes", JSON.stringify(text.outcomes), JSON.stringify(audio.outcomes), "", ""]),
    "",
    `Turns answering the callee (${audio.totals.length}), end of speech → first agent audio: p50 ${f0(p50)} ms,`,
    `p95 ${p(audio.totals, 95)} ms (goal p50 < ${GOAL.totalP50} ms: ${ok(p50 < GOAL.totalP50)};`,
    `${f1(p50 / 500)}× the 500 ms endpointing window). Stages p50/p95 (ms): ${stage("endpointing")},`,
    `${stage("transcript")}, ${stage("model")}, ${stage("synthesis")}, ${stage("hop")}.`,
    "Pipeline overhead (turn − endpointing − transcript − synthesis; the simulated model's own time in it):",
    `p95 ${f0(overheadP95)} ms (goal < ${GOAL.overheadP95} ms: ${ok(overheadP95 < GOAL.overheadP95)}).`,
    `Barge-ins: ${audio.interrupted} agent turns stored interrupted, ${audio.clears} clears timed; callee speech`,
    `→ clear p95 ≤ ${f0(audio.clearP95)} ms (goal < ${GOAL.clearP95} ms: ${ok(audio.clearP95 < GOAL.clearP95)}).`,
    `Agent frames more than a frame behind their sentence's pace: ${audio.framesLate} of`,
    `${audio.framesLate + audio.framesOnTime} (${(late * 100).toFixed(2)}%). Event loop p99 < ${GOAL.eldP99} ms in`,
    `every process: ${ok(eldWorst < GOAL.eldP99)}. Whole run: ${f0(audio.seconds)} s (text ${f0(text.seconds)} s).`,
  ]
  const md = `\n${lines.join("\n")}\n`
  process.stdout.write(md)
  record(`voice-${CALLS}`, md)
}
