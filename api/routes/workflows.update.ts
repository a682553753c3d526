// PUT /api/workflows/{id}: name, persona, schedule and rule-book fields. A live workflow must be
// paused first (409); rule-book changes are validated and stored as a new version.
import { Effect } from "effect"
import { z } from "zod"
import { WorkflowUpdate } from "../../src/workflows/workflow.schema.js"
import { updateWorkflow } from "../../src/workflows/workflows.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"

export default route({
  method: "PUT",
  path: "/api/workflows/{id}",
  auth: "jwt",
  summary: "Update a workflow's name, persona, schedule or rule-book fields (409 while live)",
  tags: ["workflows"],
  params: z.object({ id: Id }),
  body: { json: WorkflowUpdate },
  handler: ({ principal, params, body }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* updateWorkflow(c, params.id, body!))
    }),
})
