// POST /dsr/erase: erases a data subject (phone or email) from the workspace; rows kept for audit
// hold a keyed hash instead, and the contact stays suppressed by it. Signed-in owners and admins
// only (API keys and members get 403). Idempotent: a second erase returns zero counts.
import { Effect } from "effect"
import { z } from "zod"
import { eraseSubject } from "../../src/dsr/erase.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { userOf } from "../session.js"

export default route({
  method: "POST",
  path: "/dsr/erase",
  auth: "jwt-only",
  permission: "admin",
  audit: "service",
  summary: "Erase a contact (phone or email): delete their data, hash the audit rows, suppress them (idempotent)",
  tags: ["dsr"],
  body: {
    json: z.object({
      contact_identifier: z.string({ error: "is required" }).trim().min(1, "is required").max(320),
    }),
  },
  responses: {
    200: {
      description: "What was erased",
      schema: z.object({
        erased: z.record(z.string(), z.number().int()),
        erased_at: z.string(),
        receipt_id: z.string(),
      }),
    },
    403: { description: "an API key, or a supervisor or analyst (owners and admins only)" },
  },
  handler: ({ principal, body, clientIp }) =>
    Effect.gen(function* () {
      const user = yield* userOf(principal)
      return json(yield* eraseSubject(user, body!.contact_identifier, clientIp))
    }),
})
