// The statistics of an experiment's readout, pure and without I/O: each arm's rate with its 95% Wilson interval, the
// difference between two arms (Newcombe), and a stopping rule that stays honest however often an operator looks.
//
// Method. Arms are compared pairwise against the first arm, the control (the rule book in use): that is the
// question an operator asks ("does this variant beat what we run today?"), and comparing against the observed
// best would pick the comparison from the data. Each comparison is a mixture sequential probability ratio test
// (mSPRT; Johari, Koomen, Pekelis & Walsh, "Always valid inference", Operations Research 2022, the method of
// Optimizely's Stats Engine) on the difference d = p_arm − p_control, whose estimate is taken as normal with
// variance V = p̃a(1−p̃a)/na + p̃b(1−p̃b)/nb, with a normal mixture d ~ N(0, τ²) over the alternatives:
//
//   Λ = √(V / (V + τ²)) · exp(τ² d̂² / (2V(V + τ²)))
//
// Λ is (asymptotically) a nonnegative martingale under d = 0, so by Ville's inequality P(Λ ever ≥ 1/α) ≤ α: the
// p-value min(1, 1/Λ) is valid at every look, and the set of d where Λ < 1/α is a confidence sequence (the
// interval this module calls "always valid"). The arms are told apart exactly when that interval excludes zero.
// p̃ = (x + 1)/(n + 2) in V only, so 0/5 against 5/5 is not "infinitely" certain. τ = 0.1 (ten points) is the
// scale of differences an opening or offer makes; power is flat within a factor of a few of it. With more than
// one challenger the family-wise error is held by Bonferroni: each comparison at α/(k−1), so its always-valid
// interval and its decision agree (Holm would decide a little earlier but its decisions match no interval).
// The fixed-sample Newcombe interval (method 10 of Newcombe 1998) is reported beside it as the difference's
// interval at a single, planned look; the plain statement quotes the always-valid one, so what it calls told apart
// and the interval it shows never disagree. "More calls" is the calls per arm at which the observed difference would be
// decided with 80% probability at that look, by the same boundary (conservative: earlier looks only add chances).

/** z for a two-sided 95% interval. */
export const Z95 = 1.959963984540054
/** z of the 80th percentile: the power "more calls" aims for. */
const Z80 = 0.8416212335729143

export interface Interval {
  readonly low: number
  readonly high: number
}

/**
 * The Wilson score interval of `successes` in `n` trials: unlike p ± z·√(p(1−p)/n) it stays
 * inside [0, 1] and is honest for small samples and rates near 0 or 1, which a 20-callee
 * rehearsal has. Undefined for n = 0.
 */
export function wilson(successes: number, n: number, z = Z95): Interval {
  if (!(n > 0)) throw new RangeError("a Wilson interval needs at least one trial")
  if (successes < 0 || successes > n) throw new RangeError(`successes must be within 0..${n}`)
  const p = successes / n
  const z2 = z * z
  const denominator = 1 + z2 / n
  const centre = (p + z2 / (2 * n)) / denominator
  const half = (z / denominator) * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n))
  // At p = 0 or 1 the bound is exactly 0 or 1; floating point would leave it a hair inside.
  return {
    low: successes === 0 ? 0 : Math.max(0, centre - half),
    high: successes === n ? 1 : Math.min(1, centre + half),
  }
}

/** A rate as the readout shows it: null with the whole of 0..1 before any call. */
export interface Rate {
  readonly rate: number | null
  readonly ci_low: number
  readonly ci_high: number
  readonly n: number
}

export function rate(successes: number, n: number): Rate {
  if (n === 0) return { rate: null, ci_low: 0, ci_high: 1, n: 0 }
  const { low, high } = wilson(successes, n)
  return { rate: successes / n, ci_low: low, ci_high: high, n }
}

export interface Proportion {
  readonly successes: number
  readonly n: number
}

export interface Difference {
  /** b − a */
  readonly diff: number
  readonly ci_low: number
  readonly ci_high: number
}

