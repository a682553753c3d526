// GET /api/calls/{call_id}/listen: a live call's audio, both sides mixed, as server-sent events of
// μ-law (8 kHz), about 100 ms of audio each, a little behind the call; the stream ends with the call.
import { Effect } from "effect"
import { z } from "zod"
import { openListenStream } from "../../src/calls/listen.service.js"
import { stream } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"

export default route({
  method: "GET",
  path: "/api/calls/{call_id}/listen",
  auth: "jwt",
  summary:
    "Listen in on a live call heard as audio (text/event-stream): both sides mixed, as 8 kHz μ-law, an event " +
    "about every 100 ms, some 100–200 ms behind the call; ended with the call, or when the credential is signed " +
    "out, revoked, expires or its user's role changes; at most 5 listeners a call (per api process)",
  tags: ["calls"],
  params: z.object({ call_id: Id }),
  responses: {
    200: {
      description:
        'Named events without ids. First `event: start` with `data: {call_id, encoding: "audio/x-mulaw", ' +
        "sample_rate: 8000, time_scale}` (a simulated call's audio may run faster than real time: its events then " +
        "carry more audio each). Then `event: audio` with `data: {seq, from_ms, ulaw}`: `ulaw` is base64 of n × 160 " +
        "bytes (n frames of 20 ms, silence where nobody spoke), from `from_ms` ms of the call as heard since the " +
        "stream's room opened; seq counts up by 1. Last `event: end` with `data: {reason: stopped|hangup|ended}` " +
        "when the call's media stream stops or the call ends; the stream then closes (close the EventSource, or it " +
        "reconnects and is answered 409). `: keepalive` comments when quiet. A client that stops reading is cut. " +
        "Accepts the session cookie (EventSource sends no headers), a bearer JWT, or an API key with read scope",
      contentType: "text/event-stream",
    },
    404: { description: "NOT_FOUND: no such call in this workspace" },
    409: {
      description:
        "CALL_NOT_LIVE: the call has ended; CALL_NOT_HEARD: the call is not heard as audio (no media stream)",
    },
    429: { description: "RATE_LIMITED: the call already has 5 listeners in this api process, or a stream cap" },
  },
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      const serve = yield* openListenStream(c.tenantId, params.call_id)
      return stream("text/event-stream; charset=utf-8", serve, 200, {
        "Cache-Control": "no-cache",
        "X-Accel-Buffering": "no",
      })
    }),
})
