// GET /api/workflows/{id}/runs: the workflow's runs, newest first.
import { Effect } from "effect"
import { z } from "zod"
import { listRuns } from "../../src/workflows/workflows.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"

export default route({
  method: "GET",
  path: "/api/workflows/{id}/runs",
  auth: "jwt",
  summary: "A workflow's runs, newest first",
  tags: ["workflows"],
  params: z.object({ id: Id }),
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json({ runs: yield* listRuns(c.tenantId, params.id) })
    }),
})
