// GET /api/workflows/{id}: one workflow with its current rule book, audience and run counts,
// consent attestation, whether it may run (and why not), and its latest run's state.
import { Effect } from "effect"
import { z } from "zod"
import { getWorkflow } from "../../src/workflows/workflows.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"

export default route({
  method: "GET",
  path: "/api/workflows/{id}",
  auth: "jwt",
  summary: "A workflow with rule_book, audience_count, runs_count, compliance, readiness and latest_run",
  tags: ["workflows"],
  params: z.object({ id: Id }),
  responses: {
    200: {
      description:
        "The workflow, plus readiness: {ready (the run gate's predicate: nothing missing), missing: [rule_book | " +
        "audience | compliance | email_verified] (what POST run's 409 WORKFLOW_NOT_READY would name), blocked_by: " +
        "retired | run_in_progress | null (POST run's other 409s), can_run (ready and not blocked; the wallet is " +
        "checked when it starts: 402)}, and latest_run: null or {id, run_id, status, finished (completed, cancelled " +
        "or failed), pause_reason, end_reason, started_at, ended_at}",
    },
  },
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* getWorkflow(c.tenantId, params.id))
    }),
})
