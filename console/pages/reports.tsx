// The Reports page: the weekly PDF for any period (a plain download link: the browser sends the
// session cookie with it) and the calls-per-day chart from GET /api/reports/calls-per-day.
import "./account.css"
import { useState } from "preact/hooks"
import { request } from "../api.js"
import { ErrorText, Field, useLoad } from "../ui.js"
import { CallsPerDayChart, type DayCount } from "./reports.chart.js"

const DAY_MS = 86_400_000
const MAX_DAYS = 366
const WINDOWS = [7, 30, 90] as const

const isoDay = (t: number) => new Date(t).toISOString().slice(0, 10)

/** Why this period cannot be asked for, in words; undefined when it can. */
function periodProblem(from: string, to: string): string | undefined {
  const a = Date.parse(`${from}T00:00:00Z`)
  const b = Date.parse(`${to}T00:00:00Z`)
  if (Number.isNaN(a)) return "Choose the first day."
  if (Number.isNaN(b)) return "Choose the last day."
  if (b < a) return "The last day must not be before the first."
  if ((b - a) / DAY_MS + 1 > MAX_DAYS) return `A report covers at most ${MAX_DAYS} days.`
  return undefined
}

export function ReportsPage() {
  const today = isoDay(Date.now())
  const [from, setFrom] = useState(isoDay(Date.now() - 6 * DAY_MS))
  const [to, setTo] = useState(today)
  const [windowDays, setWindowDays] = useState<number>(30)
  const chart = useLoad(
    () => request<{ days: DayCount[] }>("GET", `/api/reports/calls-per-day?days=${windowDays}`),
    [windowDays],
  )
  const problem = periodProblem(from, to)
  const href = `/api/reports/weekly?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`

  return (
    <section aria-labelledby="reports-h">
      <h1 id="reports-h">Reports</h1>
      <section class="panel" aria-labelledby="pdf-h">
        <h2 id="pdf-h">Weekly report (PDF)</h2>
        <p class="muted">
          Calls, connect rate, minutes, spend, approvals and outcomes for a period (UTC dates, inclusive).
        </p>
        <div class="inline-form">
          <Field label="From">
            {(id) => (
              <input id={id} type="date" value={from} max={today} onInput={(e) => setFrom(e.currentTarget.value)} />
            )}
          </Field>
          <Field label="To">
            {(id) => <input id={id} type="date" value={to} onInput={(e) => setTo(e.currentTarget.value)} />}
          </Field>
          {problem === undefined ? (
            <a class="btn btn-primary" href={href} download={`parley-report-${from}-to-${to}.pdf`}>
              Download PDF
            </a>
          ) : (
            <p class="error" role="alert">
              {problem}
            </p>
          )}
        </div>
      </section>
      <section class="panel" aria-labelledby="chart-h">
        <h2 id="chart-h">Calls per day</h2>
        <fieldset class="presets">
          <legend class="visually-hidden">Period shown</legend>
          {WINDOWS.map((d) => (
            <button
              key={d}
              type="button"
              class="btn btn-secondary"
              aria-pressed={windowDays === d}
              onClick={() => setWindowDays(d)}
            >
              Last {d} days
            </button>
          ))}
        </fieldset>
        <ErrorText error={chart.error} />
        {chart.data && <CallsPerDayChart days={chart.data.days} />}
      </section>
    </section>
  )
}
