// GET /api/objections: the global objection library with use counts; optional ?category= filter.
import { Effect } from "effect"
import { z } from "zod"
import { listObjections } from "../../src/objections/objections.repo.js"
import { json } from "../reply.js"
import { route } from "../route.js"

export default route({
  method: "GET",
  path: "/api/objections",
  auth: "public",
  summary: "The global objection library (not tenant-scoped)",
  tags: ["library"],
  query: z.object({
    category: z
      .string()
      .regex(/^[a-z_]{1,40}$/, "must be a lower-case category name such as price or timing")
      .optional(),
  }),
  handler: ({ query }) => Effect.map(listObjections(query.category), (objections) => json({ objections })),
})
