// A workflow's runs and, for the chosen one, its results: one row per target with the final
// outcome and the post-call analysis (GET /api/runs/{id}/results, JSON pages), searched, filtered by
// outcome and sorted by column over the rows loaded; any row opens the call drawer (call-drawer.tsx).
// The whole run downloads as a CSV, which the browser streams to disk from the same endpoint.
import { useEffect, useRef, useState } from "preact/hooks"
import { request } from "../api.js"
import { Button, duration, ErrorText, Field, money, Table, useLoad } from "../ui.js"
import { analysisStatusWords, outcomeWords, runStatusWords, sentimentWords, targetStatusWords } from "../words.js"
import { CallDrawer, type ResultRow } from "./call-drawer.js"

interface Run {
  readonly id: number
  readonly status: string
  readonly started_at: string | null
  readonly ended_at: string | null
  readonly targets_total: number
  readonly targets_dialed: number
  readonly targets_connected: number
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
            { title: "Status", cell: (r) => runStatusWords(r.status) },
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

/** What a row's outcome reads as: the final outcome, else where the target is. */
const outcomeOf = (r: ResultRow) => (r.outcome === null ? targetStatusWords(r.status) : outcomeWords(r.outcome))

function ResultsTable({ runId }: { readonly runId: number }) {
  const [page, setPage] = useState<ResultsPage | undefined>(undefined)
  const [rows, setRows] = useState<ReadonlyArray<ResultRow>>([])
  const [loading, setLoading] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const [search, setSearch] = useState("")
  const [outcome, setOutcome] = useState("")
  const [open, setOpen] = useState<ResultRow | undefined>(undefined)
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
  const outcomes = [...new Set(rows.map(outcomeOf))].sort()
  const needle = search.trim().toLowerCase()
  const digits = needle.replace(/[^\d]/g, "")
  const shown = rows.filter(
    (r) =>
      (outcome === "" || outcomeOf(r) === outcome) &&
      (needle === "" ||
        (r.name ?? "").toLowerCase().includes(needle) ||
        r.phone.includes(needle) ||
        (digits !== "" && r.phone.replace(/[^\d]/g, "").includes(digits))),
  )
  return (
    <section aria-labelledby={`results-${runId}-h`}>
      <h4 id={`results-${runId}-h`}>Results of run {runId}</h4>
      <ErrorText error={error} />
      {page === undefined ? (
        loading && <p>Loading…</p>
      ) : (
        <>
          {rows.length > 0 && (
            <div class="filters">
              <Field label="Search by name or phone">
                {(id) => (
                  <input
                    id={id}
                    type="search"
                    maxLength={100}
                    value={search}
                    onInput={(e) => setSearch(e.currentTarget.value)}
                  />
                )}
              </Field>
              <Field label="Outcome">
                {(id) => (
                  <select id={id} value={outcome} onChange={(e) => setOutcome(e.currentTarget.value)}>
                    <option value="">Every outcome</option>
                    {outcomes.map((o) => (
                      <option key={o} value={o}>
                        {o}
                      </option>
                    ))}
                  </select>
                )}
              </Field>
            </div>
          )}
          {rows.length > 0 && shown.length !== rows.length && (
            <p class="muted" role="status">
              {shown.length} of {rows.length} shown.
            </p>
          )}
          <Table<ResultRow>
            caption={`One row per target of run ${runId}`}
            rows={shown}
            rowKey={(r) => r.target_id}
            empty={rows.length === 0 ? "No targets." : "No results match."}
            columns={[
              {
                title: "Name",
                sort: (r) => r.name,
                cell: (r) => (
                  <button
                    type="button"
                    class="link"
                    onClick={() => setOpen(r)}
                    aria-label={`Open the call to ${r.name ?? r.phone}`}
                  >
                    {r.name ?? "—"}
                  </button>
                ),
              },
              { title: "Phone", sort: (r) => r.phone, cell: (r) => r.phone },
              { title: "Outcome", sort: outcomeOf, cell: outcomeOf },
              { title: "Attempts", sort: (r) => r.attempts, cell: (r) => r.attempts },
              { title: "Talk time", sort: (r) => r.talk_seconds, cell: (r) => duration(r.talk_seconds) },
              { title: "Cost", sort: (r) => r.cost_minor, cell: (r) => money(r.cost_minor, currency) },
              { title: "Goal met", sort: (r) => yesNo(r.goal_met), cell: (r) => yesNo(r.goal_met) },
              { title: "Sentiment", sort: (r) => r.sentiment, cell: (r) => sentimentWords(r.sentiment) },
              {
                title: "Summary",
                cell: (r) => <span class="cell-prose">{r.summary ?? analysisNote(r.analysis_status)}</span>,
              },
              {
                title: "Agreed value",
                sort: (r) => r.agreed_value_minor,
                cell: (r) => (r.agreed_value_minor === null ? "—" : money(r.agreed_value_minor, currency)),
              },
              {
                title: "Call back",
                sort: (r) => r.callback_at,
                cell: (r) => (r.callback_at === null ? "—" : new Date(r.callback_at).toLocaleString()),
              },
              ...fields.map((f) => ({ title: f.name, cell: (r: ResultRow) => cellText(r.fields[f.name]) })),
            ]}
          />
        </>
      )}
      {page?.next_cursor != null && (
        <Button busy={loading} onClick={() => void load(page.next_cursor)}>
          More
        </Button>
      )}
      {open && <CallDrawer runId={runId} row={open} currency={currency} onClose={() => setOpen(undefined)} />}
    </section>
  )
}

const yesNo = (v: boolean | null) => (v === null ? "—" : v ? "yes" : "no")

function analysisNote(status: string | null): string {
  return status === null || status === "done" ? "—" : analysisStatusWords(status)
}

/** An extracted field as text (Preact escapes it); null is a dash. */
function cellText(v: unknown): string {
  if (v === null || v === undefined) return "—"
  if (typeof v === "boolean") return v ? "yes" : "no"
  return String(v)
}
