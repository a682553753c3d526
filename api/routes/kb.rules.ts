// /kb/rules and /kb/rules/{rule_id}: the workspace's knowledge-base rules by hand. DELETE archives
// (a rule that shaped past calls stays on record); another workspace's rule is 404.

import { Effect } from "effect"
import { z } from "zod"
import { requirePermission } from "../../src/auth/authorize.js"
import { actorOf } from "../../src/auth/principal.js"
import { CreateRule, RULE_STATUSES, UpdateRule } from "../../src/kb/rule.schema.js"
import { archiveRule, createRule, getRule, listRules, updateRule } from "../../src/kb/rules.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id, PageCursor, QueryBool, QueryInt } from "../schemas.js"
import { callerOf } from "../session.js"

export const RULES_LIST_MAX = 1000
export const RULES_LIST_DEFAULT = 200

const RULE_DOC =
  "The rule: {id, bucket, title, body, trigger: {phrases, category} | null, workflow_id, priority, " +
  "status, archived, source_kind, feedback_ids, created_at, updated_at}"
const params = z.object({ rule_id: Id })

export const kbRulesCreate = route({
  method: "POST",
  path: "/kb/rules",
  auth: "jwt",
  summary: "Create a knowledge-base rule (workflow_id null: the whole workspace)",
  tags: ["kb"],
  body: { json: CreateRule },
  responses: {
    201: { description: RULE_DOC },
    422: { description: "Invalid rule, or workflow_id not a workflow of this workspace (VALIDATION_FAILED)" },
  },
  handler: ({ principal, body }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* createRule(caller.tenantId, body!, actorOf(principal!)), 201)
    }),
})

export const kbRulesList = route({
  method: "GET",
  path: "/kb/rules",
  auth: "jwt",
  summary:
    `List rules, newest first (bucket?, status?, include_archived default false, limit 1–${RULES_LIST_MAX}, ` +
    "default 200; cursor = next_cursor of the page before)",
  tags: ["kb"],
  query: z.object({
    bucket: z.string().max(64, "must be at most 64 characters").optional(),
    status: z.enum(RULE_STATUSES, { error: `must be one of ${RULE_STATUSES.join(", ")}` }).optional(),
    include_archived: QueryBool.optional(),
    limit: QueryInt(1, RULES_LIST_MAX).optional(),
    cursor: PageCursor.optional(),
  }),
  responses: { 200: { description: "{rules: [rule…], next_cursor (null on the last page)}" } },
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(
        yield* listRules(caller.tenantId, {
          bucket: query.bucket,
          status: query.status,
          includeArchived: query.include_archived ?? false,
          limit: query.limit ?? RULES_LIST_DEFAULT,
          before: query.cursor,
        }),
      )
    }),
})

export const kbRuleGet = route({
  method: "GET",
  path: "/kb/rules/{rule_id}",
  auth: "jwt",
  summary: "One rule (archived ones too)",
  tags: ["kb"],
  params,
  responses: { 200: { description: RULE_DOC } },
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* getRule(caller.tenantId, params.rule_id))
    }),
})

export const kbRuleUpdate = route({
  method: "PUT",
  path: "/kb/rules/{rule_id}",
  auth: "jwt",
  summary:
    "Change a rule's fields or status (archived archives it, which needs admin as DELETE does; active or paused " +
    "restores it)",
  tags: ["kb"],
  params,
  body: { json: UpdateRule },
  responses: {
    200: { description: RULE_DOC },
    409: { description: "Restoring a learnt rule whose line already has a live learnt rule (CONFLICT)" },
  },
  handler: ({ principal, params, body }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      if (body!.status === "archived") yield* requirePermission(caller, "admin", "archiving a rule")
      return json(yield* updateRule(caller.tenantId, params.rule_id, body!, actorOf(principal!)))
    }),
})

export const kbRuleDelete = route({
  method: "DELETE",
  path: "/kb/rules/{rule_id}",
  auth: "jwt",
  permission: "admin",
  summary: "Archive a rule (it stays on record; a second DELETE is 404)",
  tags: ["kb"],
  params,
  responses: { 200: { description: `${RULE_DOC}, now archived` } },
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* archiveRule(caller.tenantId, params.rule_id, actorOf(principal!)))
    }),
})