/**
 * b's rate minus a's with the hybrid score interval of Newcombe (1998, method 10), built from each arm's Wilson
 * interval: it keeps Wilson's good behaviour near 0 and 1 and for small n, where p̂b − p̂a ± z·SE does not.
 * Null when either arm has no trial. A fixed-sample interval: right at one planned look, not under repeated ones.
 */
export function difference(a: Proportion, b: Proportion, z = Z95): Difference | null {
  if (a.n === 0 || b.n === 0) return null
  const pa = a.successes / a.n
  const pb = b.successes / b.n
  const wa = wilson(a.successes, a.n, z)
  const wb = wilson(b.successes, b.n, z)
  const diff = pb - pa
  return {
    diff,
    ci_low: diff - Math.sqrt((pb - wb.low) ** 2 + (wa.high - pa) ** 2),
    ci_high: diff + Math.sqrt((wb.high - pb) ** 2 + (pa - wa.low) ** 2),
  }
}

export interface SequentialOptions {
  /** the error rate of one comparison (already divided among comparisons); default 0.05 */
  readonly alpha?: number
  /** the mixture's standard deviation over differences; default 0.1 */
  readonly tau?: number
}

export const ALPHA = 0.05
export const TAU = 0.1

export interface Sequential {
  /** always-valid p-value of "no difference" */
  readonly p_value: number
  /** the always-valid interval of b − a at 1 − alpha */
  readonly ci_low: number
  readonly ci_high: number
  /** the interval excludes zero: the arms can be told apart */
  readonly decided: boolean
}

/** The variance of p̂b − p̂a, each rate shrunk by one success and one failure so it is never zero. */
const varianceOf = (a: Proportion, b: Proportion, na = a.n, nb = b.n) => {
  const qa = (a.successes + 1) / (a.n + 2)
  const qb = (b.successes + 1) / (b.n + 2)
  return (qa * (1 - qa)) / na + (qb * (1 - qb)) / nb
}

/** The half-width of the always-valid interval at variance v: the |d̂| where Λ reaches 1/α. */
const halfWidth = (v: number, alpha: number, tau: number) => {
  const t2 = tau * tau
  return Math.sqrt(((v * (v + t2)) / t2) * (2 * Math.log(1 / alpha) + Math.log((v + t2) / v)))
}

/** The mSPRT of b against a (see the header): null when either arm has no trial. */
export function sequential(a: Proportion, b: Proportion, options: SequentialOptions = {}): Sequential | null {
  if (a.n === 0 || b.n === 0) return null
  const alpha = options.alpha ?? ALPHA
  const tau = options.tau ?? TAU
  const v = varianceOf(a, b)
  const d = b.successes / b.n - a.successes / a.n
  const t2 = tau * tau
  const logLambda = 0.5 * Math.log(v / (v + t2)) + (t2 * d * d) / (2 * v * (v + t2))
  const half = halfWidth(v, alpha, tau)
  return {
    p_value: Math.min(1, Math.exp(-logLambda)),
    // A difference of rates lies in [−1, 1]; clamping moves no bound across zero, so the decision stands.
    ci_low: Math.max(-1, d - half),
    ci_high: Math.min(1, d + half),
    decided: Math.abs(d) > half,
  }
}

/** Past this many calls per arm a difference is too small to chase: "more calls" is null. */
export const MAX_CALLS_PER_ARM = 1_000_000

/**
 * About how many more calls the larger arm needs (the other keeping its share) before the observed difference,
 * if it is the true one, is decided with 80% probability: the smallest n where |d| − halfWidth(V(n)) ≥ z₀.₈·√V(n).
 * 0 once decided; null when the observed difference is zero or would need more than MAX_CALLS_PER_ARM.
 */
