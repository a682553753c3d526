// A campaign's progress and its runs (GET /api/workflows/{id}/runs): the latest run's targets done of
// its total as a bar, its outcomes counted, what it has cost so far in the workspace's currency, and
// once it ends, a finished state with the breakdown. While the run is running its row is read again
// every few seconds (GET …/runs?limit=1, only then, and not while the tab is hidden); the approvals
// feed brings a decision's change to the counts (a late decision rewrites an outcome) at once.
import { useEffect, useRef, useState } from "preact/hooks"
import { request } from "../api.js"
import { useApprovalChanges } from "../approvals-feed.js"
import { Button, ErrorText, money, Table, useLoad } from "../ui.js"
import { outcomeWords, runStatusWords } from "../words.js"

interface Run {
  readonly id: number
  readonly status: string
  readonly finished?: boolean
  readonly started_at: string | null
  readonly ended_at?: string | null
  readonly pause_reason?: string | null
  readonly targets_total: number
  readonly targets_queued?: number
  readonly targets_dialing?: number
  readonly targets_done?: number
  readonly targets_dialed: number
  readonly targets_connected: number
  /** Final outcomes of the done and skipped targets, counted. */
  readonly outcomes?: Readonly<Record<string, number>>
  readonly approvals_pending?: number
  readonly spend?: {
    readonly calls_minor: number
    readonly analyses_minor: number
    readonly total_minor: number
    readonly currency: string
  }
}

/** How often a running run's progress is read again. */
const PROGRESS_MS = 3_000
const ENDED = new Set(["completed", "cancelled", "failed"])

const isFinished = (r: Run) => r.finished ?? ENDED.has(r.status)

export function CampaignOverview({
  workflowId,
  onRunEnded,
}: {
  readonly workflowId: number
  /** Called once when a run shown running ends (the campaign's state and readiness change with it). */
  readonly onRunEnded?: () => void
}) {
  const runs = useLoad(
    () => request<{ runs: Run[] }>("GET", `/api/workflows/${workflowId}/runs?limit=20`),
    [workflowId],
  )
  // The latest run as last read on its own (while it runs), newer than the list's copy.
  const [fresh, setFresh] = useState<Run | undefined>(undefined)
  const listed = runs.data?.runs[0]
  const latest = fresh !== undefined && fresh.id === listed?.id ? fresh : listed
  const running = latest !== undefined && latest.status === "running"

  const ended = useRef(onRunEnded)
  ended.current = onRunEnded
  const reads = useRef(0)
  // What the latest run was when last shown: a read that finds it no longer running ends it here.
  const shown = useRef<Run | undefined>(undefined)
  shown.current = latest
  const readLatest = () => {
    const n = ++reads.current
    request<{ runs: Run[] }>("GET", `/api/workflows/${workflowId}/runs?limit=1`).then(
      (r) => {
        const run = r.runs[0]
        if (n !== reads.current || run === undefined) return
        const before = shown.current
        setFresh(run)
        // It ended while shown running: the list and the campaign are read again, once.
        if (before?.id === run.id && before.status === "running" && run.status !== "running") {
          runs.reload()
          ended.current?.()
        }
      },
      () => undefined,
    )
  }
  useEffect(() => {
    if (!running) return
    const t = setInterval(() => {
      if (!document.hidden) readLatest()
    }, PROGRESS_MS)
    return () => clearInterval(t)
  }, [running, workflowId])
  // A decision changes the counts (a waiting outcome becomes agreed or denied after the call).
  useApprovalChanges(() => {
    if (latest !== undefined) readLatest()
  })

  const rows = runs.data?.runs.map((r) => (latest !== undefined && r.id === latest.id ? latest : r)) ?? []
  return (
    <>
      {latest !== undefined && <Progress run={latest} />}
      <section aria-labelledby="overview-runs-h">
        <h3 id="overview-runs-h">Runs</h3>
        <ErrorText error={runs.error} />
        {runs.data && (
          <Table<Run>
            caption="The campaign's runs, newest first"
            rows={rows}
            rowKey={(r) => r.id}
            empty="Not run yet."
            columns={[
              { title: "Run", cell: (r) => r.id },
              { title: "Started", cell: (r) => (r.started_at ? new Date(r.started_at).toLocaleString() : "—") },
              { title: "Status", cell: (r) => runStatusWords(r.status) },
              { title: "Done", cell: (r) => `${r.targets_done ?? r.targets_dialed} of ${r.targets_total}` },
              { title: "Dialed", cell: (r) => `${r.targets_dialed} of ${r.targets_total}` },
              { title: "Connected", cell: (r) => r.targets_connected },
              { title: "Spent", cell: (r) => (r.spend ? money(r.spend.total_minor, r.spend.currency) : "—") },
            ]}
          />
        )}
        {runs.data && (
          <Button
            onClick={() => {
              runs.reload()
              setFresh(undefined)
            }}
            aria-label="Refresh the runs"
          >
            Refresh
          </Button>
        )}
      </section>
    </>
  )
}

/** The latest run: a bar of targets done, outcomes counted, spend so far; or how it finished. */
function Progress({ run: r }: { readonly run: Run }) {
  const done = r.targets_done ?? 0
  const total = r.targets_total
  const finished = isFinished(r)
  const outcomes = Object.entries(r.outcomes ?? {}).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
  const title = finished
    ? `${runStatusWords(r.status)} — ${r.targets_dialed} of ${total} called`
    : `${runStatusWords(r.status)} — ${done} of ${total} done`
  return (
    <section aria-labelledby="progress-h" class="progress" data-testid="run-progress">
      <h3 id="progress-h">
        Run {r.id}: {title}
      </h3>
      {finished ? (
        // Said when it happens (a live region, not a status role: the campaign's notices are the status).
        <p aria-live="polite" class={r.status === "completed" ? "ok" : undefined}>
          {r.ended_at ? `Ended ${new Date(r.ended_at).toLocaleString()}. ` : ""}
          {r.status === "completed"
            ? "Every target has an outcome."
            : r.status === "cancelled"
              ? "Stopped before every target was called."
              : "The run could not go on."}
        </p>
      ) : (
        <>
          <progress max={Math.max(total, 1)} value={done} aria-labelledby="progress-h" />
          <p class="hint">
            {r.targets_dialing ?? 0} being called now · {r.targets_queued ?? Math.max(0, total - done)} still to call
            {r.status === "paused" && " (paused: press Run to go on)"}
          </p>
        </>
      )}
      <dl class="kv">
        <dt>Outcomes</dt>
        <dd>
          {outcomes.length === 0 ? (
            <span class="muted">None yet.</span>
          ) : (
            <ul class="plain outcome-counts" aria-label="Outcomes">
              {outcomes.map(([o, n]) => (
                <li key={o}>
                  {outcomeWords(o)}: <strong>{n}</strong>
                </li>
              ))}
            </ul>
          )}
        </dd>
        {(r.approvals_pending ?? 0) > 0 && (
          <>
            <dt>Waiting for you</dt>
            <dd>
              <a href="#/approvals">
                {r.approvals_pending} {r.approvals_pending === 1 ? "approval" : "approvals"} to decide
              </a>
            </dd>
          </>
        )}
        {r.spend && (
          <>
            <dt>{finished ? "Spent" : "Spent so far"}</dt>
            <dd>
              {money(r.spend.total_minor, r.spend.currency)}{" "}
              <span class="muted">
                (calls {money(r.spend.calls_minor, r.spend.currency)}, analyses{" "}
                {money(r.spend.analyses_minor, r.spend.currency)})
              </span>
            </dd>
          </>
        )}
      </dl>
    </section>
  )
}
