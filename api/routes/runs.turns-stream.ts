// GET /api/runs/{run_id}/turns/stream: a run's transcript as server-sent events, history first
// (after since_seq or Last-Event-ID, optionally one target's), then live, each event's id its seq.
import { Effect } from "effect"
import { z } from "zod"
import { ValidationFailed } from "../../src/platform/errors.js"
import { openTurnStream } from "../../src/turns/turns.service.js"
import { stream } from "../reply.js"
import { route } from "../route.js"
import { Id, QueryInt } from "../schemas.js"
import { callerOf } from "../session.js"

const MAX_SEQ = Number.MAX_SAFE_INTEGER

export default route({
  method: "GET",
  path: "/api/runs/{run_id}/turns/stream",
  auth: "jwt",
  summary:
    "Stream a run's turns (text/event-stream): history after since_seq, then live; keepalive every 15 s, closed " +
    "after 30 min idle",
  tags: ["runs", "turns"],
  params: z.object({ run_id: Id }),
  query: z.object({ since_seq: QueryInt(-1, MAX_SEQ).optional(), target_id: Id.optional() }),
  responses: {
    200: {
      description:
        "Unnamed events: `id: <seq>` and " +
        "`data: {turn_id, seq, run_id, target_id, call_id, turn_index, speaker, text, at, outcome_id}` (plus " +
        "interrupted and latency_ms on a call heard as audio, arm on a call in an experiment)",
      contentType: "text/event-stream",
    },
  },
  handler: ({ principal, params, query, headers }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      // A browser's EventSource resumes with Last-Event-ID; an explicit since_seq wins.
      let sinceSeq = query.since_seq
      if (sinceSeq === undefined && headers["last-event-id"] !== undefined) {
        const last = headers["last-event-id"].trim()
        if (!/^-?\d{1,16}$/.test(last) || Number(last) < -1)
          return yield* Effect.fail(
            new ValidationFailed({
              message: "Last-Event-ID must be a turn seq",
              errors: [{ field: "Last-Event-ID", message: "must be an integer of at least -1" }],
            }),
          )
        sinceSeq = Number(last)
      }
      const serve = yield* openTurnStream(c.tenantId, params.run_id, {
        sinceSeq: sinceSeq ?? -1,
        targetId: query.target_id,
      })
      return stream("text/event-stream; charset=utf-8", serve, 200, {
        "Cache-Control": "no-cache",
        "X-Accel-Buffering": "no",
      })
    }),
})
