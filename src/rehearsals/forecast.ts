// What a simulation campaign predicts for the real run: its observed rates (each with a 95% Wilson
// interval and the sample it rests on) scaled to the workflow's audience, per hour of dialing, in minutes and money.
import { RATE_PER_MINUTE_MINOR } from "../billing/pricing.js"
// The Wilson interval lives with the experiments' statistics (one implementation); re-exported here for its callers.
import { wilson } from "../experiments/readout.js"
import { type Currency, formatAmount } from "../platform/money.js"

export { type Interval, wilson, Z95 } from "../experiments/readout.js"

/**
 * Time a line is busy on an attempt beyond its talk time, as the dialer sees it: a call nobody
 * answers rings out (the runtime's ring timeout); any other rings, connects or is refused in
 * about 15 s. Rehearsals run on a scaled clock, so wall time cannot be measured; these stand in.
 */
export const RING_OUT_SECONDS = 45
export const SETUP_SECONDS = 15

/** What the rehearsal observed, over its callees with a final outcome. */
export interface SimSample {
  /** callees with a final outcome: the sample size */
  readonly n: number
  /** of those, reached by a person (not no answer, busy, voicemail or a carrier failure) */
  readonly connected: number
  /** of those, agreed (with or without a concession) */
  readonly agreed: number
  /** of those, asked a human at least once (a concession, callback or escalation) */
  readonly withApproval: number
  /** of those, rang out unanswered */
  readonly unanswered: number
  /** connected seconds summed over them (real seconds, as billed) */
  readonly talkSeconds: number
}

/** How the real run would dial: the dialer's limits (no workflow sets its own today). */
export interface DialingCapacity {
  /** calls in flight at once for one workflow (DIALER_MAX_CONCURRENT_PER_WORKFLOW) */
  readonly concurrency: number
  /** calls started per second (the smaller of DIALER_CPS_PER_TENANT and DIALER_CPS_PER_CARRIER) */
  readonly callsPerSecond: number
}

export interface ForecastInput {
  readonly sample: SimSample
  /** the workflow's real audience; 0 → the forecast is per 1,000 targets */
  readonly audience: number
  readonly currency: Currency
  readonly capacity: DialingCapacity
}

export interface Estimate {
  readonly value: number
  readonly low: number
  readonly high: number
}

export interface RateEstimate extends Estimate {
  readonly successes: number
}

const round = (x: number, digits: number) => {
  const f = 10 ** digits
  return Math.round(x * f) / f
}

const rate = (successes: number, n: number): RateEstimate => {
  const { low, high } = wilson(successes, n)
  return { successes, value: round(successes / n, 4), low: round(low, 4), high: round(high, 4) }
}

/** The same interval in other units (its bounds from the unrounded Wilson bounds). */
const scaled = (successes: number, n: number, by: number, digits = 1): Estimate => {
  const { low, high } = wilson(successes, n)
  return { value: round((successes / n) * by, digits), low: round(low * by, digits), high: round(high * by, digits) }
}

/**
 * The forecast, or null before any simulated callee has an outcome. Model: each target of the
 * real audience behaves like a rehearsal callee, so each count is the audience times its rate;
 * minutes are connects times the average talk time per connect (billed per second at the bundled
 * rate of GET /pricing); dialing speed is the dialer's concurrency over the average line time per
 * attempt (talk + ring), capped by its calls per second.
 */
export function forecast(input: ForecastInput) {
  const { sample: s, currency, capacity } = input
  if (s.n <= 0) return null
  const perThousand = input.audience <= 0
  const targets = perThousand ? 1000 : input.audience

  const lineSeconds = (s.talkSeconds + s.unanswered * RING_OUT_SECONDS + (s.n - s.unanswered) * SETUP_SECONDS) / s.n
  const attemptsPerHour = Math.min(capacity.callsPerSecond * 3600, (capacity.concurrency * 3600) / lineSeconds)
  const talkPerConnect = s.connected === 0 ? 0 : s.talkSeconds / s.connected
  const ratePerMinute = RATE_PER_MINUTE_MINOR[currency]
  // Minutes follow connects: the interval of the connect rate, at the observed talk time per connect.
  const minutes = scaled(s.connected, s.n, (targets * talkPerConnect) / 60)
  const cost = (m: number) => Math.round(m * ratePerMinute)
  const costMinor = {
    value: cost((targets * s.talkSeconds) / s.n / 60),
    low: cost(minutes.low),
    high: cost(minutes.high),
  }
  return {
    basis: perThousand ? ("per_1000_targets" as const) : ("audience" as const),
    targets,
    sample_size: s.n,
    confidence: 0.95,
    interval: "wilson" as const,
    rates: {
      connect: rate(s.connected, s.n),
      agreement: rate(s.agreed, s.n),
      approval: rate(s.withApproval, s.n),
    },
    expected: {
      connects: scaled(s.connected, s.n, targets),
      agreements: scaled(s.agreed, s.n, targets),
      approvals: scaled(s.withApproval, s.n, targets),
    },
    per_hour: {
      attempts: round(attemptsPerHour, 1),
      connects: scaled(s.connected, s.n, attemptsPerHour),
      agreements: scaled(s.agreed, s.n, attemptsPerHour),
      approvals: scaled(s.withApproval, s.n, attemptsPerHour),
    },
    dialing_hours: round(targets / attemptsPerHour, 2),
    minutes,
    cost: {
      currency,
      rate_per_minute_minor: ratePerMinute,
      minor: costMinor,
      display: formatAmount(costMinor.value, currency),
    },
    assumptions: {
      concurrency: capacity.concurrency,
      calls_per_second: capacity.callsPerSecond,
      line_seconds_per_attempt: round(lineSeconds, 1),
      talk_seconds_per_connect: round(talkPerConnect, 1),
      ring_out_seconds: RING_OUT_SECONDS,
      setup_seconds: SETUP_SECONDS,
    },
  }
}

export type Forecast = NonNullable<ReturnType<typeof forecast>>
