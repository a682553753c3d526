// GET /api/objections/{id}: one entry of the global objection library.
import { Effect } from "effect"
import { z } from "zod"
import { findObjection } from "../../src/objections/objections.repo.js"
import { NotFound } from "../../src/platform/errors.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"

export default route({
  method: "GET",
  path: "/api/objections/{id}",
  auth: "public",
  summary: "One objection of the global library",
  tags: ["library"],
  params: z.object({ id: Id }),
  handler: ({ params }) =>
    Effect.flatMap(findObjection(params.id), (o) =>
      o ? Effect.succeed(json(o)) : Effect.fail(new NotFound({ message: `objection ${params.id} not found` })),
    ),
})
