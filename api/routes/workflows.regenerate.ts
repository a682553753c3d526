// POST /api/workflows/{id}/regenerate-rule-book: a new rule-book version from the stored prompt
// or a new one; validated like a created one.
import { Effect } from "effect"
import { z } from "zod"
import { regenerateRuleBook } from "../../src/workflows/workflows.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"
import { NlPrompt } from "./workflows.create.js"

export default route({
  method: "POST",
  path: "/api/workflows/{id}/regenerate-rule-book",
  auth: "jwt",
  summary: "Regenerate the rule book (optionally from a new nl_prompt)",
  tags: ["workflows"],
  params: z.object({ id: Id }),
  body: { json: z.object({ nl_prompt: NlPrompt.optional() }).optional() },
  handler: ({ principal, params, body }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* regenerateRuleBook(c, params.id, body?.nl_prompt))
    }),
})
