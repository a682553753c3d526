// Webhook delivery's metrics: deliveries accepted, attempts failed, the lag to a first attempt,
// and the queue (read from the database when scraped, in every workspace).
import { Counter, Histogram } from "prom-client"
import { registers, ScrapedGauge } from "../platform/metrics.js"

export const webhooksDelivered = new Counter({
  name: "parley_webhook_deliveries_delivered_total",
  help: "Webhook deliveries a receiver accepted (2xx)",
  registers,
})

export const webhookAttemptsFailed = new Counter({
  name: "parley_webhook_attempts_failed_total",
  help: "Webhook attempts that failed, by reason (status_5xx, timeout, …) and outcome (retry, or failed for good)",
  labelNames: ["reason", "outcome"] as const,
  registers,
})

export const webhookLagSeconds = new Histogram({
  name: "parley_webhook_lag_seconds",
  help: "Time from an event's commit to its delivery's first attempt",
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
  registers,
})

const webhooksQueued = new ScrapedGauge(
  "parley_webhook_deliveries_queued",
  "Webhook deliveries pending to live endpoints, in every workspace (read from the database when scraped)",
)

const webhookOldestDue = new ScrapedGauge(
  "parley_webhook_oldest_due_seconds",
  "How long the longest-waiting due webhook delivery has been due, in every workspace; 0 when none " +
    "(read from the database when scraped: it grows while delivery is stalled)",
  "max",
)

/** What the webhook gauges show, read from the database when scraped. */
export interface WebhookQueueState {
  readonly queued: number
  readonly oldestDueSeconds: number
}

/** Reads the webhook queue at every scrape (a runtime process's delivery worker) until untracked. */
export function trackWebhookQueue(read: () => Promise<WebhookQueueState>): () => void {
  // Both gauges are refreshed together at a scrape: one read serves them.
  let reading: Promise<WebhookQueueState> | undefined
  const once = () =>
    (reading ??= read().finally(() => {
      reading = undefined
    }))
  const untrackQueued = webhooksQueued.track(() => once().then((q) => q.queued))
  const untrackOldest = webhookOldestDue.track(() => once().then((q) => q.oldestDueSeconds))
  return () => {
    untrackQueued()
    untrackOldest()
  }
}
