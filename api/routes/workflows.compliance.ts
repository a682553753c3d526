// PUT /api/workflows/{id}/compliance: a signed-in user attests the audience's consent; the
// attestation names that user. API keys cannot attest.
import { Effect } from "effect"
import { z } from "zod"
import { attestCompliance } from "../../src/workflows/workflows.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { userOf } from "../session.js"

export default route({
  method: "PUT",
  path: "/api/workflows/{id}/compliance",
  auth: "jwt-only",
  summary: "Record the consent attestation (the logged-in user becomes consent_attested_by_user_id)",
  tags: ["workflows"],
  params: z.object({ id: Id }),
  body: {
    json: z.object({
      consent_attestation_text: z.string().trim().min(1, "must not be empty").max(2000),
      tcpa_sender_id: z.string().trim().min(1).max(100).optional(),
      dpdp_consent_method: z.string().trim().min(1).max(200).optional(),
    }),
  },
  handler: ({ principal, params, body, clientIp }) =>
    Effect.gen(function* () {
      const user = yield* userOf(principal)
      return json(yield* attestCompliance(user, clientIp, params.id, body!))
    }),
})
