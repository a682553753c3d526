// PUT /onboarding/mode: bundled (the platform's provider accounts) or byok (the tenant's own).
// Saved credentials stay but are dormant in bundled mode; a switch resets completion.
import { Effect } from "effect"
import { z } from "zod"
import { setOnboardingMode } from "../../src/onboarding/onboarding.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"

export default route({
  method: "PUT",
  path: "/onboarding/mode",
  auth: "jwt",
  summary: "Switch between bundled and byok mode (credentials are kept; completion resets); answers the status",
  tags: ["onboarding"],
  body: { json: z.object({ mode: z.enum(["bundled", "byok"], { error: "must be bundled or byok" }) }) },
  handler: ({ principal, body }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* setOnboardingMode(c.tenantId, body!.mode))
    }),
})
