// GET /api/runs/live: the workspace's calls in flight, across every runtime process (at most 20),
// each with the run and target ids its turn stream needs.
import { Effect } from "effect"
import { z } from "zod"
import { listLiveCalls } from "../../src/turns/turns.service.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"
import { sharedJson } from "../shared-read.js"

export default route({
  method: "GET",
  path: "/api/runs/live",
  auth: "jwt",
  summary: "Calls in flight (at most 20, newest first)",
  tags: ["runs"],
  query: z.object({ run_id: Id.optional() }),
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      // A dashboard's polls share one read (api/shared-read.ts).
      return yield* sharedJson(
        `runs.live:${c.tenantId}:${query.run_id ?? ""}`,
        Effect.map(listLiveCalls(c.tenantId, query.run_id), (calls) => ({ count: calls.length, calls })),
      )
    }),
})
