// POST /numbers/provision: buys a number (the one given, or the first free offer for the country
// and area code) on the workspace's account, wires its inbound-voice and status webhooks to us,
// and charges the first month when it is on the platform's account (only for a verified owner).
import { Effect } from "effect"
import { z } from "zod"
import { provisionNumber } from "../../src/numbers/numbers.service.js"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { baseUrl } from "../base-url.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"
import { AreaCode, Country } from "./numbers.search.js"

export const PhoneNumber = z
  .string({ error: "must be a phone number" })
  .trim()
  .min(1, "is required")
  .max(64, "must be at most 64 characters")
export const WorkflowId = z
  .number({ error: "must be a workflow id" })
  .int("must be a workflow id")
  .positive("must be a workflow id")

export default route({
  method: "POST",
  path: "/numbers/provision",
  auth: "jwt",
  summary:
    "Provision a number (phone_number?, else the first free one for country?/area_code?; workflow_id? answers its " +
    "inbound calls)",
  tags: ["numbers"],
  body: {
    json: z
      .object({
        phone_number: PhoneNumber.optional(),
        country: Country.optional(),
        area_code: AreaCode.optional(),
        workflow_id: WorkflowId.optional(),
      })
      .optional(),
  },
  responses: {
    201: { description: "{number, charged_minor}: the number, and the first month charged to the wallet" },
    409: {
      description:
        "WORKFLOW_NOT_READY with missing [email_verified] (a number on Parley's account needs the owner's verified " +
        "email), NO_NUMBERS_AVAILABLE, NUMBER_UNAVAILABLE or CREDENTIAL_MISSING",
    },
  },
  handler: ({ principal, body, headers }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      const config = yield* AppConfig
      const req = {
        phoneNumber: body?.phone_number,
        country: body?.country,
        areaCode: body?.area_code,
        workflowId: body?.workflow_id,
      }
      return json(yield* provisionNumber(caller.tenantId, req, baseUrl(config, headers)), 201)
    }),
})
