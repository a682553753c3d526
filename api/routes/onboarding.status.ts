// GET /onboarding/status: the mode, each provider's credential state (never its secret), the
// completion checklist and what is missing.
import { Effect } from "effect"
import { onboardingStatus } from "../../src/onboarding/onboarding.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"

export default route({
  method: "GET",
  path: "/onboarding/status",
  auth: "jwt",
  summary: "Onboarding mode, credential validation state per provider, and the completion checklist",
  tags: ["onboarding"],
  handler: ({ principal }) =>
    Effect.flatMap(callerOf(principal), (c) => Effect.map(onboardingStatus(c.tenantId), (s) => json(s))),
})
