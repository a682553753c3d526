// The runtime host's metrics: the runs and calls it holds (read when scraped), calls started, and
// hang-ups a carrier did not take.
import { Counter } from "prom-client"
import { registers, ScrapedGauge } from "../src/platform/metrics.js"

const runsOwned = new ScrapedGauge("parley_runtime_runs_owned", "Runs this process drives (holds the lease of)")
const liveCalls = new ScrapedGauge("parley_runtime_live_calls", "Calls in flight in this process")

/** What a runtime host reports when scraped. */
export interface RuntimeSample {
  readonly runs: () => number
  readonly calls: () => number
}

/** A runtime host's runs and live calls are counted until the returned function is called. */
export function trackRuntime(sample: RuntimeSample): () => void {
  const untrackRuns = runsOwned.track(sample.runs)
  const untrackCalls = liveCalls.track(sample.calls)
  return () => {
    untrackRuns()
    untrackCalls()
  }
}

export const callsStarted = new Counter({
  name: "parley_runtime_calls_started_total",
  help: "Calls the dialer started (rate() gives calls started per second)",
  registers,
})

// Each failure is logged too, with its context; the counters say how often, for alerts.

export const hangupFailures = new Counter({
  name: "parley_call_hangup_failures_total",
  help:
    "Hang-ups a carrier did not take after the adapter's retries, by provider and reason (hangup: a call's own, " +
    "marked for the sweep; handoff: the callee of a failed hand-off; sweep: the sweep tried again and failed; " +
    "given_up: the sweep stopped trying, the call may have stayed up)",
  labelNames: ["provider", "reason"] as const,
  registers,
})

export const hangupsSwept = new Counter({
  name: "parley_call_hangups_swept_total",
  help: "Hang-ups that failed at first and went through when the sweep tried again, by provider",
  labelNames: ["provider"] as const,
  registers,
})
