// How fast and how wide a workspace's runs may dial: the smallest of what its carrier account
// allows (per account: the simulator has no per-second limit, a telco_a account its documented
// rate), what its plan allows (dial_plans by plan tier, or the workspace's own limits an admin set,
// migrations/0026) and the deployment's ceilings (DIALER_* settings). Pure: no I/O.

/** What one layer allows; null: that layer sets no limit. */
export interface DialCaps {
  readonly callsPerSecond: number | null
  readonly maxConcurrentCalls: number | null
  readonly maxConcurrentPerWorkflow: number | null
}

/** The limits a workspace's runs dial under, every one of them finite. */
export interface DialLimits {
  readonly callsPerSecond: number
  readonly maxConcurrentCalls: number
  readonly maxConcurrentPerWorkflow: number
}

/** Calls a telco_a account may start per second (its documented default rate for an account). */
export const TELCO_A_CALLS_PER_SECOND = 3

/**
 * A carrier account's own limits, by the account key the provider resolver names
 * (src/providers/accounts.ts: `sim`, `telco_a:<sid>`): the simulator none, telco_a its rate.
 */
export function carrierAccountCaps(account: string): DialCaps {
  if (account.startsWith("telco_a")) {
    return { callsPerSecond: TELCO_A_CALLS_PER_SECOND, maxConcurrentCalls: null, maxConcurrentPerWorkflow: null }
  }
  return { callsPerSecond: null, maxConcurrentCalls: null, maxConcurrentPerWorkflow: null }
}

const least = (values: ReadonlyArray<number | null | undefined>, ceiling: number): number =>
  values.reduce<number>((m, v) => (v === null || v === undefined || !(v > 0) ? m : Math.min(m, v)), ceiling)

/** The smallest of every layer's limit, under the deployment's ceilings. */
export function effectiveDialLimits(layers: ReadonlyArray<DialCaps>, ceilings: DialLimits): DialLimits {
  return {
    callsPerSecond: least(
      layers.map((l) => l.callsPerSecond),
      ceilings.callsPerSecond,
    ),
    maxConcurrentCalls: Math.floor(
      least(
        layers.map((l) => l.maxConcurrentCalls),
        ceilings.maxConcurrentCalls,
      ),
    ),
    maxConcurrentPerWorkflow: Math.floor(
      least(
        layers.map((l) => l.maxConcurrentPerWorkflow),
        ceilings.maxConcurrentPerWorkflow,
      ),
    ),
  }
}

/** A workspace's own limits over its plan's: each one it set replaces the plan's. */
export const workspaceCaps = (plan: DialCaps, own: DialCaps | undefined): DialCaps => ({
  callsPerSecond: own?.callsPerSecond ?? plan.callsPerSecond,
  maxConcurrentCalls: own?.maxConcurrentCalls ?? plan.maxConcurrentCalls,
  maxConcurrentPerWorkflow: own?.maxConcurrentPerWorkflow ?? plan.maxConcurrentPerWorkflow,
})
