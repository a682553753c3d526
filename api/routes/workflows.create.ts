// POST /api/workflows: a campaign from a plain-language prompt. The language model writes the
// rule book; one that fails validation creates nothing and answers 422 RULE_BOOK_INVALID.
import { Effect } from "effect"
import { z } from "zod"
import { Persona } from "../../src/workflows/workflow.schema.js"
import { createWorkflow } from "../../src/workflows/workflows.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"

export const NlPrompt = z.string().trim().min(1, "must not be empty").max(4000, "must be at most 4000 characters")

export default route({
  method: "POST",
  path: "/api/workflows",
  auth: "jwt",
  summary: "Create a workflow (draft) from a natural-language prompt",
  tags: ["workflows"],
  body: {
    json: z.object({
      nl_prompt: NlPrompt,
      persona_override: Persona.optional(),
      is_test: z.boolean().optional(),
      author_user_id: z.string().trim().min(1).max(200).optional(),
    }),
  },
  responses: {
    201: { description: "The workflow: {id, name, status: draft, persona, rule_book, …}" },
    422: { description: "Invalid request (VALIDATION_FAILED) or generated rule book (RULE_BOOK_INVALID, with errors)" },
  },
  handler: ({ principal, body }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* createWorkflow(c, body!), 201)
    }),
})
