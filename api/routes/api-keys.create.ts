// POST /api-keys: a new key; its secret is in this response and nowhere else, ever.
import { Effect } from "effect"
import { z } from "zod"
import { createKey, DEFAULT_KEY_SCOPE, keyActor } from "../../src/keys/keys.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { userOf } from "../session.js"

export default route({
  method: "POST",
  path: "/api-keys",
  auth: "jwt-only",
  // Any member manages keys within their role (src/keys/keys.service.ts: mayMint, mayManage).
  permission: "read",
  audit: "service",
  secretInAnswer: true,
  summary:
    "Create an API key (the secret is returned once); scope defaults to read, and only owners and admins may create " +
    "admin keys (403 FORBIDDEN)",
  tags: ["api-keys"],
  validationStatus: 400,
  body: {
    json: z
      .object({
        name: z
          .string({ error: "is required" })
          .trim()
          .min(1, "is required")
          .max(120, "must be at most 120 characters"),
        scope: z.enum(["read", "write", "admin"], { error: "must be read, write or admin" }).default(DEFAULT_KEY_SCOPE),
        expires_in_days: z.number().int("must be a whole number of days").min(1).max(3650).optional(),
        expires_at: z.iso.datetime({ offset: true, error: "must be an ISO 8601 timestamp" }).optional(),
      })
      .refine((b) => b.expires_in_days === undefined || b.expires_at === undefined, {
        message: "give expires_in_days or expires_at, not both",
        path: ["expires_at"],
      }),
  },
  responses: {
    201: { description: "The key, including its secret" },
    403: { description: "a member asked for an admin-scope key" },
  },
  handler: ({ principal, body, clientIp, headers }) =>
    Effect.gen(function* () {
      const user = yield* userOf(principal)
      const b = body!
      const expiresAt =
        b.expires_at !== undefined
          ? new Date(b.expires_at)
          : b.expires_in_days !== undefined
            ? new Date(Date.now() + b.expires_in_days * 86_400_000)
            : null
      const key = yield* createKey(keyActor(user, clientIp, headers["user-agent"]), {
        name: b.name,
        scope: b.scope,
        expiresAt,
      })
      return json(key, 201)
    }),
})
