// The rules of webhook delivery, free of I/O: what an endpoint's answer (or its silence) means for
// the delivery, when the next attempt is due, and when an endpoint has failed long enough to be
// disabled. The worker that applies them is runtime/workers/webhook-delivery.ts.

/** Delays before the 2nd … 7th attempt (spec section 6): 1 min, 5 min, 30 min, 2 h, 12 h, 24 h. */
export const RETRY_SCHEDULE_MS: readonly number[] = [
  60_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  12 * 3_600_000,
  24 * 3_600_000,
]

/** Attempts in all: the first, then one per step of the schedule. */
export const MAX_ATTEMPTS = RETRY_SCHEDULE_MS.length + 1

/** An endpoint whose failed attempts, unbroken by any success, span this long is disabled. */
export const DISABLE_AFTER_MS = 5 * 24 * 3_600_000

/** Each delay is spread by up to this fraction either way, so a receiver's outage does not end in a stampede. */
export const JITTER = 0.1

/** The most of an answer's body read; the rest is never read (the connection is dropped). */
export const RESPONSE_READ_BYTES = 64 * 1024

/**
 * How long the body after the status line is waited for: the verdict is the status line's, the body
 * only a failure's snippet and a reusable connection, so a receiver slow to send it changes nothing.
 */
export const RESPONSE_DRAIN_MS = 1_000

/**
 * Deliveries one runtime process has in flight at once (leased by it, the lease running) to one
 * workspace's endpoints, to one endpoint, and to one endpoint in a failing streak. A process posts 32
 * at a time: without caps, receivers that hang (10 s an attempt) would take every slot and stall every
 * other workspace's deliveries. A workspace gets at most half of a process's slots, so it never fills
 * one alone; a healthy endpoint may use all of its workspace's share (a busy campaign's receiver is
 * posted to as fast as it answers, and more runtime processes post more); an endpoint whose attempts
 * are failing gets two, so a receiver that went down costs its workspace little room. Counted per
 * process, the caps grow with the processes, as the slots do.
 */
export const IN_FLIGHT_PER_WORKSPACE = 16
export const IN_FLIGHT_PER_ENDPOINT = 16
export const IN_FLIGHT_PER_FAILING_ENDPOINT = 2

/** What happened to one attempt, before it is judged. */
export type AttemptResult =
  | { readonly kind: "answered"; readonly status: number }
  | { readonly kind: "redirect"; readonly status: number }
  | { readonly kind: "timeout" }
  | { readonly kind: "refused_private"; readonly message: string }
  | { readonly kind: "network"; readonly message: string }
  /** The endpoint's signing secret could not be opened (another key, an altered row): nothing was sent. */
  | { readonly kind: "unsignable"; readonly message: string }

/** A failed attempt's reason, as the metrics label it (a code constant, never an id). */
export type FailureReason =
  | "status_3xx"
  | "status_4xx"
  | "status_408"
  | "status_429"
  | "status_5xx"
  | "status_other"
  | "timeout"
  | "private_address"
  | "network"
  | "unsignable"

export type Verdict =
  | { readonly outcome: "delivered" }
  | { readonly outcome: "retry" | "failed"; readonly reason: FailureReason }

/**
 * 2xx delivers; any other 4xx than 408 and 429 fails for good (the receiver refused this event and
 * will again); everything else (5xx, 408, 429, 3xx, no answer in time, no connection, an address the
 * guard refused at connect, which may be a passing DNS answer) is tried again while the schedule lasts.
 */
export function judge(result: AttemptResult, attempt: number): Verdict {
  const retry = (reason: FailureReason): Verdict => ({
    outcome: attempt < MAX_ATTEMPTS ? "retry" : "failed",
    reason,
  })
  switch (result.kind) {
    case "answered": {
      const s = result.status
      if (s >= 200 && s < 300) return { outcome: "delivered" }
      if (s === 408) return retry("status_408")
      if (s === 429) return retry("status_429")
      if (s >= 400 && s < 500) return { outcome: "failed", reason: "status_4xx" }
      if (s >= 500 && s < 600) return retry("status_5xx")
      if (s >= 300 && s < 400) return retry("status_3xx")
      return retry("status_other")
    }
    case "redirect":
      return retry("status_3xx")
    case "timeout":
      return retry("timeout")
    case "refused_private":
      return retry("private_address")
    case "network":
      return retry("network")
    case "unsignable":
      return retry("unsignable")
  }
}

/**
 * Milliseconds until the attempt after attempt number `attempt` (1-based): the schedule's step ×
 * `scale` (WEBHOOK_RETRY_SCALE), spread by ±JITTER. `random` is in [0, 1).
 */
export function retryDelayMs(attempt: number, scale: number, random: number = Math.random()): number {
  const step = RETRY_SCHEDULE_MS[Math.min(Math.max(attempt, 1), RETRY_SCHEDULE_MS.length) - 1]!
  return Math.max(0, Math.round(step * scale * (1 + JITTER * (2 * random - 1))))
}

/** Whether an endpoint failing since `failingSince` has failed long enough to be disabled. */
export const failedTooLong = (failingSince: Date, now: Date, scale: number): boolean =>
  now.getTime() - failingSince.getTime() >= DISABLE_AFTER_MS * scale

/** A short description of a failed attempt for last_error and the attempts list (no receiver body echoed at length). */
export function describeAttempt(result: AttemptResult, timeoutMs: number, bodySnippet = ""): string | null {
  switch (result.kind) {
    case "answered":
      if (result.status >= 200 && result.status < 300) return null
      return `HTTP ${result.status}${bodySnippet === "" ? "" : `: ${bodySnippet}`}`
    case "redirect":
      return `HTTP ${result.status}: redirects are not followed`
    case "timeout":
      return `no answer within ${timeoutMs} ms`
    case "refused_private":
    case "network":
    case "unsignable":
      return result.message
  }
}
