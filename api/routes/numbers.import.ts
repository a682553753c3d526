// POST /numbers/import: a byok workspace registers a number it already owns on its own provider
// account; our webhooks are set there with the stored credential (not re-validated first).
import { Effect } from "effect"
import { z } from "zod"
import { importNumber } from "../../src/numbers/numbers.service.js"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { baseUrl } from "../base-url.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"
import { PhoneNumber, WorkflowId } from "./numbers.provision.js"

export default route({
  method: "POST",
  path: "/numbers/import",
  auth: "jwt",
  summary:
    "Import a number the byok workspace owns (phone_number, provider? telco_a, workflow_id?); 409 in bundled mode",
  tags: ["numbers"],
  body: {
    json: z.object({
      phone_number: PhoneNumber,
      provider: z.enum(["telco_a"], { error: "must be telco_a" }).optional(),
      workflow_id: WorkflowId.optional(),
    }),
  },
  handler: ({ principal, body, headers }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      const config = yield* AppConfig
      return json(
        yield* importNumber(
          caller.tenantId,
          { phoneNumber: body!.phone_number, workflowId: body!.workflow_id },
          baseUrl(config, headers),
        ),
        201,
      )
    }),
})
