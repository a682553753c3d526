// The post-call analysis worker of a runtime process: claims due rows by lease and analyses a few at a
// time (src/analysis/analysis.service.ts); calls are queued at hangup, a background sweep repairs misses.
import { Duration, Effect, Fiber } from "effect"
import { claimDue, enqueueMissing, type SweepMark } from "../../src/analysis/analysis.repo.js"
import { type AnalysisDeps, analyseBatch } from "../../src/analysis/analysis.service.js"
import type { BusClient } from "../../src/platform/bus/bus.js"
import { Log } from "../../src/platform/Log.js"
import { periodic } from "../../src/platform/periodic.js"
import { RT_ANALYSIS_DUE, RUNTIME_QUEUE } from "../../src/platform/subjects.js"

export interface AnalysisWorker {
  /** A call ended here: some runtime process looks for work soon (one nudge per burst of hangups). */
  callEnded(): void
  /** Takes nothing more and waits (briefly) for the analyses in flight; their leases cover the rest. */
  stop(): Promise<void>
}

/**
 * A starting process's repair sweep covers calls ended this far back: as far as the version before
 * the hangup-time enqueue looked, so an upgrade from it leaves no call behind.
 */
const LOOKBACK_MS = 24 * 3_600_000
/** Then a sweep now and then over what ended since the last one (nothing should be missing). */
const REPAIR_EVERY_MS = 3_600_000
/**
 * Each sweep starts this far before the previous one began (which reached every call ended before
 * then): a call's ended_at is its process's clock at hangup and commits a moment later, possibly on
 * another host.
 */
const SWEEP_SLACK_MS = 10 * 60_000
/** Calls looked at per statement of a sweep; one statement per poll at most, never before a claim. */
const SWEEP_PAGE = 1_000
/** Hangups within this long make one nudge, sent after the calls' rows have most likely ended. */
const NUDGE_COALESCE_MS = 250
const STOP_WAIT_MS = 5_000

export function startAnalysisWorker(deps: AnalysisDeps & { readonly bus: BusClient }): AnalysisWorker {
  const { sql, log, config } = deps
  const { concurrency, pollMs, timeoutMs } = config.analysis
  // Past the attempt's own limit, so a live attempt keeps its row; a dead process's row comes back.
  const leaseMs = 2 * timeoutMs + 10_000
  /** The repair sweep: where its next page starts, or undefined between sweeps (next at `repairAt`). */
  let repairFrom: SweepMark | undefined
  let repairAt = 0
  /** When the current (or last) sweep began: it reaches every call that ended before then. */
  let sweepStarted: number | undefined
  let repairing: Promise<void> | undefined
  /** The groups being analysed, and how many calls they hold together. */
  const inFlight = new Set<Promise<unknown>>()
  let callsInFlight = 0
  let running = false
  let again = false
  let stopped = false
  let nudge: NodeJS.Timeout | undefined

  /** One page of the repair sweep, in the background: claims never wait for it. */
  function repairStep(): void {
    if (stopped || repairing !== undefined) return
    if (repairFrom === undefined) {
      if (Date.now() < repairAt) return
      const start = sweepStarted === undefined ? Date.now() - LOOKBACK_MS : sweepStarted - SWEEP_SLACK_MS
      sweepStarted = Date.now()
      repairFrom = { endedAt: new Date(start).toISOString(), callId: 0 }
    }
    const from = repairFrom
    repairing = enqueueMissing(sql, from, SWEEP_PAGE)
      .then((step) => {
        if (step.added > 0) {
          log.warn({ calls: step.added }, "enqueued ended calls that had no analysis row")
          void tick()
        }
        if (step.scanned < SWEEP_PAGE || step.next === undefined) {
          repairFrom = undefined
          repairAt = Date.now() + REPAIR_EVERY_MS
        } else repairFrom = step.next
      })
      .catch((err: unknown) => log.error({ err }, "call analysis repair sweep failed"))
      .finally(() => {
        repairing = undefined
      })
  }

  async function claimAndStart(): Promise<void> {
    const room = concurrency - callsInFlight
    if (room <= 0) return
    const claimed = await claimDue(sql, deps.me, leaseMs, room)
    if (claimed.length === 0) return
    if (claimed.length === room) again = true
    // The group is analysed together (one read, one store); its calls hold their slots until it ends.
    callsInFlight += claimed.length
    const p: Promise<unknown> = analyseBatch(deps, claimed)
      .then((results) => log.debug({ calls: claimed.length, results }, "call analyses"))
      .catch((err: unknown) =>
        log.error({ err, call_ids: claimed.map((c) => c.call_id) }, "call analyses failed unexpectedly"),
      )
      .finally(() => {
        inFlight.delete(p)
        callsInFlight -= claimed.length
        // Slots came free: take the next due rows now rather than at the next poll.
        if (!stopped) void tick()
      })
    inFlight.add(p)
  }

  async function tick(): Promise<void> {
    if (stopped) return
    if (running) {
      again = true
      return
    }
    running = true
    try {
      do {
        again = false
        await claimAndStart()
      } while (again && !stopped && callsInFlight < concurrency)
    } catch (err) {
      log.error({ err }, "claiming call analyses failed")
    } finally {
      running = false
    }
  }

  // The backstop poll (src/platform/periodic.ts), with a page of the repair sweep after each.
  const poller = Effect.runFork(
    periodic({
      what: "call analyses poll",
      every: Duration.millis(pollMs),
      tick: Effect.promise(() => tick().then(repairStep)),
    }).pipe(Effect.provideService(Log, log)),
  )
  const subscription = deps.bus.subscribe(RT_ANALYSIS_DUE, () => void tick(), { queue: RUNTIME_QUEUE })

  return {
    callEnded() {
      if (stopped || nudge !== undefined) return
      nudge = setTimeout(() => {
        nudge = undefined
        try {
          deps.bus.publish(RT_ANALYSIS_DUE)
        } catch (err) {
          log.warn({ err }, "could not nudge the call analysis workers")
        }
      }, NUDGE_COALESCE_MS)
      nudge.unref()
    },
    async stop() {
      stopped = true
      await Effect.runPromise(Fiber.interrupt(poller))
      if (nudge !== undefined) clearTimeout(nudge)
      await subscription.drain().catch(() => {}) // stopping: a bus already gone has nothing to drain
      let timer: NodeJS.Timeout | undefined
      await Promise.race([
        Promise.allSettled([...inFlight, ...(repairing === undefined ? [] : [repairing])]),
        new Promise((r) => {
          timer = setTimeout(r, STOP_WAIT_MS)
        }),
      ])
      clearTimeout(timer)
    },
  }
}
