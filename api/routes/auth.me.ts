// GET /auth/me: who the session belongs to. Called with an API key, it describes the key instead.
import { Effect } from "effect"
import { me } from "../../src/auth/auth.service.js"
import { keyMay, PERMISSIONS, permissionsOf } from "../../src/auth/permissions.js"
import { Db } from "../../src/platform/Db.js"
import { findTenant, tenantView } from "../../src/workspaces/workspaces.repo.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"

export default route({
  method: "GET",
  path: "/auth/me",
  auth: "jwt",
  summary:
    "The signed-in user, their workspace, when the session expires, and `permissions`: what the caller's role " +
    "(or key's scope) holds of read, supervise, write, admin, owner (the console hides what a role may not do)",
  tags: ["auth"],
  handler: ({ principal }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      if (caller.kind === "user") return json({ ...(yield* me(caller)), permissions: permissionsOf(caller.role) })
      const { sql } = yield* Db
      const tenant = yield* Effect.promise(() => findTenant(sql, caller.tenantId))
      return json({
        user: null,
        tenant: tenant && tenantView(tenant),
        api_key: { id: caller.keyId, scope: caller.scope },
        expires_at: caller.expiresAt?.toISOString() ?? null,
        permissions: PERMISSIONS.filter((x) => keyMay(caller.scope, x)),
      })
    }),
})
