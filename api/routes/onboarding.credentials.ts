// PUT /onboarding/credentials/{provider}: save (replace) a byok credential, validated live and
// stored encrypted; the secret is never answered back, only a masked hint, and extra keys the
// provider does not use only by name. DELETE (admin) removes it and returns onboarding to incomplete.
import { Effect } from "effect"
import { z } from "zod"
import { removeCredential, saveCredential } from "../../src/onboarding/onboarding.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"

// Unknown provider ids are a 404 from the service, not a schema failure.
const params = z.object({ provider: z.string().max(64) })

export const credentialsPut = route({
  method: "PUT",
  path: "/onboarding/credentials/{provider}",
  auth: "jwt",
  summary: "Save a provider credential (byok mode): validated live, stored encrypted, secret never returned",
  tags: ["onboarding"],
  params,
  body: {
    json: z.object({
      primary_id: z.string({ error: "must be a string" }).trim().max(200, "must be at most 200 characters").optional(),
      secret: z
        .string({ error: "is required" })
        .trim()
        .min(1, "is required")
        .max(4096, "must be at most 4096 characters"),
      extra: z.record(z.string(), z.unknown(), { error: "must be an object" }).optional(),
    }),
  },
  responses: {
    200: {
      description:
        "{saved: true, validated, error?, ignored_extra: [names of the extra keys the provider does not use: " +
        "stored encrypted, never returned], credential: {provider, status, hint, primary_id, extra (the provider's " +
        "fields only), validated_at, …}}",
    },
    422: {
      description:
        "VALIDATION_FAILED: a provider field missing or malformed, or more than 16 other extra keys, " +
        "other keys not named by 1 to 64 letters, digits, _, . or -, or over 4096 bytes of them as JSON",
    },
    409: { description: "MODE_IS_BUNDLED: switch to byok first" },
    503: { description: "ENCRYPTION_UNAVAILABLE: the server has no CREDENTIALS_MASTER_KEY" },
  },
  handler: ({ principal, params, body }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* saveCredential(c.tenantId, params.provider, body!))
    }),
})

export const credentialsDelete = route({
  method: "DELETE",
  path: "/onboarding/credentials/{provider}",
  auth: "jwt",
  permission: "admin",
  summary: "Delete a provider credential (onboarding returns to incomplete)",
  tags: ["onboarding"],
  params,
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* removeCredential(c.tenantId, params.provider))
    }),
})
