// GET and PATCH /api/workspace: the workspace's own record; its name is what callees hear in the
// disclosure and the opening line ("… calling from <name>"), and what invitations say.
import { Effect } from "effect"
import { z } from "zod"
import { auditActorOf } from "../../src/auth/principal.js"
import { getWorkspace, renameWorkspace } from "../../src/workspaces/workspaces.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { WorkspaceName } from "../schemas.js"
import { callerOf } from "../session.js"

const TENANT_DOC = "{id, name, status, plan_tier, created_at, onboarding_mode, country, currency}"

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
    "disclosure and the opening line",
  tags: ["workspace"],
  body: { json: z.object({ name: WorkspaceName }) },
  responses: { 200: { description: TENANT_DOC } },
  handler: ({ principal, body, clientIp }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* renameWorkspace(auditActorOf(caller, clientIp), body!.name))
    }),
})
