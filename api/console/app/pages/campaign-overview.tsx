// A campaign's overview of its runs: each run's state and how far it has dialled (GET
// /api/workflows/{id}/runs). The campaign page's Overview section shows it.
import { request } from "../api.js"
import { Button, ErrorText, Table, useLoad } from "../ui.js"
import { runStatusWords } from "../words.js"

interface Run {
  readonly id: number
  readonly status: string
  readonly started_at: string | null
  readonly targets_total: number
  readonly targets_dialed: number
  readonly targets_connected: number
}

export function CampaignOverview({ workflowId }: { readonly workflowId: number }) {
  const runs = useLoad(
    () => request<{ runs: Run[] }>("GET", `/api/workflows/${workflowId}/runs?limit=20`),
    [workflowId],
  )
  return (
    <section aria-labelledby="overview-runs-h">
      <h3 id="overview-runs-h">Runs</h3>
      <ErrorText error={runs.error} />
      {runs.data && (
        <Table<Run>
          caption="The campaign's runs, newest first"
          rows={runs.data.runs}
          rowKey={(r) => r.id}
          empty="Not run yet."
          columns={[
            { title: "Run", cell: (r) => r.id },
            { title: "Started", cell: (r) => (r.started_at ? new Date(r.started_at).toLocaleString() : "—") },
            { title: "Status", cell: (r) => runStatusWords(r.status) },
            { title: "Dialed", cell: (r) => `${r.targets_dialed} of ${r.targets_total}` },
            { title: "Connected", cell: (r) => r.targets_connected },
          ]}
        />
      )}
      {runs.data && (
        <Button onClick={runs.reload} aria-label="Refresh the runs">
          Refresh
        </Button>
      )}
    </section>
  )
}