export function moreCallsNeeded(a: Proportion, b: Proportion, options: SequentialOptions = {}): number | null {
  const alpha = options.alpha ?? ALPHA
  const tau = options.tau ?? TAU
  if (a.n === 0 || b.n === 0) return null
  const d = Math.abs(b.successes / b.n - a.successes / a.n)
  if (d < 1e-9) return null
  const large = Math.max(a.n, b.n)
  // Calls in the larger arm → whether the observed difference would be decided with 80% probability there.
  const enough = (calls: number) => {
    const v = varianceOf(a, b, (a.n / large) * calls, (b.n / large) * calls)
    return d - halfWidth(v, alpha, tau) >= Z80 * Math.sqrt(v)
  }
  if (enough(large)) return 0
  let high = large * 2
  while (!enough(high)) {
    if (high > MAX_CALLS_PER_ARM) return null
    high *= 2
  }
  let low = large
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2)
    if (enough(middle)) high = middle
    else low = middle
  }
  return high > MAX_CALLS_PER_ARM ? null : high - large
}

/** What a rate counts, how the statement says an arm does better on it, and which direction is better. */
export interface MetricSpec {
  readonly label: string
  /** the better arm's verb phrase: "Arm B agrees more often" */
  readonly better_phrase: string
  readonly higher_is_better: boolean
}

export const METRICS = {
  connect: { label: "connect rate", better_phrase: "connects more often", higher_is_better: true },
  agreement: { label: "agreement rate", better_phrase: "agrees more often", higher_is_better: true },
  goal_met: { label: "goal-met rate", better_phrase: "meets the goal more often", higher_is_better: true },
  approval_granted: { label: "approvals granted", better_phrase: "has more approvals granted", higher_is_better: true },
  opt_out: { label: "opt-out rate", better_phrase: "has fewer opt-outs", higher_is_better: false },
} as const satisfies Record<string, MetricSpec>

export type Metric = keyof typeof METRICS

export interface ArmCounts {
  readonly name: string
  readonly n: number
  readonly successes: number
}

export interface ArmReadout extends Rate {
  readonly name: string
  readonly successes: number
}

export interface Comparison {
  /** the challenger; differences are this arm's rate minus the control's */
  readonly arm: string
  readonly control: string
  /** Newcombe's fixed-sample 95% interval; null while either arm has no call */
  readonly difference: Difference | null
  /** the always-valid test at this comparison's share of α; null while either arm has no call */
  readonly sequential: Sequential | null
  readonly decided: boolean
  /** the better arm once decided, else null */
  readonly better: string | null
  /** more calls per arm to tell a difference this size apart; 0 once decided; null when not in reach */
  readonly more_calls_needed: number | null
  readonly statement: string
}

export interface Readout {
  readonly metric: Metric | string
  readonly method: "msprt-normal-mixture"
  readonly alpha: number
  readonly tau: number
  readonly control: string
  readonly arms: readonly ArmReadout[]
  readonly comparisons: readonly Comparison[]
  /** some comparison is decided */
  readonly decided: boolean
  /**
   * The arm the data shows best: the best-rated challenger decided better than the control, else the control when
   * every challenger is decided worse, else null.
   */
  readonly better: string | null
  readonly statement: string
}

const pct = (x: number) => `${Math.round(x * 100)}%`
const points = (x: number) => `${Math.round(x * 100)}`
const pointsWord = (x: number) => (Math.round(Math.abs(x) * 100) === 1 ? "point" : "points")

