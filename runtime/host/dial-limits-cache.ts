// How fast and how wide the runs driven in this process dial: one pacer for every run, a pacing key
// per carrier account at the account's own rate, and each workspace's dial limits (src/dialing/:
// its plan's or its own, under the DIALER_* ceilings), read when a run is claimed and every few
// seconds after, in one shared object per workspace that its run drivers read.
import type { Logger } from "pino"
import {
  carrierAccountCaps,
  type DialLimits,
  effectiveDialLimits,
  workspaceCaps,
} from "../../src/dialing/dial-limits.js"
import { workspaceDialCaps } from "../../src/dialing/dial-limits.repo.js"
import { Pacer } from "../../src/dialing/pacing.js"
import type { Config } from "../../src/platform/config.js"
import type { Sql } from "../../src/platform/Db.js"

export interface DialLimitsCache {
  readonly pacer: Pacer
  /** A carrier account's pacing key, paced at the account's own rate (the sim: none) under DIALER_CPS_PER_CARRIER. */
  carrierKey(account: string): string
  /** The workspace's limits, read now; the object is the one its drivers already hold, if any. */
  load(tenantId: number): Promise<{ current: DialLimits }>
  /** Reads again the limits of the workspaces whose runs are driven here, and forgets the others'. */
  refresh(driven: Iterable<{ readonly tenantId: number }>): Promise<void>
}

export const dialLimitsCache = (d: { sql: Sql; log: Logger; config: Config }): DialLimitsCache => {
  const { sql, log, config } = d
  const pacer = new Pacer({
    ratePerSecond: config.dialer.cpsPerTenant,
    burst: Math.max(1, Math.ceil(config.dialer.cpsPerTenant)),
  })
  const pacedCarriers = new Set<string>()
  const carrierKey = (account: string): string => {
    const key = `carrier:${account}`
    if (!pacedCarriers.has(key)) {
      pacedCarriers.add(key)
      const cps = Math.min(carrierAccountCaps(account).callsPerSecond ?? Infinity, config.dialer.cpsPerCarrier)
      pacer.configure(key, cps, Math.max(1, Math.ceil(cps)))
    }
    return key
  }
  const ceilings: DialLimits = {
    callsPerSecond: config.dialer.cpsPerTenant,
    maxConcurrentCalls: config.dialer.maxConcurrentPerTenant,
    maxConcurrentPerWorkflow: config.dialer.maxConcurrentPerWorkflow,
  }
  const tenantLimits = new Map<number, { current: DialLimits }>()
  const load = async (tenantId: number): Promise<{ current: DialLimits }> => {
    const caps = await workspaceDialCaps(sql, tenantId)
    const current = effectiveDialLimits(caps === undefined ? [] : [workspaceCaps(caps.plan, caps.own)], ceilings)
    const key = `tenant:${tenantId}`
    const ref = tenantLimits.get(tenantId)
    if (ref === undefined || ref.current.callsPerSecond !== current.callsPerSecond)
      pacer.configure(key, current.callsPerSecond, Math.max(1, Math.ceil(current.callsPerSecond)), Date.now())
    if (ref !== undefined) {
      ref.current = current
      return ref
    }
    const made = { current }
    tenantLimits.set(tenantId, made)
    return made
  }
  const refresh = async (driven: Iterable<{ readonly tenantId: number }>): Promise<void> => {
    const live = new Set([...driven].map((d) => d.tenantId))
    for (const id of tenantLimits.keys()) if (!live.has(id)) tenantLimits.delete(id)
    for (const id of live)
      await load(id).catch((err: unknown) => log.error({ err, tenant_id: id }, "loading dial limits failed"))
  }
  return { pacer, carrierKey, load, refresh }
}
