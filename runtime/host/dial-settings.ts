// The settings a run is driven with, from the deployment's config: a campaign's, a public demo's
// and a rehearsal's (src/rehearsals/), which differ in attempts, calling windows and holds.
import type { Config } from "../../src/platform/config.js"
import type { DialerSettings } from "../actors/run-driver.js"

/** A campaign's settings: the deployment's DIALER_*, approval and lease settings. */
export const dialerSettings = (config: Config): DialerSettings => ({
  timeScale: config.simTimeScale,
  callingHoursAny: config.callingHoursAny,
  leaseMs: config.runLeaseMs,
  perWorkflowConcurrency: config.dialer.maxConcurrentPerWorkflow,
  perTenantConcurrency: config.dialer.maxConcurrentPerTenant,
  maxAttempts: config.dialer.maxAttempts,
  retryBackoffMs: config.dialer.retryBackoffMs,
  ringTimeoutMs: 45_000,
  approvalHoldMs: config.approvalHoldMs,
  approvalHoldFloorMs: config.approvalHoldFloorMs,
  approvalTtlMs: config.approvalTtlMs,
})

// A demo is now or never: its callee is not dialled again for a busy line or a callback.
export const demoDialerSettings = (settings: DialerSettings): DialerSettings => ({ ...settings, maxAttempts: 1 })

/**
 * A simulation campaign's settings: its time scale; one attempt per callee (busy or no answer is an
 * outcome to count, not a retry); every calling window open; and a question held for the operator
 * SIM_APPROVAL_HOLD_MS of real time whatever the scale (the call machine multiplies the hold by it),
 * expiring with the hold so the campaign never waits on a question its call gave up on.
 */
export const simDialerSettings = (settings: DialerSettings, config: Config, timeScale: number): DialerSettings => ({
  ...settings,
  timeScale,
  callingHoursAny: true,
  maxAttempts: 1,
  approvalHoldMs: config.simApprovalHoldMs / Math.max(timeScale, 0.001),
  approvalTtlMs: config.simApprovalHoldMs,
})
