// The measured process of bench/dialer (run with --expose-gc): either the real `--role all` Parley
// process, probed over IPC (gc'd heap, event-loop delay, live legs and calls), or N bare XState actors.
//
//   node --expose-gc --import tsx bench/servers/dialer-host.ts parley   (config from the environment;
//     BENCH_HOST_ROLE=runtime for the runtime role alone, no HTTP)
//   node --expose-gc --import tsx bench/servers/dialer-host.ts bare N SCALE WINDOW_S
// For finding where the time and memory go: BENCH_DIALER_PROFILE=DIR writes CPU profiles of the
// ramp and of the peak window there, BENCH_DIALER_HEAP_SNAPSHOT=DIR heap snapshots before the run
// and at the peak (diff them per call); both slow the process down, so figures from such runs are off.
import { writeFileSync } from "node:fs"
import { Session } from "node:inspector/promises"
import { join } from "node:path"
import { type IntervalHistogram, monitorEventLoopDelay } from "node:perf_hooks"
import { writeHeapSnapshot } from "node:v8"
import { Effect } from "effect"
import { type AnyActorRef, assign, createActor, setup } from "xstate"
import { serve } from "../../src/main/serve.js"
import { loadConfig } from "../../src/platform/config.js"
import { connectPostgres, Db, type Sql } from "../../src/platform/Db.js"
import { makeLogger } from "../../src/platform/Log.js"
import { Telephony } from "../../src/providers/Telephony.js"

/** What the parent asks for; every request carries an id the reply echoes. */
export type HostRequest =
  | { id: number; cmd: "heap" }
  | { id: number; cmd: "watch"; runId: number }
  | { id: number; cmd: "window-start" }
  | { id: number; cmd: "window-end" }
  | { id: number; cmd: "turns" }
  | { id: number; cmd: "snapshot"; name: string }
  | { id: number; cmd: "profile"; name: string }
  | { id: number; cmd: "stop" }

export interface Heap {
  readonly heapUsed: number
  readonly rss: number
  readonly external: number
  readonly gcMs: number
}

/** Pushed every SAMPLE_MS once a run is watched. */
export interface HostSample {
  readonly type: "sample"
  readonly t: number
  /** Sim legs not yet ended (dialing, ringing or connected). */
  readonly legs: number
  /** Calls rows between beginAttempt and finishAttempt: a call actor each. */
  readonly live: number
  /** Calls rows of the run: attempts started. */
  readonly dialed: number
  /** Pending approvals of the run: an approval actor each. */
  readonly approvals: number
  readonly heapUsed: number
  /** Event-loop delay over the last sample interval, ms. */
  readonly eldP99: number
  readonly eldMax: number
}

export interface EldStats {
  readonly p50: number
  readonly p99: number
  readonly max: number
  readonly mean: number
}

export interface BareResult {
  readonly type: "bare"
  readonly actors: number
  readonly startMs: number
  readonly heapBefore: Heap
  readonly heapAfter: Heap
  readonly alive: number
  readonly eld: EldStats
  readonly transitions: number
  readonly windowS: number
}

const SAMPLE_MS = 250
const send = (m: unknown) => process.send!(m)
const ms = (ns: number) => ns / 1e6
const eldStats = (h: IntervalHistogram): EldStats => ({
  p50: ms(h.percentile(50)),
  p99: ms(h.percentile(99)),
  max: ms(h.max),
  mean: ms(h.mean),
})

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error("dialer-host needs node --expose-gc")

/** Heap after two full collections (the second takes what the first's finalisers freed). */
function heap(): Heap {
  const t0 = performance.now()
  gc!()
  gc!()
  const gcMs = performance.now() - t0
  const m = process.memoryUsage()
  return { heapUsed: m.heapUsed, rss: m.rss, external: m.external, gcMs }
}

// ---- baseline: bare actors, timers only ---------------------------------------------------------

/** A call's shape without its work: ring, then a turn every few seconds, then hang up. */
const bareMachine = setup({
  types: {} as {
    context: { turns: number; ringMs: number; turnMs: number }
    input: { ringMs: number; turnMs: number }
  },
  delays: { ring: ({ context }) => context.ringMs, turn: ({ context }) => context.turnMs },
}).createMachine({
  id: "bare",
  context: ({ input }) => ({ turns: 0, ringMs: input.ringMs, turnMs: input.turnMs }),
  initial: "ringing",
  states: {
    ringing: { after: { ring: "talking" } },
    talking: {
      after: {
        turn: [
          { guard: ({ context }) => context.turns >= 1_000_000, target: "ended" },
          { target: "talking", reenter: true, actions: assign({ turns: ({ context }) => context.turns + 1 }) },
        ],
      },
    },
    ended: { type: "final" },
  },
})

async function bare(n: number, scale: number, windowS: number): Promise<void> {
  const before = heap()
  const actors: AnyActorRef[] = []
  const t0 = performance.now()
  for (let i = 0; i < n; i++) {
    // The sim's ranges: ring 3–8 s, an utterance every 1.5–4 s, both times the scale.
    const actor = createActor(bareMachine, {
      input: { ringMs: (3000 + ((i * 7919) % 5000)) * scale, turnMs: (1500 + ((i * 104729) % 2500)) * scale },
    })
    actor.start()
    actors.push(actor)
  }
  const startMs = performance.now() - t0
  // Let every actor ring and start talking before the window opens.
  await new Promise((r) => setTimeout(r, 8000 * scale + 500))
  const h = monitorEventLoopDelay({ resolution: 1 })
  h.enable()
  await new Promise((r) => setTimeout(r, windowS * 1000))
  h.disable()
  const eld = eldStats(h)
  const after = heap()
  const alive = actors.filter((a) => a.getSnapshot().status === "active").length
  const transitions = actors.reduce((s, a) => s + (a.getSnapshot().context as { turns: number }).turns, 0)
  for (const a of actors) a.stop()
  send({
    type: "bare",
    actors: n,
    startMs,
    heapBefore: before,
    heapAfter: after,
    alive,
    eld,
    transitions,
    windowS,
  } satisfies BareResult)
  process.disconnect()
}

