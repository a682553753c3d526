// Run leases: a runtime process owns a run while its lease row in Postgres is fresh. It claims runs
// that need an owner (one given run, or any), renews the leases (and its dial slots) of the runs it
// drives, and tells a driver whose lease another process took to stop. The lease row decides, never
// a message: any number of processes may claim side by side.
import type { Logger } from "pino"
import * as calls from "../../src/calls/calls.repo.js"
import type { Sql } from "../../src/platform/Db.js"
import * as repo from "../../src/runs/runs.repo.js"
import type { RunDriver } from "./run-driver.js"

export interface RunLeases {
  /** Claims runs that need an owner (only `onlyRunId`, when given) and drives each. */
  claim(onlyRunId?: number): Promise<void>
  /** Extends the leases of the runs driven here; a run whose lease was lost stops here. */
  renew(): Promise<void>
  /** Resolves once a claim in progress is over. */
  settled(): Promise<void>
}

export const runLeases = (o: {
  readonly sql: Sql
  readonly log: Logger
  readonly me: string
  readonly leaseMs: number
  /** The runs this process drives, by run id. */
  readonly drivers: ReadonlyMap<number, RunDriver>
  readonly stopping: () => boolean
  /** Starts driving a claimed run. */
  readonly drive: (claimed: repo.ClaimedRun, setup: repo.RunSetup) => Promise<void>
}): RunLeases => {
  const { sql, log, me, leaseMs, drivers } = o
  let claiming: Promise<void> | undefined

  const claim = (onlyRunId?: number): Promise<void> => {
    if (claiming !== undefined) return claiming.then(() => (onlyRunId === undefined ? undefined : claim(onlyRunId)))
    // Cleared by `finally`, which always runs after this assignment. A `finally` inside the async
    // function ran before it when the function returned without awaiting (stopping already): the
    // settled promise then stayed here, and a claim for one run waited on it, called itself, and
    // waited again, forever and in microtasks only — a process that stopped while a wake or a call's
    // end asked for a claim ran out of memory.
    claiming = claimRuns(onlyRunId).finally(() => {
      claiming = undefined
    })
    return claiming
  }

  const claimRuns = async (onlyRunId: number | undefined): Promise<void> => {
    try {
      while (!o.stopping()) {
        const claimed = await repo.claimRun(sql, me, leaseMs, onlyRunId)
        if (claimed === undefined) break
        // Claimed back by this process while its driver still runs it (the lease lapsed while Postgres
        // was away and could not be renewed): the claim renewed the lease, nothing more. A second driver
        // would take the first one's calls for gone and count them ended while they are still talking.
        const current = drivers.get(claimed.id)
        if (current !== undefined && !current.lost) {
          log.warn({ run_id: claimed.id }, "run lease lapsed and was claimed back; its driver goes on")
          if (onlyRunId !== undefined) break
          continue
        }
        const setup = await repo.loadRunSetup(sql, claimed.id)
        if (setup === undefined) {
          await repo.releaseRun(sql, me, claimed.id)
          break
        }
        await o.drive(claimed, setup)
        if (onlyRunId !== undefined) break
      }
    } catch (err) {
      log.error({ err }, "claiming runs failed")
    }
  }

  const renew = async (): Promise<void> => {
    const ids = [...drivers.keys()]
    if (ids.length === 0) return
    try {
      const kept = await repo.renewLeases(sql, me, ids, leaseMs)
      await calls.renewDialSlots(sql, me, leaseMs)
      for (const id of ids) if (!kept.has(id)) drivers.get(id)?.loseLease()
    } catch (err) {
      log.error({ err }, "renewing run leases failed")
    }
  }

  // `claiming` logs its own failure and never rejects: the catch only keeps the type honest.
  return { claim, renew, settled: async () => void (await claiming?.catch(() => {})) }
}
