// GET /api/workflows/{id}/runs: the workflow's runs, newest first, in cursor pages (limit 1–200,
// default 50; next_cursor beside the list, null on the last page).
import { Effect } from "effect"
import { z } from "zod"
import { listRuns } from "../../src/runs/runs.service.js"
import { route } from "../route.js"
import { Id, PageCursor, PageLimit } from "../schemas.js"
import { callerOf } from "../session.js"
import { sharedJson } from "../shared-read.js"

export default route({
  method: "GET",
  path: "/api/workflows/{id}/runs",
  auth: "jwt",
  cached: true,
  summary: "A workflow's runs, newest first; limit 1–200 (default 50), cursor = next_cursor of the page before",
  tags: ["workflows"],
  params: z.object({ id: Id }),
  query: z.object({ limit: PageLimit, cursor: PageCursor.optional() }),
  responses: {
    200: {
      description:
        "{runs:[{id, run_id, workflow_id, workflow_name, status: running|paused|completed|cancelled|failed, " +
        "finished (completed, cancelled or failed), pause_reason, end_reason, started_at, ended_at, targets_total, " +
        "targets_queued (queued or waiting), targets_dialing, targets_done (a final outcome: done or skipped), " +
        "targets_dialed, targets_connected, outcomes: {outcome: count} over the done and skipped targets (agreed, " +
        "agreed_with_concession, agreed_after_call, declined, no_answer, busy, voicemail_left, callback_scheduled, " +
        "escalated, pending_approval, denied_after_call, …; a skipped target's is the reason), approvals_pending, " +
        "concessions_decided, spend: {calls_minor, analyses_minor, total_minor, currency} (settled so far)}], " +
        "next_cursor (null on the last page)}",
    },
  },
  handler: ({ principal, params, query }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      // A dashboard's polls of the same page share one read (api/shared-read.ts); the counters are its cost.
      return yield* sharedJson(
        `workflows.runs:${c.tenantId}:${params.id}:${JSON.stringify(query)}`,
        listRuns(c.tenantId, params.id, { limit: query.limit, before: query.cursor }),
      )
    }),
})
