// A campaign's Analytics section: over a range of days (the last 30 by default), its funnel from
// targets to agreements, outcomes per day, connect rate by the callee's weekday and hour, reply latency
// and spend (GET /api/workflows/{id}/analytics); then its experiments, each arm's rates with their
// intervals and the readout's verdict (GET /api/workflows/{id}/experiments; none while it answers 404).
import { useState } from "preact/hooks"
import { ApiError, request } from "../api.js"
import { type Column, ErrorText, Field, Table, useLoad } from "../ui.js"
import { type DayOutcomes, OutcomesChart } from "./analytics.chart.js"
import {
  cellRate,
  interval,
  millis,
  moneyMinor,
  ofDials,
  percent,
  points,
  pointsInterval,
  seconds,
  share,
} from "./analytics.format.js"

interface Analytics {
  readonly from: string
  readonly to: string
  readonly funnel: {
    readonly targets: number
    readonly dialed: number
    readonly answered: number
    readonly human: number
    readonly voicemail: number
    readonly talked_30s: number
    readonly agreed: number
  }
  readonly outcomes_over_time: ReadonlyArray<DayOutcomes>
  readonly hour_of_day: {
    readonly weekdays: ReadonlyArray<string>
    readonly dials: ReadonlyArray<ReadonlyArray<number>>
    readonly connects: ReadonlyArray<ReadonlyArray<number>>
  }
  readonly latency: {
    readonly n: number
    readonly p50: number | null
    readonly p90: number | null
    readonly p99: number | null
  }
  readonly spend_minor: number
  readonly currency: string
}

/** A rate with its 95% interval (src/experiments/readout.ts). */
interface Rate {
  readonly rate: number | null
  readonly ci_low: number
  readonly ci_high: number
  readonly n: number
  readonly successes?: number
}

interface Comparison {
  readonly arm: string
  readonly control: string
  readonly difference: { readonly diff: number; readonly ci_low: number; readonly ci_high: number } | null
  readonly sequential: { readonly ci_low: number; readonly ci_high: number; readonly p_value: number } | null
  readonly decided: boolean
  readonly better: string | null
  readonly more_calls_needed: number | null
  readonly statement: string
}

interface Readout {
  readonly metric: string
  readonly control: string
  readonly arms: ReadonlyArray<Rate & { readonly name: string }>
  readonly comparisons: ReadonlyArray<Comparison>
  readonly decided: boolean
  readonly better: string | null
  readonly statement: string
}

interface ArmFigures {
  readonly name: string
  readonly targets: number
  readonly calls: number
  readonly connects: Rate
  readonly agreement: Rate
  readonly goal_met: Rate
  readonly opt_outs: Rate
  readonly approvals_asked: number
  readonly approvals_granted: number
  readonly talk_seconds_avg: number | null
  readonly cost_minor: number
  readonly cost_per_agreement_minor: number | null
}

export interface Experiment {
  readonly id: number
  readonly name: string
  readonly status: "running" | "ended"
  readonly promoted_arm: string | null
  readonly created_at: string
  readonly ended_at: string | null
  readonly arms: ReadonlyArray<{ readonly name: string; readonly weight: number; readonly stopped: boolean }>
  readonly readout: {
    readonly currency: string
    readonly arms: ReadonlyArray<ArmFigures>
    readonly agreement: Readout
    readonly better: string | null
    readonly decided: boolean
    readonly statement: string
  }
}

const DAY_MS = 86_400_000
const MAX_DAYS = 400
const isoDay = (t: number) => new Date(t).toISOString().slice(0, 10)

/** Why this range cannot be asked for, in words; undefined when it can. */
function rangeProblem(from: string, to: string): string | undefined {
  const a = Date.parse(`${from}T00:00:00Z`)
  const b = Date.parse(`${to}T00:00:00Z`)
  if (Number.isNaN(a)) return "Choose the first day."
  if (Number.isNaN(b)) return "Choose the last day."
  if (b < a) return "The last day must not be before the first."
  if ((b - a) / DAY_MS > MAX_DAYS) return `Analytics cover at most ${MAX_DAYS} days.`
  return undefined
}

