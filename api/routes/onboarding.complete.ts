// POST /onboarding/complete: marks onboarding done once every checklist item is; 409
// ONBOARDING_INCOMPLETE with `missing` otherwise.
import { Effect } from "effect"
import { completeOnboarding } from "../../src/onboarding/onboarding.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"

export default route({
  method: "POST",
  path: "/onboarding/complete",
  auth: "jwt",
  summary: "Complete onboarding (409 ONBOARDING_INCOMPLETE listing what is missing); answers the status",
  tags: ["onboarding"],
  responses: { 409: { description: "{error, code: ONBOARDING_INCOMPLETE, missing: [checklist item, …]}" } },
  handler: ({ principal }) =>
    Effect.flatMap(callerOf(principal), (c) => Effect.map(completeOnboarding(c.tenantId), (s) => json(s))),
})
