// The calls-per-day bar chart (uPlot on a canvas, sized to its box and redrawn when the box
// changes) with the same figures as a table for screen readers and keyboard users.
import { useEffect, useRef } from "preact/hooks"
import uPlot from "uplot"
import "uplot/dist/uPlot.min.css"
import { fitToBox } from "./plot-box.js"

export interface DayCount {
  readonly day: string
  readonly calls: number
}

const HEIGHT = 260
const HALF_DAY_S = 12 * 3600

export function CallsPerDayChart({ days }: { readonly days: ReadonlyArray<DayCount> }) {
  const box = useRef<HTMLDivElement>(null)
  useEffect(() => {
    const el = box.current
    if (el === null) return
    const xs = days.map((d) => Date.parse(`${d.day}T00:00:00Z`) / 1000)
    const ys = days.map((d) => d.calls)
    const plot = new uPlot(
      {
        width: Math.max(240, el.clientWidth),
        height: HEIGHT,
        // Days are UTC dates: label them in UTC whatever the reader's zone.
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        scales: {
          // Each bar is centred on its day: half a day either side keeps the first and last whole.
          x: { time: true, range: (_u, min, max) => [min - HALF_DAY_S, max + HALF_DAY_S] },
          y: { range: (_u, _min, max) => [0, Math.max(1, max)] },
        },
        axes: [
          { stroke: "#555", grid: { show: false } },
          { stroke: "#555", label: "Calls", values: (_u, splits) => splits.map((v) => (Number.isInteger(v) ? v : "")) },
        ],
        series: [
          {},
          {
            label: "Calls",
            stroke: "#2457c5",
            fill: "rgba(36, 87, 197, 0.35)",
            paths: uPlot.paths.bars!({ size: [0.7, 40] }),
            points: { show: false },
          },
        ],
      },
      [xs, ys],
      el,
    )
    return fitToBox(plot, el, HEIGHT)
  }, [days])
  const total = days.reduce((n, d) => n + d.calls, 0)
  return (
    <figure class="chart">
      <div ref={box} role="img" aria-label={`Bar chart: ${total} calls over ${days.length} days`} />
      <figcaption class="muted">
        Calls placed per day (UTC), {days[0]?.day} to {days.at(-1)?.day}: {total} in all.
      </figcaption>
      <details>
        <summary>Show the figures as a table</summary>
        <table>
          <caption class="visually-hidden">Calls per day</caption>
          <thead>
            <tr>
              <th scope="col">Day (UTC)</th>
              <th scope="col">Calls</th>
            </tr>
          </thead>
          <tbody>
            {days.map((d) => (
              <tr key={d.day}>
                <td>{d.day}</td>
                <td>{d.calls}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </figure>
  )
}
