// The dialer's pure decisions: whether a failed attempt is retried, and the shape of the
// decision-log entry each decision becomes. Callee time zones are in timezones.ts, the calling
// window in calling-window.ts (re-exported here). No I/O, no timers: time comes in.
import type { RetryableOutcome } from "../../machines/index.js"
import type { WindowCheck } from "./calling-window.js"
import { observeDialDecision } from "./dialing.metrics.js"
import { DAY, MINUTE } from "./timezones.js"

export * from "./calling-window.js"
export * from "./timezones.js"

// ---------------------------------------------------------------------------------------------
// Retries

// The call machine's RETRYABLE_OUTCOMES (busy, no_answer, failed), so the call's output and this
// policy agree. Spelt again because a domain imports machines/ for its types only: the record's
// type fails the build when the machine's list gains or loses an outcome this one does not.
const RETRYABLE: Readonly<Record<RetryableOutcome, true>> = { busy: true, no_answer: true, failed: true }
const isRetryableOutcome = (o: string): o is RetryableOutcome => Object.hasOwn(RETRYABLE, o)

export type RetryReason = `${RetryableOutcome}_retry_scheduled` | "max_attempts_reached" | "final_outcome"

export type RetryDecision =
  | { readonly retry: true; readonly at: number; readonly delayMs: number; readonly reason: RetryReason }
  | { readonly retry: false; readonly reason: RetryReason }

export interface RetryInput {
  /** The finished attempt's outcome (busy, no_answer, failed, answered, voicemail, …). */
  readonly outcome: string
  /** 1-based number of the attempt that just finished. */
  readonly attempt: number
  readonly maxAttempts?: number
  readonly baseBackoffMs?: number
  /** Cap on one backoff before scaling. */
  readonly maxBackoffMs?: number
  /** SIM_TIME_SCALE: multiplies the backoff. */
  readonly timeScale?: number
  readonly now: number
  /** Makes the jitter differ between targets yet repeat for the same one (the target id). */
  readonly seed?: string | number
}

/** FNV-1a, 32 bits: a stable fraction in [0, 1) from a string. */
function unitHash(s: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return (h >>> 0) / 2 ** 32
}

/**
 * Whether a finished attempt is tried again and when: busy/no_answer/failed retry up to
 * `maxAttempts` attempts in all, after base·2^(attempt−1) ±10% (deterministic in seed and
 * attempt), times `timeScale`; anything else is final.
 */
export function retryDecision(input: RetryInput): RetryDecision {
  const { outcome, now } = input
  const maxAttempts = input.maxAttempts ?? 3
  const base = input.baseBackoffMs ?? 30 * MINUTE
  const cap = input.maxBackoffMs ?? DAY
  const scale = input.timeScale ?? 1
  if (!(scale >= 0) || !Number.isFinite(scale))
    throw new RangeError(`timeScale must be a non-negative number, got ${scale}`)
  if (!isRetryableOutcome(outcome)) return { retry: false, reason: "final_outcome" }
  const attempt = Math.max(1, Math.floor(input.attempt))
  if (attempt >= maxAttempts) return { retry: false, reason: "max_attempts_reached" }
  const jitter = (unitHash(`${input.seed ?? ""}:${attempt}`) * 2 - 1) * 0.1
  const delayMs = Math.round(Math.min(cap, base * 2 ** (attempt - 1)) * (1 + jitter) * scale)
  return { retry: true, at: now + delayMs, delayMs, reason: `${outcome}_retry_scheduled` }
}

// ---------------------------------------------------------------------------------------------
// Decision log

export type TargetId = number | string
export type DialDecisionKind = "dial" | "skip" | "hold" | "retry" | "stop"

/** One line of the decision log: what the dialer did with a target, why, and at what cost. */
export interface DialDecision {
  readonly targetId: TargetId
  /** Epoch ms. */
  readonly at: number
  readonly decision: DialDecisionKind
  /** A short snake_case token (outside_calling_hours, busy_retry_scheduled, dnc_listed, …). */
  readonly reason: string
  readonly detail: Record<string, unknown>
  /** Money reserved or spent on this decision, in minor units; null when none. */
  readonly costMinor: number | null
}

const decisionOf =
  (decision: DialDecisionKind) =>
  (
    targetId: TargetId,
    at: number,
    reason: string,
    detail: Record<string, unknown> = {},
    costMinor: number | null = null,
  ): DialDecision => {
    observeDialDecision(decision, reason)
    return { targetId, at, decision, reason, detail, costMinor }
  }

/** Constructors, so every decision is built the same way. */
export const Decision = {
  dial: decisionOf("dial"),
  skip: decisionOf("skip"),
  hold: decisionOf("hold"),
  retry: decisionOf("retry"),
  stop: decisionOf("stop"),

  /** A closed window: held until it opens, or stopped when it never does. */
  fromWindow(targetId: TargetId, at: number, check: Exclude<WindowCheck, { ok: true }>): DialDecision {
    const detail = { zones: check.zones, next_open_at: check.nextOpenAt, detail: check.detail }
    return check.nextOpenAt === null
      ? Decision.stop(targetId, at, check.reason, detail)
      : Decision.hold(targetId, at, check.reason, detail)
  },

  /** A finished attempt: retried at its time, or stopped. */
  fromRetry(
    targetId: TargetId,
    at: number,
    r: RetryDecision,
    detail: Record<string, unknown> = {},
    costMinor: number | null = null,
  ): DialDecision {
    return r.retry
      ? Decision.retry(targetId, at, r.reason, { ...detail, retry_at: r.at, delay_ms: r.delayMs }, costMinor)
      : Decision.stop(targetId, at, r.reason, detail, costMinor)
  },
} as const