export function CampaignAnalytics({ workflowId }: { readonly workflowId: number }) {
  const today = isoDay(Date.now())
  const [from, setFrom] = useState(isoDay(Date.now() - 29 * DAY_MS))
  const [to, setTo] = useState(today)
  const problem = rangeProblem(from, to)
  const query = problem === undefined ? `from=${from}&to=${to}` : undefined
  const data = useLoad(
    () =>
      query === undefined
        ? Promise.resolve(undefined)
        : request<Analytics>("GET", `/api/workflows/${workflowId}/analytics?${query}`),
    [workflowId, query],
  )
  const a = data.data

  return (
    <section class="analytics" aria-labelledby="analytics-h">
      <h3 id="analytics-h">Analytics</h3>
      <div class="inline-form">
        <Field label="First day">
          {(id) => (
            <input id={id} type="date" value={from} max={today} onInput={(e) => setFrom(e.currentTarget.value)} />
          )}
        </Field>
        <Field label="Last day">
          {(id) => <input id={id} type="date" value={to} onInput={(e) => setTo(e.currentTarget.value)} />}
        </Field>
        {problem && (
          <p class="error" role="alert">
            {problem}
          </p>
        )}
      </div>
      <p class="muted">
        Calls placed from {from} to {to} (UTC dates, inclusive).
      </p>
      <ErrorText error={data.error} />
      {a && (
        <>
          <Funnel funnel={a.funnel} />
          <section aria-labelledby="outcomes-h">
            <h4 id="outcomes-h">Outcomes over time</h4>
            <OutcomesChart days={a.outcomes_over_time} />
          </section>
          <HeatMap grid={a.hour_of_day} />
          <section aria-labelledby="latency-h">
            <h4 id="latency-h">Reply latency and spend</h4>
            <dl class="kv">
              <dt>Replies measured</dt>
              <dd data-testid="latency-n">{a.latency.n}</dd>
              <dt>Median reply</dt>
              <dd data-testid="latency-p50">{millis(a.latency.p50)}</dd>
              <dt>90th percentile</dt>
              <dd data-testid="latency-p90">{millis(a.latency.p90)}</dd>
              <dt>99th percentile</dt>
              <dd data-testid="latency-p99">{millis(a.latency.p99)}</dd>
              <dt>Spend</dt>
              <dd data-testid="spend">{moneyMinor(a.spend_minor, a.currency)}</dd>
            </dl>
          </section>
        </>
      )}
      <Experiments workflowId={workflowId} />
    </section>
  )
}

/** The funnel's steps: each counted in targets, shared of the step it follows (voicemail: of the answered). */
const STEPS = [
  { key: "targets", label: "Targets", of: undefined },
  { key: "dialed", label: "Dialled", of: "targets" },
  { key: "answered", label: "Answered", of: "dialed" },
  { key: "human", label: "Reached a person", of: "answered" },
  { key: "voicemail", label: "Voicemail only", of: "answered" },
  { key: "talked_30s", label: "Talked 30 s or more", of: "human" },
  { key: "agreed", label: "Agreed", of: "talked_30s" },
] as const

const BAR_WIDTH = 200

function Funnel({ funnel }: { readonly funnel: Analytics["funnel"] }) {
  const top = Math.max(1, ...STEPS.map((s) => funnel[s.key]))
  return (
    <section aria-labelledby="funnel-h">
      <h4 id="funnel-h">Funnel</h4>
      <ol class="funnel">
        {STEPS.map((s) => {
          const n = funnel[s.key]
          return (
            <li key={s.key} data-testid={`funnel-${s.key}`}>
              <span class="funnel-label">{s.label}</span>
              <svg class="funnel-bar" width={BAR_WIDTH} height="16" aria-hidden="true">
                <rect width={BAR_WIDTH} height="16" rx="3" class="bar-track" />
                <rect width={Math.round((n / top) * BAR_WIDTH)} height="16" rx="3" class="bar-fill" />
              </svg>
              <span class="funnel-count" data-testid={`funnel-${s.key}-count`}>
                {n}
              </span>
              {s.of !== undefined && (
                <span class="muted">
                  <span data-testid={`funnel-${s.key}-share`}>{share(n, funnel[s.of])}</span> of{" "}
                  {STEPS.find((x) => x.key === s.of)!.label.toLowerCase()}
                </span>
              )}
            </li>
          )
        })}
      </ol>
    </section>
  )
}

/** A connect rate's shade: 0 without dials, then five steps of 20 points. */
const heatClass = (connects: number, dials: number) =>
  `heat heat-${dials === 0 ? 0 : 1 + Math.min(4, Math.floor((connects / dials) * 5))}`

const WEEKDAYS: Readonly<Record<string, string>> = {
  mon: "Monday",
  tue: "Tuesday",
  wed: "Wednesday",
  thu: "Thursday",
  fri: "Friday",
  sat: "Saturday",
  sun: "Sunday",
}

