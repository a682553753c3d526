// The host's periodic work, each a loop (src/platform/periodic.ts) in the host's scope, which its
// stop() closes: claiming runs, renewing leases, sweeping expired approvals and hang-ups a carrier
// did not take, reading dial limits again; and the runtime role's billing jobs.
import { Duration, Effect, type Scope } from "effect"
import type { Logger } from "pino"
import { expireAndAnnounce } from "../../src/approvals/approval-changes.js"
import { renewalLoop } from "../../src/billing/subscription.service.js"
import { numberRentalLoop } from "../../src/numbers/rental.service.js"
import type { BusClient } from "../../src/platform/bus/bus.js"
import type { Sql } from "../../src/platform/Db.js"
import { periodic } from "../../src/platform/periodic.js"
import type { TelephonyProvider } from "../../src/providers/telephony/telephony.interface.js"
import { HANGUP_SWEEP_MS, sweepHangups } from "../actors/hangups.js"
import type { RunLeases } from "../actors/leases.js"

const APPROVAL_SWEEP_MS = 5_000
/** How often the dial limits of the workspaces whose runs are driven here are read again. */
const LIMITS_REFRESH_MS = 5_000

/** The host's loops, the first tick of each one interval after start. */
export const forkHostLoops = (
  scope: Scope.Scope,
  d: {
    readonly sql: Sql
    readonly bus: BusClient
    readonly log: Logger
    /** RUN_CLAIM_INTERVAL_MS. */
    readonly claimIntervalMs: number
    readonly leaseMs: number
    readonly leases: RunLeases
    readonly refreshLimits: () => Promise<void>
    readonly telephonyFor: (tenantId: number) => Promise<TelephonyProvider>
  },
) =>
  Effect.gen(function* () {
    const { sql, bus, log, leases } = d
    const every = (what: string, ms: number, tick: () => Promise<unknown>) =>
      Effect.forkIn(
        periodic({ what, every: Duration.millis(ms), tick: Effect.promise(tick), first: "after-pause" }),
        scope,
      )
    yield* every("run claim", d.claimIntervalMs, () => leases.claim())
    yield* every("lease renewal", Math.max(100, Math.floor(d.leaseMs / 3)), () => leases.renew())
    yield* every("approval sweep", APPROVAL_SWEEP_MS, () => expireAndAnnounce({ sql, bus, log }, "due"))
    yield* every("dial limits refresh", LIMITS_REFRESH_MS, d.refreshLimits)
    // Hang-ups a carrier did not take, tried again through each workspace's carrier (actors/hangups.ts).
    yield* every("hang-up sweep", HANGUP_SWEEP_MS, () => sweepHangups({ sql, log, telephonyFor: d.telephonyFor }))
  })

/** Background jobs of the runtime role; every runtime process runs them, safely in parallel. */
export const forkBillingJobs = (scope: Scope.Scope) =>
  Effect.gen(function* () {
    yield* Effect.forkIn(renewalLoop, scope)
    yield* Effect.forkIn(numberRentalLoop, scope)
  })
