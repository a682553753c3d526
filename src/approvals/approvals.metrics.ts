// The approvals' metrics: how many wait for a decision (read from the database when scraped, in
// every workspace) and how long decisions took.
import { Effect, Layer } from "effect"
import { Histogram } from "prom-client"
import { Db } from "../platform/Db.js"
import { registers, ScrapedGauge } from "../platform/metrics.js"
import { countPendingApprovals } from "./approval-queue.repo.js"

const approvalsPending = new ScrapedGauge(
  "parley_approvals_pending",
  "Approvals waiting for a decision, in every workspace (read from the database when scraped)",
)

const approvalDecisionSeconds = new Histogram({
  name: "parley_approval_decision_seconds",
  help: "Time from an approval's proposal to its decision",
  buckets: [1, 5, 15, 30, 60, 120, 300, 900, 3600, 14_400, 86_400],
  registers,
})

/** Observes how long an approval waited for its decision. */
export function observeApprovalDecision(createdAt: Date, decidedAt: Date | null): void {
  if (decidedAt !== null) approvalDecisionSeconds.observe(Math.max(0, decidedAt.getTime() - createdAt.getTime()) / 1000)
}

/** The process's database counted in parley_approvals_pending while the layer lives. */
export const ApprovalMetricsLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const { sql } = yield* Db
    yield* Effect.acquireRelease(
      Effect.sync(() => approvalsPending.track(() => countPendingApprovals(sql))),
      (untrack) => Effect.sync(untrack),
    )
  }),
)
