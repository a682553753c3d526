// GET /api/workflows/{id}: one workflow with its current rule book, audience and run counts,
// and consent attestation.
import { Effect } from "effect"
import { z } from "zod"
import { getWorkflow } from "../../src/workflows/workflows.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"

export default route({
  method: "GET",
  path: "/api/workflows/{id}",
  auth: "jwt",
  summary: "A workflow with rule_book, audience_count, runs_count and compliance",
  tags: ["workflows"],
  params: z.object({ id: Id }),
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* getWorkflow(c.tenantId, params.id))
    }),
})
