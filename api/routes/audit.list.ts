// GET /audit: the workspace's audit log, newest first, in cursor pages (owners, admins, admin keys).
import { Effect } from "effect"
import { z } from "zod"
import { auditPage } from "../../src/audit/audit.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { PageCursor, PageLimit } from "../schemas.js"
import { callerOf } from "../session.js"

export default route({
  method: "GET",
  path: "/audit",
  auth: "jwt",
  permission: "admin",
  summary:
    "The audit log: member, API-key, money-setting and role-gated changes with actor, IP and before/after; " +
    "limit 1–200 (default 50), cursor = next_cursor of the page before, action = one action or a prefix ending in '.'",
  tags: ["audit"],
  query: z.object({
    limit: PageLimit,
    cursor: PageCursor.optional(),
    action: z
      .string()
      .regex(/^[a-z_]+\.([a-z_]+)?$/, "must be an action such as member.invited, or a prefix such as member.")
      .optional(),
  }),
  responses: {
    200: {
      description:
        "{events: [{id, at, actor (user:<id>|key:<id>|system), actor_email, actor_role, ip, action, target, before, " +
        "after}], next_cursor (null on the last page)}",
    },
  },
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* auditPage(caller.tenantId, { limit: query.limit, before: query.cursor }, query.action))
    }),
})
