// The dialer's decisions, by kind and reason.
import { Counter } from "prom-client"
import { registers } from "../platform/metrics.js"

const dialDecisions = new Counter({
  name: "parley_runtime_dial_decisions_total",
  help: "Dialer decisions by kind (dial, skip, hold, retry, stop) and reason",
  labelNames: ["decision", "reason"] as const,
  registers,
})

/** Reasons are code constants; past this many distinct ones the rest are folded into "other". */
const MAX_REASONS = 200
const reasonsSeen = new Set<string>()
export function observeDialDecision(decision: string, reason: string): void {
  if (!reasonsSeen.has(reason)) {
    if (reasonsSeen.size >= MAX_REASONS) reason = "other"
    else reasonsSeen.add(reason)
  }
  dialDecisions.labels(decision, reason).inc()
}
