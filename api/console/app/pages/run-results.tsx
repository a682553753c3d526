// A workflow's runs and, for the chosen one, its results: one row per target with the final
// outcome and the post-call analysis (GET /api/runs/{id}/results, JSON pages), and the whole run
// as a CSV download, which the browser streams to disk from the same endpoint.
import { useEffect, useRef, useState } from "preact/hooks"
import { request } from "../api.js"
import { Button, duration, ErrorText, money, Table, useLoad } from "../ui.js"

interface Run {
  readonly id: number
  readonly status: string
  readonly started_at: string | null
  readonly ended_at: string | null
  readonly targets_total: number
  readonly targets_dialed: number
  readonly targets_connected: number
}

interface ResultRow {
  readonly target_id: number
  readonly phone: string
  readonly name: string | null
  readonly status: string
  readonly outcome: string | null
  readonly attempts: number
  readonly talk_seconds: number
  readonly cost_minor: number
  readonly analysis_status: string | null
  readonly summary: string | null
  readonly goal_met: boolean | null
  readonly sentiment: string | null
  readonly callback_at: string | null
  readonly agreed_value_minor: number | null
  readonly fields: Readonly<Record<string, unknown>>
}

interface ResultsPage {
  readonly currency: string
  readonly fields: ReadonlyArray<{ readonly name: string; readonly type: string }>
  readonly results: ReadonlyArray<ResultRow>
  readonly next_cursor: string | null
}

const PAGE = 50

export function RunResults({ workflowId }: { readonly workflowId: number }) {
  const runs = useLoad(
    () => request<{ runs: Run[] }>("GET", `/api/workflows/${workflowId}/runs?limit=20`),
    [workflowId],
  )
  const [chosen, setChosen] = useState<number | undefined>(undefined)

  return (
    <section aria-labelledby="runs-h">
      <h3 id="runs-h">Runs and results</h3>
      <ErrorText error={runs.error} />
      {runs.data && (
        <Table<Run>
          caption="The workflow's runs, newest first"
          rows={runs.data.runs}
          rowKey={(r) => r.id}
          empty="Not run yet."
          columns={[
            { title: "Run", cell: (r) => r.id },
            { title: "Started", cell: (r) => (r.started_at ? new Date(r.started_at).toLocaleString() : "—") },
            { title: "Status", cell: (r) => r.status },
            { title: "Dialed", cell: (r) => `${r.targets_dialed} of ${r.targets_total}` },
            { title: "Connected", cell: (r) => r.targets_connected },
            {
              title: "Results",
              cell: (r) => (
                <span class="actions">
                  <Button aria-pressed={chosen === r.id} onClick={() => setChosen(r.id)}>
                    Show results
                  </Button>
                  <a href={`/api/runs/${r.id}/results?format=csv`} download={`run-${r.id}-results.csv`}>
                    Download CSV
                  </a>
                </span>
              ),
            },
          ]}
        />
      )}
      {runs.data && (
        <Button onClick={runs.reload} aria-label="Refresh the runs">
          Refresh
        </Button>
      )}
      {chosen !== undefined && <ResultsTable key={chosen} runId={chosen} />}
    </section>
  )
}

function ResultsTable({ runId }: { readonly runId: number }) {
  const [page, setPage] = useState<ResultsPage | undefined>(undefined)
  const [rows, setRows] = useState<ReadonlyArray<ResultRow>>([])
  const [loading, setLoading] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const alive = useRef(true)
  useEffect(() => () => void (alive.current = false), [])

  const load = async (cursor: string | null) => {
    setLoading(true)
    setError(undefined)
    try {
      const q = cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`
      const p = await request<ResultsPage>("GET", `/api/runs/${runId}/results?format=json&limit=${PAGE}${q}`)
      if (!alive.current) return
      setPage(p)
      setRows((r) => (cursor === null ? p.results : [...r, ...p.results]))
    } catch (e) {
      if (alive.current) setError(e)
    } finally {
      if (alive.current) setLoading(false)
    }
  }
  useEffect(() => void load(null), [runId])

  const currency = page?.currency ?? "USD"
  const fields = page?.fields ?? []
  return (
    <section aria-labelledby={`results-${runId}-h`}>
      <h4 id={`results-${runId}-h`}>Results of run {runId}</h4>
      <ErrorText error={error} />
      {page === undefined ? (
        loading && <p>Loading…</p>
      ) : (
        <Table<ResultRow>
          caption={`One row per target of run ${runId}`}
          rows={rows}
          rowKey={(r) => r.target_id}
          empty="No targets."
          columns={[
            { title: "Name", cell: (r) => r.name ?? "—" },
            { title: "Phone", cell: (r) => r.phone },
            { title: "Outcome", cell: (r) => r.outcome ?? r.status },
            { title: "Attempts", cell: (r) => r.attempts },
            { title: "Talk time", cell: (r) => duration(r.talk_seconds) },
            { title: "Cost", cell: (r) => money(r.cost_minor, currency) },
            { title: "Goal met", cell: (r) => yesNo(r.goal_met) },
            { title: "Sentiment", cell: (r) => r.sentiment ?? "—" },
            {
              title: "Summary",
              cell: (r) => <span class="cell-prose">{r.summary ?? analysisNote(r.analysis_status)}</span>,
            },
            {
              title: "Agreed value",
              cell: (r) => (r.agreed_value_minor === null ? "—" : money(r.agreed_value_minor, currency)),
            },
            {
              title: "Call back",
              cell: (r) => (r.callback_at === null ? "—" : new Date(r.callback_at).toLocaleString()),
            },
            ...fields.map((f) => ({ title: f.name, cell: (r: ResultRow) => cellText(r.fields[f.name]) })),
          ]}
        />
      )}
      {page?.next_cursor != null && (
        <Button busy={loading} onClick={() => void load(page.next_cursor)}>
          More
        </Button>
      )}
    </section>
  )
}

const yesNo = (v: boolean | null) => (v === null ? "—" : v ? "yes" : "no")

function analysisNote(status: string | null): string {
  if (status === "pending") return "Being analysed…"
  if (status === "failed") return "Analysis failed."
  return "—"
}

/** An extracted field as text (Preact escapes it); null is a dash. */
function cellText(v: unknown): string {
  if (v === null || v === undefined) return "—"
  if (typeof v === "boolean") return v ? "yes" : "no"
  return String(v)
}
