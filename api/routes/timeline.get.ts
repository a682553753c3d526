// GET /api/timeline: everything about one contact (a phone number) or one user of the workspace,
// newest first, paged by `before`.
import { Effect } from "effect"
import { z } from "zod"
import { restorePlus } from "../../src/phones/phone.js"
import {
  cursorOf,
  getTimeline,
  subjectOf,
  TIMELINE_DEFAULT_N,
  TIMELINE_MAX_N,
} from "../../src/timeline/timeline.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Email, Id, QueryInt } from "../schemas.js"
import { callerOf } from "../session.js"

export default route({
  method: "GET",
  path: "/api/timeline",
  auth: "jwt",
  summary:
    "A contact's or user's timeline, newest first: exactly one of phone, user_id, email (none: 400 " +
    "IDENTIFIER_REQUIRED; several: 400 TOO_MANY_IDENTIFIERS); " +
    "n 1–500 (default 50); before = a timestamp (strictly older) or the cursor from next_before",
  tags: ["timeline"],
  query: z.object({
    // An unencoded + arrives as a space: " 1415…" is "+1415…".
    phone: z
      .string()
      .transform(restorePlus)
      .pipe(z.string().trim().min(1, "must not be empty").max(64, "must be at most 64 characters"))
      .optional(),
    user_id: Id.optional(),
    email: Email.optional(),
    n: QueryInt(1, TIMELINE_MAX_N).optional(),
    before: z.string().max(80, "must be at most 80 characters").optional(),
  }),
  responses: {
    200: {
      description:
        "{count, events:[{at, kind (call, turns, decision, dnc, dialer, api_key, workflow, consent, account, " +
        "email, kb), direction, workflow_id, run_id, summary, payload, cursor}], next_before}",
    },
  },
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      const subject = yield* subjectOf(query)
      const cursor = yield* cursorOf(query.before)
      return json(yield* getTimeline(c.tenantId, subject, { n: query.n ?? TIMELINE_DEFAULT_N, cursor }))
    }),
})