// ---- the real process ---------------------------------------------------------------------------

/** CPU profiles of consecutive stretches (ramp, peak), written to BENCH_DIALER_PROFILE when set. */
function profiler(dir: string | undefined) {
  if (dir === undefined || dir === "") return { next: async (_name: string) => {}, end: async () => {} }
  const session = new Session()
  session.connect()
  let current: string | undefined
  const stop = async () => {
    if (current === undefined) return
    const { profile } = await session.post("Profiler.stop")
    writeFileSync(join(dir, `dialer-${current}.cpuprofile`), JSON.stringify(profile))
    current = undefined
  }
  return {
    next: async (name: string) => {
      await stop()
      await session.post("Profiler.enable")
      await session.post("Profiler.setSamplingInterval", { interval: 500 })
      await session.post("Profiler.start")
      current = name
    },
    end: stop,
  }
}

async function parley(): Promise<void> {
  const config = loadConfig(process.env)
  // BENCH_HOST_ROLE=runtime: the runtime alone (bench/ramp puts an api process beside it).
  const role = process.env.BENCH_HOST_ROLE === "runtime" ? "runtime" : "all"
  const logger = makeLogger(config, { role }, { buffered: true })
  const running = await serve({ role, config, logger })
  const telephony = await running.runtime.runPromise(Telephony)
  const appSql = await running.runtime.runPromise(Effect.map(Db, (d) => d.sql))
  // Counting on its own connection, so the probe never waits behind the dialer's pool.
  const probeSql: Sql = config.databaseUrl !== undefined ? connectPostgres(config.databaseUrl, 1) : appSql

  const profile = profiler(process.env.BENCH_DIALER_PROFILE)
  const tick = monitorEventLoopDelay({ resolution: 1 })
  const win = monitorEventLoopDelay({ resolution: 1 })
  tick.enable()
  let runId: number | undefined
  /** Samples are sent once a run is watched, or from the first window on (bench/ramp's idle baseline). */
  let sampling = false
  let counting = false
  let last = { live: 0, dialed: 0, approvals: 0 }
  const t0 = Date.now()
  const sampler = setInterval(() => {
    const eld = { p99: ms(tick.percentile(99)), max: ms(tick.max) }
    tick.reset()
    if (runId !== undefined && !counting) {
      counting = true
      void probeSql<[{ live: number; dialed: number; approvals: number }]>`
        select count(*) filter (where status <> 'ended')::int as live, count(*)::int as dialed,
               (select count(*)::int from approvals where run_id = ${runId} and status = 'pending') as approvals
        from calls where run_id = ${runId}`
        .then(([r]) => (last = r))
        .catch(() => {})
        .finally(() => (counting = false))
    }
    if (runId === undefined && !sampling) return
    send({
      type: "sample",
      t: Date.now() - t0,
      legs: telephony.activeLegs,
      ...last,
      heapUsed: process.memoryUsage().heapUsed,
      eldP99: eld.p99,
      eldMax: eld.max,
    } satisfies HostSample)
  }, SAMPLE_MS)

  process.on("message", (raw) => {
    const m = raw as HostRequest
    const reply = (body: Record<string, unknown>) => send({ type: "reply", id: m.id, ...body })
    switch (m.cmd) {
      case "heap": {
        // Legs and calls counted right before and after the collection: they move little in that time.
        const legsBefore = telephony.activeLegs
        const h = heap()
        return reply({ heap: h, legs: Math.round((legsBefore + telephony.activeLegs) / 2) })
      }
      case "watch":
        runId = m.runId
        void profile.next("ramp")
        return reply({})
      case "window-start":
        sampling = true
        win.reset()
        win.enable()
        if (runId !== undefined) void profile.next("peak")
        return reply({})
      case "profile":
        return void profile.next(m.name).then(() => reply({}))
      case "window-end":
        win.disable()
        return void profile.end().then(() => reply({ eld: eldStats(win) }))
      case "turns":
        return void probeSql<[{ n: number }]>`select count(*)::int as n from turns where run_id = ${runId ?? 0}`.then(
          ([r]) => reply({ turns: r.n }),
        )
      case "snapshot": {
        const dir = process.env.BENCH_DIALER_HEAP_SNAPSHOT
        return reply({ path: dir ? writeHeapSnapshot(join(dir, `dialer-${m.name}.heapsnapshot`)) : null })
      }
      case "stop":
        clearInterval(sampler)
        tick.disable()
        void (async () => {
          const t = performance.now()
          await running.stop()
          if (probeSql !== appSql) await probeSql.end({ timeout: 2 })
          reply({ stopMs: performance.now() - t })
          process.disconnect()
        })()
    }
  })
  send({ type: "ready", port: running.port, instance: running.instance.id })
}

const [mode, ...args] = process.argv.slice(2)
if (mode === "bare") await bare(Number(args[0]), Number(args[1]), Number(args[2]))
else await parley()
