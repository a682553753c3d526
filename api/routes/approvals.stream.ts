// GET /api/approvals/stream: the workspace's approval changes as server-sent events (created,
// decided, expired, cancelled) and its pending count, so a supervisor's queue and the console's
// Approvals tab follow them without polling.
import { Effect } from "effect"
import { openApprovalStream } from "../../src/approvals/approvals.service.js"
import { stream } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"

export default route({
  method: "GET",
  path: "/api/approvals/stream",
  auth: "jwt",
  summary:
    "Stream the workspace's approval changes (text/event-stream): one event when an approval is created, " +
    "decided, expired or cancelled by a data-subject erase, and the workspace's pending count on connect and " +
    "after every change; keepalive every 15 s. Read the approval itself from GET /api/approvals; after a " +
    "reconnect, read the queue afresh (no history is replayed)",
  tags: ["approvals"],
  responses: {
    200: {
      description:
        "Unnamed events without ids: `data: {approval_id, status: pending|approved|denied|expired, at}`. " +
        "Named events `event: pending` with `data: {pending, at}`: how many approvals of the workspace are pending " +
        "(as GET /api/approvals?status=pending counts them), once on connect and again after each change " +
        "(addEventListener('pending'); onmessage sees only the unnamed ones). " +
        "Accepts the session cookie (EventSource sends no headers), a bearer JWT, or an API key with read scope",
      contentType: "text/event-stream",
    },
  },
  handler: ({ principal }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      const serve = yield* openApprovalStream(c.tenantId)
      return stream("text/event-stream; charset=utf-8", serve, 200, {
        "Cache-Control": "no-cache",
        "X-Accel-Buffering": "no",
      })
    }),
})
