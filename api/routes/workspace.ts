// GET and PATCH /api/workspace: the workspace's own record; its name is what callees hear in the
// disclosure and the opening line ("… calling from <name>"), and what invitations say. Its
// recording_retention_days is how long its call recordings are kept (src/recordings/).
import { Effect } from "effect"
import { z } from "zod"
import { auditActorOf } from "../../src/auth/principal.js"
import { RETENTION_DAYS, setRecordingRetention } from "../../src/recordings/recordings.service.js"
import { getWorkspace, renameWorkspace } from "../../src/workspaces/workspaces.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { WorkspaceName } from "../schemas.js"
import { callerOf } from "../session.js"

const TENANT_DOC =
  "{id, name, status, plan_tier, created_at, onboarding_mode, country, currency, recording_retention_days}"

const RetentionDays = z
  .number({ error: "must be a whole number of days" })
  .int("must be a whole number of days")
  .min(RETENTION_DAYS.min, `must be at least ${RETENTION_DAYS.min}`)
  .max(RETENTION_DAYS.max, `must be at most ${RETENTION_DAYS.max}`)

export const workspaceGet = route({
  method: "GET",
  path: "/api/workspace",
  auth: "jwt",
  summary: "The workspace: its name (what callees hear), country, currency, plan",
  tags: ["workspace"],
  responses: { 200: { description: TENANT_DOC } },
  handler: ({ principal }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* getWorkspace(caller.tenantId))
    }),
})

export const workspaceUpdate = route({
  method: "PATCH",
  path: "/api/workspace",
  auth: "jwt",
  permission: "admin",
  audit: "service",
  summary:
    "Rename the workspace (owners and admins): callees hear the new name from the next run or call on, in the " +
    "disclosure and the opening line; or set how many days (1–3650) its call recordings are kept, those it has " +
    "included",
  tags: ["workspace"],
  body: {
    json: z
      .object({ name: WorkspaceName.optional(), recording_retention_days: RetentionDays.optional() })
      .refine((b) => b.name !== undefined || b.recording_retention_days !== undefined, {
        message: "name or recording_retention_days is required",
        path: ["name"],
      }),
  },
  responses: { 200: { description: TENANT_DOC } },
  handler: ({ principal, body, clientIp }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      const actor = auditActorOf(caller, clientIp)
      const days = body!.recording_retention_days
      if (days !== undefined) yield* setRecordingRetention(actor, days)
      if (body!.name !== undefined) return json(yield* renameWorkspace(actor, body!.name))
      return json(yield* getWorkspace(caller.tenantId))
    }),
})