function HeatMap({ grid }: { readonly grid: Analytics["hour_of_day"] }) {
  const hours = Array.from({ length: 24 }, (_, h) => h)
  return (
    <section aria-labelledby="heat-h">
      <h4 id="heat-h">Connect rate by weekday and hour</h4>
      <p class="muted">Answered calls of those dialled, in the callee's local time; hover a cell for connects/dials.</p>
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: scrolled by keys, so it takes the focus */}
      <section class="table-wrap" aria-label="Connect rate by weekday and hour" tabIndex={0}>
        <table class="heatmap">
          <caption class="visually-hidden">Connect rate by weekday and hour</caption>
          <thead>
            <tr>
              <th scope="col">Day</th>
              {hours.map((h) => (
                <th scope="col" key={h}>
                  {h}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {grid.weekdays.map((d, i) => (
              <tr key={d}>
                <th scope="row">
                  <abbr title={WEEKDAYS[d] ?? d}>{d.charAt(0).toUpperCase() + d.slice(1)}</abbr>
                </th>
                {hours.map((h) => {
                  const dials = grid.dials[i]?.[h] ?? 0
                  const connects = grid.connects[i]?.[h] ?? 0
                  return (
                    <td
                      key={h}
                      class={heatClass(connects, dials)}
                      title={ofDials(connects, dials)}
                      data-testid={`heat-${d}-${h}`}
                    >
                      {cellRate(connects, dials)}
                    </td>
                  )
                })}
              </tr>
            ))}
          </tbody>
        </table>
      </section>
    </section>
  )
}

/** The experiments, or none while the endpoint is missing (404) or the campaign has none. */
function Experiments({ workflowId }: { readonly workflowId: number }) {
  const list = useLoad(
    () =>
      request<{ data: Experiment[] }>("GET", `/api/workflows/${workflowId}/experiments`).catch((e: unknown) => {
        if (e instanceof ApiError && e.status === 404) return { data: [] as Experiment[] }
        throw e
      }),
    [workflowId],
  )
  return (
    <section aria-labelledby="experiments-h">
      <h4 id="experiments-h">Experiments</h4>
      <ErrorText error={list.error} />
      {list.data &&
        (list.data.data.length === 0 ? (
          <p class="muted">No experiments.</p>
        ) : (
          list.data.data.map((x) => <ExperimentReadout key={x.id} experiment={x} />)
        ))}
    </section>
  )
}

function ExperimentReadout({ experiment: x }: { readonly experiment: Experiment }) {
  const r = x.readout
  const currency = r.currency
  const stopped = new Set(x.arms.filter((a) => a.stopped).map((a) => a.name))
  const control = r.agreement.control
  const columns: ReadonlyArray<Column<ArmFigures>> = [
    {
      title: "Arm",
      cell: (a) => (
        <>
          {a.name}
          {a.name === control && <span class="muted"> (control)</span>}
          {stopped.has(a.name) && <span class="muted"> (stopped)</span>}
          {a.name === r.better && (
            <>
              {" "}
              <span class="badge badge-better" data-testid={`better-${a.name}`}>
                Better
              </span>
            </>
          )}
        </>
      ),
    },
    { title: "Targets", cell: (a) => <span data-testid={`targets-${a.name}`}>{a.targets}</span> },
    { title: "Calls", cell: (a) => <span data-testid={`calls-${a.name}`}>{a.calls}</span> },
    { title: "Connects", cell: (a) => <RateCell id={`connects-${a.name}`} rate={a.connects} /> },
    { title: "Agreement", cell: (a) => <RateCell id={`agreement-${a.name}`} rate={a.agreement} /> },
    { title: "Goal met", cell: (a) => <RateCell id={`goal-${a.name}`} rate={a.goal_met} /> },
    { title: "Opt-outs", cell: (a) => <RateCell id={`optouts-${a.name}`} rate={a.opt_outs} /> },
    {
      title: "Talk time",
      cell: (a) => (
        <span class="nowrap" data-testid={`talk-${a.name}`}>
          {seconds(a.talk_seconds_avg)}
        </span>
      ),
    },
    {
      title: "Approvals asked / granted",
      cell: (a) => (
        <span
          class="nowrap"
          data-testid={`approvals-${a.name}`}
        >{`${a.approvals_asked} / ${a.approvals_granted}`}</span>
      ),
    },
    {
      title: "Cost per agreement",
      cell: (a) => (
        <span class="nowrap" data-testid={`cpa-${a.name}`}>
          {moneyMinor(a.cost_per_agreement_minor, currency)}
        </span>
      ),
    },
  ]
  return (
    <section class="panel experiment" aria-labelledby={`exp-${x.id}-h`}>
      <h5 id={`exp-${x.id}-h`}>
        {x.name}{" "}
        <span class={`badge badge-${x.status === "running" ? "running" : "ended"}`}>
          {x.status === "running" ? "Running" : "Ended"}
        </span>
      </h5>
      {x.promoted_arm !== null && <p class="ok">{x.promoted_arm} was promoted to the rule book.</p>}
      <p class="statement" data-testid="statement">
        {r.statement}
      </p>
      <Table caption={`Arms of ${x.name}`} columns={columns} rows={r.arms} rowKey={(a) => a.name} />
      <IntervalPlot readout={r.agreement} />
      <h6>Against the control ({control}), agreement rate</h6>
      <ul class="plain comparisons">
        {r.agreement.comparisons.map((c) => (
          <li key={c.arm} data-testid={`comparison-${c.arm}`}>
            <strong>
              {c.arm} vs {c.control}:
            </strong>{" "}
            {c.difference === null ? (
              "no difference yet (an arm has no calls)"
            ) : (
              <>
                <span data-testid={`diff-${c.arm}`}>{points(c.difference.diff)}</span>{" "}
                <span data-testid={`diff-ci-${c.arm}`}>
                  {pointsInterval(c.difference.ci_low, c.difference.ci_high)}
                </span>
                {c.sequential && (
                  <span class="muted">
                    {" "}
                    (always valid: {pointsInterval(c.sequential.ci_low, c.sequential.ci_high)})
                  </span>
                )}
              </>
            )}
            {c.decided ? <span class="badge badge-running">Told apart</span> : <span class="badge">Not yet</span>}
            <br />
            <span class="muted">{c.statement}</span>
          </li>
        ))}
      </ul>
    </section>
  )
}

function RateCell({ id, rate }: { readonly id: string; readonly rate: Rate }) {
  return (
    <span class="nowrap">
      <span data-testid={id}>{percent(rate.rate)}</span>{" "}
      <span class="muted" data-testid={`${id}-ci`}>
        {interval(rate.ci_low, rate.ci_high)}
      </span>
    </span>
  )
}

const PLOT_W = 320
const PLOT_LEFT = 80
const ROW_H = 26

/** Each arm's agreement rate as a dot on its 95% interval, on one 0–100% axis. */
function IntervalPlot({ readout }: { readonly readout: Readout }) {
  const x = (v: number) => PLOT_LEFT + v * PLOT_W
  const height = readout.arms.length * ROW_H + 24
  const label = readout.arms.map((a) => `${a.name}: ${percent(a.rate)} ${interval(a.ci_low, a.ci_high)}`).join("; ")
  return (
    <svg
      class="interval-plot"
      width={PLOT_LEFT + PLOT_W + 20}
      height={height}
      viewBox={`0 0 ${PLOT_LEFT + PLOT_W + 20} ${height}`}
      role="img"
      aria-label={`Agreement rate with 95% intervals: ${label}`}
    >
      {[0, 0.25, 0.5, 0.75, 1].map((t) => (
        <g key={t}>
          <line x1={x(t)} x2={x(t)} y1={0} y2={height - 18} class="plot-grid" />
          <text x={x(t)} y={height - 4} text-anchor="middle" class="plot-tick">
            {`${t * 100}%`}
          </text>
        </g>
      ))}
      {readout.arms.map((a, i) => {
        const y = i * ROW_H + ROW_H / 2
        return (
          <g key={a.name} class={a.name === readout.better ? "plot-arm plot-better" : "plot-arm"}>
            <text x={PLOT_LEFT - 8} y={y + 4} text-anchor="end" class="plot-label">
              {a.name}
            </text>
            <line x1={x(a.ci_low)} x2={x(a.ci_high)} y1={y} y2={y} class="plot-ci" />
            <line x1={x(a.ci_low)} x2={x(a.ci_low)} y1={y - 5} y2={y + 5} class="plot-ci" />
            <line x1={x(a.ci_high)} x2={x(a.ci_high)} y1={y - 5} y2={y + 5} class="plot-ci" />
            {a.rate !== null && <circle cx={x(a.rate)} cy={y} r={4} class="plot-dot" />}
          </g>
        )
      })}
    </svg>
  )
}
