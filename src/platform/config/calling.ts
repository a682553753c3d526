// Calls and the work around them: run ownership, the dialer's ceilings, approvals, post-call
// analysis, the public demo and voice previews, webhook delivery, and the time scales tests shrink.
import { z } from "zod"
import { nonNegativeInt, optionalString, type Parsed, positiveInt } from "./fields.js"

export const callingEnv = {
  /** Multiplies the telephony simulator's ring and talk times and the dialer's retry backoff (tests: 0.01). */
  SIM_TIME_SCALE: optionalString.pipe(z.coerce.number<string>().min(0, "must be a non-negative number").optional()),
  /**
   * Which carriers' answered calls are bridged to a media stream and heard as audio (the runtime's
   * voice pipeline): "telco_a" (the default), "all" (the simulator's calls too: real time, whatever
   * SIM_TIME_SCALE says of rings), or "none" (telco_a speaks turn by turn with <Say>/<Gather>).
   */
  MEDIA_STREAMS: z.enum(["none", "telco_a", "all"]).default("all"),
  /**
   * Where the simulated carrier connects its media streams (an api process, ws:// or wss://); unset →
   * this process's own port (--role all), else PUBLIC_BASE_URL.
   */
  MEDIA_STREAM_URL: optionalString.pipe(z.url({ protocol: /^wss?$/ }).optional()),
  /**
   * Speech decoders (PocketSphinx, ~29 MB each) a runtime process loads at start for simulated calls
   * heard as audio: about as many as callees speaking at once (a quarter of the calls up); more load on
   * demand, one at a time (~0.2 s each), while an utterance's frames wait.
   */
  SPEECH_DECODERS_WARM: nonNegativeInt.max(64).default(4),
  /** "any" lifts every workflow's calling window (test harnesses); unset → the windows apply. */
  CALLING_HOURS: optionalString.pipe(z.enum(["any"], { error: 'must be "any" or unset' }).optional()),
  /** How long a runtime process owns a run without renewing; a dead owner's runs move after this. */
  RUN_LEASE_MS: positiveInt.min(500).max(300_000).default(15_000),
  /** How often runtime processes look for runs that need an owner. */
  RUN_CLAIM_INTERVAL_MS: positiveInt.max(60_000).default(1_000),
  /**
   * Deployment-wide ceilings on calls started per second, per carrier account and per workspace:
   * the limits themselves are the account's (telco_a: 3/s) and the workspace plan's (src/dialing/).
   */
  DIALER_CPS_PER_CARRIER: z.coerce.number().positive().max(100_000).default(1000),
  DIALER_CPS_PER_TENANT: z.coerce.number().positive().max(100_000).default(1000),
  /** Ceilings on calls in flight at once, per workflow and per workspace (below the plan's, they win). */
  DIALER_MAX_CONCURRENT_PER_WORKFLOW: positiveInt.default(10_000),
  DIALER_MAX_CONCURRENT_PER_TENANT: positiveInt.default(10_000),
  /** Attempts per target for busy / no answer / carrier failure, and the first retry's backoff. */
  DIALER_MAX_ATTEMPTS: positiveInt.max(10).default(3),
  DIALER_RETRY_BACKOFF_MS: positiveInt.default(30 * 60_000),
  /** How long a call waits for a human's decision before the agent moves on (scaled by SIM_TIME_SCALE). */
  APPROVAL_HOLD_MS: positiveInt.default(30_000),
  APPROVAL_HOLD_FLOOR_MS: nonNegativeInt.default(20_000),
  /** Patch-in (POST /api/internal/outreach/patch-in): the operator dialed into the conference by default. */
  OPERATOR_NUMBER: z
    .string()
    .regex(/^\+[1-9]\d{6,14}$/)
    .optional(),
  /** How long a proposal stays decidable (not scaled). */
  APPROVAL_TTL_MS: positiveInt.default(24 * 3_600_000),
  /**
   * Post-call analysis (runtime/workers/analysis-worker.ts): how often a runtime process looks for ended
   * calls to analyse, how many it analyses at once, how long one attempt may take (the lease is
   * twice that), how many attempts a call gets, and the first retry's delay (doubling, at most 10 min).
   */
  ANALYSIS_POLL_MS: positiveInt.default(1_000),
  ANALYSIS_CONCURRENCY: positiveInt.max(256).default(16),
  ANALYSIS_TIMEOUT_MS: positiveInt.default(60_000),
  ANALYSIS_MAX_ATTEMPTS: positiveInt.max(20).default(5),
  ANALYSIS_RETRY_BACKOFF_MS: positiveInt.default(5_000),
  /**
   * A simulation campaign's question (src/rehearsals/): how long, in real time whatever the campaign's time
   * scale, its simulated call holds for the operator's answer; the question expires with it.
   */
  SIM_APPROVAL_HOLD_MS: positiveInt.default(30 * 60_000),
  /** Synthesised preview clips not played for this many days are deleted. */
  PREVIEW_CLIP_TTL_DAYS: positiveInt.max(3650).default(30),
  /**
   * The public demo (POST /demo/call): calls one client IP, and one phone number, may ask for in a
   * day (429 with Retry-After past either; the 7-day cool-down also holds a number after a call).
   */
  DEMO_CALLS_PER_IP_DAY: positiveInt.max(1_000_000).default(5),
  DEMO_CALLS_PER_NUMBER_DAY: positiveInt.max(1000).default(2),
  /** How long a demo call's feed token (GET /demo/feed) stays valid. */
  DEMO_FEED_TTL_SECONDS: positiveInt.min(60).max(86_400).default(3600),
  /** Longest demo call (the demo rule book's max_call_seconds). */
  DEMO_MAX_CALL_SECONDS: positiveInt.min(30).max(120).default(120),
  /** Anonymous demo voice clones (POST /demo/clone-voice): how long one lives, and how many an IP may make a day. */
  DEMO_CLONE_TTL_MINUTES: positiveInt.max(7 * 24 * 60).default(60),
  DEMO_CLONES_PER_IP_DAY: positiveInt.max(1_000_000).default(5),
  /** Longest text POST /demo/voice-preview speaks (422 past it). */
  DEMO_PREVIEW_TEXT_MAX_CHARS: positiveInt.min(200).max(500).default(300),
  /**
   * Multiplies the webhook retry schedule (1 min … 24 h) and the 5 days after which a failing
   * endpoint is disabled (tests: 0.00003).
   */
  WEBHOOK_RETRY_SCALE: z.coerce.number().positive().max(1000).default(1),
  /** Longest one webhook attempt may take, from connecting to the end of the answer. */
  WEBHOOK_TIMEOUT_MS: positiveInt.max(120_000).default(10_000),
}
export type CallingEnv = Parsed<typeof callingEnv>