function compare(control: ArmCounts, arm: ArmCounts, spec: MetricSpec, alpha: number, tau: number): Comparison {
  const base = { arm: arm.name, control: control.name }
  const seq = sequential(control, arm, { alpha, tau })
  const diff = difference(control, arm)
  if (seq === null || diff === null) {
    const empty = [control, arm].filter((x) => x.n === 0).map((x) => x.name)
    const statement = `Not yet: ${empty.join(" and ")} ${empty.length > 1 ? "have" : "has"} no calls yet.`
    return {
      ...base,
      difference: null,
      sequential: null,
      decided: false,
      better: null,
      more_calls_needed: null,
      statement,
    }
  }
  const pc = control.successes / control.n
  const pa = arm.successes / arm.n
  // Orient the statement on the arm doing better so far: its difference is positive in the metric's good direction.
  const armAhead = spec.higher_is_better ? pa > pc : pa < pc
  const [ahead, pAhead, pBehind] = armAhead ? [arm, pa, pc] : [control, pc, pa]
  const sign = armAhead === spec.higher_is_better ? 1 : -1
  const [lo, hi] = sign === 1 ? [seq.ci_low, seq.ci_high] : [-seq.ci_high, -seq.ci_low]
  const size = `${points(Math.abs(pa - pc))} ${pointsWord(pa - pc)}`
  const numbers = `${pct(pAhead)} vs ${pct(pBehind)} (difference ${size}, 95% CI ${points(lo)} to ${points(hi)})`
  const more = seq.decided ? 0 : moreCallsNeeded(control, arm, { alpha, tau })
  const lead = `${ahead.name} ${spec.better_phrase}`
  let statement: string
  if (seq.decided) statement = `${lead}: ${numbers}. The data can tell them apart.`
  else if (pa === pc) {
    statement =
      `${arm.name} and ${control.name} are level so far: ${pct(pa)} each. ` +
      "Not yet: no practical number of calls would tell them apart if they stay this close."
  } else if (more === null) {
    statement =
      `${lead} so far: ${numbers}. Not yet: a difference this small would take more than ` +
      `${MAX_CALLS_PER_ARM.toLocaleString("en-US")} calls per arm to tell apart.`
  } else {
    statement =
      `${lead} so far: ${numbers}. ` +
      `Not yet: about ${more.toLocaleString("en-US")} more calls per arm would tell a difference this size apart.`
  }
  return {
    ...base,
    difference: diff,
    sequential: seq,
    decided: seq.decided,
    better: seq.decided ? ahead.name : null,
    more_calls_needed: more,
    statement,
  }
}

export interface ReadoutOptions {
  /** the family-wise error rate; default 0.05 */
  readonly alpha?: number
  readonly tau?: number
}

/**
 * The readout of one rate over two to four arms, the first being the control: each arm's rate, each challenger
 * against the control (Bonferroni over the k − 1 comparisons), and which arm, if any, the data shows better.
 */
export function readout(
  arms: readonly ArmCounts[],
  metric: Metric | MetricSpec,
  options: ReadoutOptions = {},
): Readout {
  if (arms.length < 2 || arms.length > 4) throw new RangeError("an experiment has two to four arms")
  for (const a of arms) {
    if (!Number.isInteger(a.n) || !Number.isInteger(a.successes) || a.n < 0 || a.successes < 0 || a.successes > a.n) {
      throw new RangeError(`arm ${a.name}: successes must be whole and within 0..n`)
    }
  }
  const spec: MetricSpec = typeof metric === "string" ? METRICS[metric] : metric
  const alpha = options.alpha ?? ALPHA
  const tau = options.tau ?? TAU
  const [control, ...challengers] = arms as [ArmCounts, ...ArmCounts[]]
  const each = alpha / challengers.length
  const comparisons = challengers.map((arm) => compare(control, arm, spec, each, tau))
  const winners = comparisons.filter((c) => c.better !== null && c.better !== control.name)
  const rateOf = (name: string) => {
    const a = arms.find((x) => x.name === name)!
    return (spec.higher_is_better ? 1 : -1) * (a.successes / a.n)
  }
  const better =
    winners.length > 0
      ? winners.map((c) => c.arm).reduce((x, y) => (rateOf(y) > rateOf(x) ? y : x))
      : comparisons.every((c) => c.better === control.name)
        ? control.name
        : null
  return {
    metric: typeof metric === "string" ? metric : metric.label,
    method: "msprt-normal-mixture",
    alpha,
    tau,
    control: control.name,
    arms: arms.map((a) => ({ name: a.name, successes: a.successes, ...rate(a.successes, a.n) })),
    comparisons,
    decided: comparisons.some((c) => c.decided),
    better,
    statement: comparisons.map((c) => c.statement).join(" "),
  }
}
