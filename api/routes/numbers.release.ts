// DELETE /numbers/{number_id} and POST /numbers/{number_id}/release (admin): the number is
// unwired at the provider (a bought one given back) and its monthly rental stops; idempotent.
import { Effect } from "effect"
import { z } from "zod"
import { releaseNumber } from "../../src/numbers/numbers.service.js"
import { json } from "../reply.js"
import { type Method, route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"

const release = (method: Method, path: string) =>
  route({
    method,
    path,
    auth: "jwt",
    permission: "admin",
    summary: "Release a number: webhooks unwired at the provider, monthly rental stopped (idempotent)",
    tags: ["numbers"],
    params: z.object({ number_id: Id }),
    handler: ({ principal, params }) =>
      Effect.gen(function* () {
        const caller = yield* callerOf(principal)
        return json(yield* releaseNumber(caller.tenantId, params.number_id))
      }),
  })

export const numbersDelete = release("DELETE", "/numbers/{number_id}")
export const numbersRelease = release("POST", "/numbers/{number_id}/release")
