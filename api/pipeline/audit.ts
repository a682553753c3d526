// audit: a role-gated change (a route whose permission is admin or owner) lands in the workspace's
// audit log once its handler has succeeded, unless the route's service writes its own entry with
// the state before and after (`audit: "service"`: members, API keys, money settings).
import { Effect } from "effect"
import { auditRoute } from "../../src/audit/audit.service.js"
import { routePermission } from "../../src/auth/permissions.js"
import { auditActorOf } from "../../src/auth/principal.js"
import type { AnyRoute } from "../route.js"

/** Whether the pipeline writes the route's audit entry. */
export const auditedByPipeline = (route: AnyRoute): boolean => {
  if (route.audit === "service" || route.method === "GET") return false
  if (route.auth !== "jwt" && route.auth !== "jwt-only") return false
  const permission = routePermission(route.permission, route.method)
  return permission === "admin" || permission === "owner"
}

/** The route's handler, followed by its audit entry when the pipeline writes one. */
export function withAudit(route: AnyRoute): AnyRoute["handler"] {
  if (!auditedByPipeline(route)) return route.handler
  return (ctx) =>
    Effect.tap(route.handler(ctx), (reply) =>
      ctx.principal === undefined || reply.status >= 400
        ? Effect.void
        : auditRoute(auditActorOf(ctx.principal, ctx.clientIp), {
            method: ctx.method,
            path: ctx.path,
            requestId: ctx.requestId,
            body: ctx.body,
            status: reply.status,
          }),
    )
}
