// GET /api/runs/live: the workspace's calls in flight, across every runtime process (at most 20),
// each with the run and target ids its turn stream needs, the callee's and campaign's names, and the
// approval a held callee waits for.
import { Effect } from "effect"
import { z } from "zod"
import { listLiveCalls } from "../../src/turns/turns.service.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"
import { sharedJson, untilEarliest } from "../shared-read.js"

export default route({
  method: "GET",
  path: "/api/runs/live",
  auth: "jwt",
  cached: true,
  summary: "Calls in flight (at most 20, newest first)",
  tags: ["runs"],
  query: z.object({ run_id: Id.optional() }),
  responses: {
    200: {
      description:
        "{count, calls: [{call_id, run_id, workflow_id, workflow_name (the campaign's name), target_id, phone_e164, " +
        "target_name (the callee's name, null when the audience row has none), status: dialing|connected, attempt, " +
        "started_at, answered_at, turns, last_seq, stream_url, on_hold: null, or {approval_id, hold_until} while the " +
        "callee holds for a human's decision on that approval (POST /api/approvals/{approval_id}/decide before " +
        "hold_until, and they hear it)}]}",
    },
  },
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      // A dashboard's polls share one read (api/shared-read.ts).
      return yield* sharedJson(
        `runs.live:${c.tenantId}:${query.run_id ?? ""}`,
        Effect.map(listLiveCalls(c.tenantId, query.run_id), (calls) => ({ count: calls.length, calls })),
        // A hold shows until it runs out.
        (live) => untilEarliest(live.calls.map((call) => call.on_hold?.hold_until)),
      )
    }),
})
