// The post-call analysis worker of a runtime process: it enqueues ended, answered calls (a sweep of
// the recent end of the calls index), claims due rows by lease and analyses a few at a time
// (src/analysis/analysis.service.ts). Every runtime process runs one; call_analyses decides who does what.

import { claimDue, enqueueEnded } from "../src/analysis/analysis.repo.js"
import { type AnalysisDeps, analyseBatch } from "../src/analysis/analysis.service.js"
import type { BusClient } from "../src/platform/bus/bus.js"
import { RT_ANALYSIS_DUE, RUNTIME_QUEUE } from "../src/platform/subjects.js"

export interface AnalysisWorker {
  /** A call ended here: some runtime process looks for work soon (one nudge per burst of hangups). */
  callEnded(): void
  /** Takes nothing more and waits (briefly) for the analyses in flight; their leases cover the rest. */
  stop(): Promise<void>
}

/** A restarted process looks this far back for ended calls lacking a row (none is lost to a restart). */
const LOOKBACK_MS = 24 * 3_600_000
/**
 * The sweep starts again this far before its previous start: a call's ended_at is its process's
 * clock at hangup and commits a moment later, possibly on another host.
 */
const SWEEP_SLACK_MS = 60_000
/** Now and then the whole look-back window is swept again, in case a sweep failed. */
const FULL_SWEEP_MS = 10 * 60_000
const SWEEP_BATCH = 500
/** Hangups within this long make one nudge, sent after the calls' rows have most likely ended. */
const NUDGE_COALESCE_MS = 250
const STOP_WAIT_MS = 5_000

export function startAnalysisWorker(deps: AnalysisDeps & { readonly bus: BusClient }): AnalysisWorker {
  const { sql, log, config } = deps
  const { concurrency, pollMs, timeoutMs } = config.analysis
  // Past the attempt's own limit, so a live attempt keeps its row; a dead process's row comes back.
  const leaseMs = 2 * timeoutMs + 10_000
  let sweepFrom = new Date(Date.now() - LOOKBACK_MS)
  let fullSweepAt = Date.now() + FULL_SWEEP_MS
  /** The groups being analysed, and how many calls they hold together. */
  const inFlight = new Set<Promise<unknown>>()
  let callsInFlight = 0
  let running = false
  let again = false
  let stopped = false
  let nudge: NodeJS.Timeout | undefined

  async function sweep(): Promise<void> {
    if (Date.now() >= fullSweepAt) {
      sweepFrom = new Date(Date.now() - LOOKBACK_MS)
      fullSweepAt = Date.now() + FULL_SWEEP_MS
    }
    const started = Date.now()
    const added = await enqueueEnded(sql, sweepFrom, SWEEP_BATCH)
    // A full batch may have left more behind: the next sweep starts from the same point.
    if (added < SWEEP_BATCH) sweepFrom = new Date(Math.max(sweepFrom.getTime(), started - SWEEP_SLACK_MS))
    else again = true
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
        await sweep()
        await claimAndStart()
      } while (again && !stopped && callsInFlight < concurrency)
    } catch (err) {
      log.error({ err }, "call analysis sweep failed")
    } finally {
      running = false
    }
  }

  const poll = setInterval(() => void tick(), pollMs)
  poll.unref()
  const subscription = deps.bus.subscribe(RT_ANALYSIS_DUE, () => void tick(), { queue: RUNTIME_QUEUE })
  void tick()

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
      clearInterval(poll)
      if (nudge !== undefined) clearTimeout(nudge)
      await subscription.drain().catch(() => {})
      let timer: NodeJS.Timeout | undefined
      await Promise.race([
        Promise.allSettled([...inFlight]),
        new Promise((r) => {
          timer = setTimeout(r, STOP_WAIT_MS)
        }),
      ])
      clearTimeout(timer)
    },
  }
}
