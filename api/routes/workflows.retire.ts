// POST /api/workflows/{id}/retire and DELETE /api/workflows/{id} (admin): retiring is terminal;
// deleting also archives (soft delete). Both are refused while a run is running.
import { Effect } from "effect"
import { z } from "zod"
import { retire } from "../../src/workflows/workflows.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"

export const workflowRetire = route({
  method: "POST",
  path: "/api/workflows/{id}/retire",
  auth: "jwt",
  permission: "admin",
  summary: "Retire a workflow (terminal; 409 while a run is running)",
  tags: ["workflows"],
  params: z.object({ id: Id }),
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* retire(c.tenantId, params.id, { archive: false }))
    }),
})

export const workflowDelete = route({
  method: "DELETE",
  path: "/api/workflows/{id}",
  auth: "jwt",
  permission: "admin",
  summary: "Soft-delete a workflow: retired with archived_at set (409 while a run is running)",
  tags: ["workflows"],
  params: z.object({ id: Id }),
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      const w = yield* retire(c.tenantId, params.id, { archive: true })
      return json({ deleted: true, ...w })
    }),
})
