// GET /onboarding/providers (public): the provider catalogue a byok tenant brings credentials for,
// with each credential's field schema.
import { Effect } from "effect"
import { PROVIDERS } from "../../src/onboarding/providers.catalogue.js"
import { bytes } from "../reply.js"
import { route } from "../route.js"

// A constant: serialised once, not per request.
const body = JSON.stringify({ providers: PROVIDERS })

export default route({
  method: "GET",
  path: "/onboarding/providers",
  auth: "public",
  summary:
    "Provider catalogue: language model, telco_a, telco_b, speech synthesis and recognition, with credential field " +
    "schemas",
  tags: ["onboarding"],
  handler: () =>
    Effect.succeed(bytes("application/json; charset=utf-8", body, 200, { "Cache-Control": "public, max-age=300" })),
})
