// The Analytics view's outcomes-over-time chart: one line per outcome per UTC day (uPlot on a canvas,
// sized to its box), a legend in words and the same figures as a table for screen readers and keyboards.
import { useEffect, useRef } from "preact/hooks"
import uPlot from "uplot"
import "uplot/dist/uPlot.min.css"
import { outcomeWords } from "../words.js"
import { fitToBox } from "./plot-box.js"

export interface DayOutcomes {
  readonly day: string
  readonly total: number
  readonly outcomes: Readonly<Record<string, number>>
}

const HEIGHT = 260
/** Line colours, in order of the outcomes' totals; told apart by the legend's words too, not colour alone. */
const PALETTE = ["#2457c5", "#146c2e", "#b3261e", "#8a5a00", "#6b3fa0", "#00696f", "#a3366b", "#4d4d4d"]

export const colourOf = (i: number): string => PALETTE[i % PALETTE.length]!

/** Every outcome the days hold, the most frequent first (ties by name, so the order is stable). */
export function outcomesOf(days: ReadonlyArray<DayOutcomes>): string[] {
  const totals = new Map<string, number>()
  for (const d of days) for (const [o, n] of Object.entries(d.outcomes)) totals.set(o, (totals.get(o) ?? 0) + n)
  return [...totals].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([o]) => o)
}

const outcomeLabel = (o: string) => (o === "in_progress" ? "Still in progress" : outcomeWords(o))

export function OutcomesChart({ days }: { readonly days: ReadonlyArray<DayOutcomes> }) {
  const box = useRef<HTMLDivElement>(null)
  const outcomes = outcomesOf(days)
  useEffect(() => {
    const el = box.current
    if (el === null || outcomes.length === 0) return
    const xs = days.map((d) => Date.parse(`${d.day}T00:00:00Z`) / 1000)
    const plot = new uPlot(
      {
        width: Math.max(240, el.clientWidth),
        height: HEIGHT,
        // Days are UTC dates: label them in UTC whatever the reader's zone.
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
        axes: [
          { stroke: "#555", grid: { show: false } },
          { stroke: "#555", label: "Calls", values: (_u, splits) => splits.map((v) => (Number.isInteger(v) ? v : "")) },
        ],
        series: [
          {},
          ...outcomes.map((o, i) => ({
            label: outcomeLabel(o),
            stroke: colourOf(i),
            width: 2,
            points: { show: days.length <= 31 },
          })),
        ],
      },
      [xs, ...outcomes.map((o) => days.map((d) => d.outcomes[o] ?? 0))],
      el,
    )
    return fitToBox(plot, el, HEIGHT)
  }, [days])
  const total = days.reduce((n, d) => n + d.total, 0)
  if (total === 0) return <p class="muted">No calls placed in this period.</p>
  return (
    <figure class="chart">
      <div
        ref={box}
        role="img"
        aria-label={`Line chart: ${total} calls over ${days.length} days, one line per outcome`}
      />
      <ul class="legend" aria-label="Outcomes shown">
        {outcomes.map((o, i) => (
          <li key={o}>
            <svg width="14" height="14" aria-hidden="true">
              <rect width="14" height="14" rx="2" fill={colourOf(i)} />
            </svg>
            {outcomeLabel(o)}
          </li>
        ))}
      </ul>
      <figcaption class="muted">
        Calls by outcome per day (UTC), {days[0]?.day} to {days.at(-1)?.day}: {total} in all.
      </figcaption>
      <details>
        <summary>Show the figures as a table</summary>
        <table>
          <caption class="visually-hidden">Calls by outcome per day</caption>
          <thead>
            <tr>
              <th scope="col">Day (UTC)</th>
              {outcomes.map((o) => (
                <th scope="col" key={o}>
                  {outcomeLabel(o)}
                </th>
              ))}
              <th scope="col">All</th>
            </tr>
          </thead>
          <tbody>
            {days
              .filter((d) => d.total > 0)
              .map((d) => (
                <tr key={d.day}>
                  <td>{d.day}</td>
                  {outcomes.map((o) => (
                    <td key={o}>{d.outcomes[o] ?? 0}</td>
                  ))}
                  <td>{d.total}</td>
                </tr>
              ))}
          </tbody>
        </table>
      </details>
    </figure>
  )
}
