// POST /api/workflows/{id}/run and /pause: a ready workflow goes live and its run dials (a paused
// run resumes with its run_id); pausing stops queued targets while calls in flight finish.
import { Effect } from "effect"
import { z } from "zod"
import { pauseRun, startRun } from "../../src/runs/runs.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"

export const workflowRun = route({
  method: "POST",
  path: "/api/workflows/{id}/run",
  auth: "jwt",
  summary: "Start (or resume) the workflow's run",
  tags: ["workflows", "runs"],
  params: z.object({ id: Id }),
  responses: {
    201: { description: "{run_id, status: running, targets_queued, resumed}" },
    402: { description: "The wallet cannot pay for one 180-second call (INSUFFICIENT_FUNDS)" },
    409: { description: "WORKFLOW_NOT_READY with missing, RUN_IN_PROGRESS, or WORKFLOW_RETIRED" },
  },
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* startRun(c.tenantId, params.id), 201)
    }),
})

export const workflowPause = route({
  method: "POST",
  path: "/api/workflows/{id}/pause",
  auth: "jwt",
  // A supervisor watching live calls may stop a campaign that is going wrong (not start one).
  permission: "supervise",
  summary: "Pause the workflow: queued targets stop, calls in flight finish",
  tags: ["workflows", "runs"],
  params: z.object({ id: Id }),
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* pauseRun(c.tenantId, params.id))
    }),
})