export type CallingConfig = Readonly<{
  simTimeScale: number
  mediaStreams: "none" | "telco_a" | "all"
  mediaStreamUrl: string | undefined
  speechDecodersWarm: number
  callingHoursAny: boolean
  runLeaseMs: number
  runClaimIntervalMs: number
  dialer: {
    cpsPerCarrier: number
    cpsPerTenant: number
    maxConcurrentPerWorkflow: number
    maxConcurrentPerTenant: number
    maxAttempts: number
    retryBackoffMs: number
  }
  approvalHoldMs: number
  /** The least real time a held callee waits, whatever SIM_TIME_SCALE (0: scaled all the way). */
  approvalHoldFloorMs: number
  operatorNumber: string | undefined
  approvalTtlMs: number
  analysis: { pollMs: number; concurrency: number; timeoutMs: number; maxAttempts: number; retryBackoffMs: number }
  simApprovalHoldMs: number
  previewClipTtlDays: number
  demo: {
    callsPerIpDay: number
    callsPerNumberDay: number
    feedTtlSeconds: number
    maxCallSeconds: number
    cloneTtlMinutes: number
    clonesPerIpDay: number
    previewTextMaxChars: number
  }
  webhookRetryScale: number
  webhookTimeoutMs: number
}>

export function callingConfig(e: CallingEnv): CallingConfig {
  return {
    simTimeScale: e.SIM_TIME_SCALE ?? 1,
    mediaStreams: e.MEDIA_STREAMS,
    mediaStreamUrl: e.MEDIA_STREAM_URL?.replace(/\/+$/, ""),
    speechDecodersWarm: e.SPEECH_DECODERS_WARM,
    callingHoursAny: e.CALLING_HOURS === "any",
    runLeaseMs: e.RUN_LEASE_MS,
    runClaimIntervalMs: e.RUN_CLAIM_INTERVAL_MS,
    dialer: {
      cpsPerCarrier: e.DIALER_CPS_PER_CARRIER,
      cpsPerTenant: e.DIALER_CPS_PER_TENANT,
      maxConcurrentPerWorkflow: e.DIALER_MAX_CONCURRENT_PER_WORKFLOW,
      maxConcurrentPerTenant: e.DIALER_MAX_CONCURRENT_PER_TENANT,
      maxAttempts: e.DIALER_MAX_ATTEMPTS,
      retryBackoffMs: e.DIALER_RETRY_BACKOFF_MS,
    },
    approvalHoldMs: e.APPROVAL_HOLD_MS,
    approvalHoldFloorMs: e.APPROVAL_HOLD_FLOOR_MS,
    operatorNumber: e.OPERATOR_NUMBER,
    approvalTtlMs: e.APPROVAL_TTL_MS,
    analysis: {
      pollMs: e.ANALYSIS_POLL_MS,
      concurrency: e.ANALYSIS_CONCURRENCY,
      timeoutMs: e.ANALYSIS_TIMEOUT_MS,
      maxAttempts: e.ANALYSIS_MAX_ATTEMPTS,
      retryBackoffMs: e.ANALYSIS_RETRY_BACKOFF_MS,
    },
    simApprovalHoldMs: e.SIM_APPROVAL_HOLD_MS,
    previewClipTtlDays: e.PREVIEW_CLIP_TTL_DAYS,
    demo: {
      callsPerIpDay: e.DEMO_CALLS_PER_IP_DAY,
      callsPerNumberDay: e.DEMO_CALLS_PER_NUMBER_DAY,
      feedTtlSeconds: e.DEMO_FEED_TTL_SECONDS,
      maxCallSeconds: e.DEMO_MAX_CALL_SECONDS,
      cloneTtlMinutes: e.DEMO_CLONE_TTL_MINUTES,
      clonesPerIpDay: e.DEMO_CLONES_PER_IP_DAY,
      previewTextMaxChars: e.DEMO_PREVIEW_TEXT_MAX_CHARS,
    },
    webhookRetryScale: e.WEBHOOK_RETRY_SCALE,
    webhookTimeoutMs: e.WEBHOOK_TIMEOUT_MS,
  }
}
