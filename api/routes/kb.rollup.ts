// GET /kb/rollup: what supervisors said about the agent's lines over a window — verdict counts, the
// most-flagged turns and the rules the verdicts became.
import { Effect } from "effect"
import { z } from "zod"
import { rollup, TOP_TURNS, WINDOW_DEFAULT_DAYS, WINDOW_MAX_DAYS } from "../../src/kb/rollup.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id, QueryInt } from "../schemas.js"
import { callerOf } from "../session.js"

export default route({
  method: "GET",
  path: "/kb/rollup",
  auth: "jwt",
  summary:
    `Feedback rollup over the last window_days (1–${WINDOW_MAX_DAYS}, default ${WINDOW_DEFAULT_DAYS}), the ` +
    "workspace's or one workflow's (another workspace's workflow: 404)",
  tags: ["knowledge base"],
  query: z.object({
    workflow_id: Id.optional(),
    window_days: QueryInt(1, WINDOW_MAX_DAYS).optional(),
  }),
  responses: {
    200: {
      description:
        "{window_days, workflow_id, counts: {reward, punish, ban, promoted (verdicts linked to a rule)}, " +
        `top_turns: [{turn_id, text (≤ 160 chars), verdicts: {reward, punish, ban}, total}] (top ${TOP_TURNS} by ` +
        "total, then the most recently judged), rules_from_feedback: [{…rule, feedback_count}] (created in the " +
        "window, newest first, at most 100)}",
    },
  },
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(
        yield* rollup(caller.tenantId, {
          workflowId: query.workflow_id,
          windowDays: query.window_days ?? WINDOW_DEFAULT_DAYS,
        }),
      )
    }),
})
