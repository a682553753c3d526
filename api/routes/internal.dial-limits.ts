// GET, PUT and DELETE /api/internal/dial-limits: a workspace's dial limits (X-System-Key and
// X-Tenant-Id, as every internal route): its plan's, the ones an admin set for it, and what applies.
import { Effect } from "effect"
import { z } from "zod"
import { clearDialLimits, getDialLimits, setDialLimits } from "../../src/dialing/dial-limits.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { systemTenantOf } from "../session.js"

const DialLimitsIn = z
  .object({
    calls_per_second: z.number().finite().min(0.01).max(100_000).nullable(),
    max_concurrent_calls: z.number().int().positive().max(1_000_000).nullable(),
    max_concurrent_per_workflow: z.number().int().positive().max(1_000_000).nullable(),
  })
  .strict()

const LIMITS =
  "{tenant_id, plan_tier, plan, workspace, ceilings, effective}, each limit {calls_per_second, " +
  "max_concurrent_calls, max_concurrent_per_workflow}; workspace is null when the plan's apply"

const responses = {
  200: { description: `The workspace's dial limits: ${LIMITS}` },
  404: { description: "NOT_FOUND: no workspace with this X-Tenant-Id" },
}

export const dialLimitsGet = route({
  method: "GET",
  path: "/api/internal/dial-limits",
  auth: "system",
  summary: "A workspace's dial limits (X-System-Key and X-Tenant-Id): its plan's, its own and what applies",
  tags: ["internal", "runs"],
  responses,
  handler: ({ systemTenantId }) =>
    Effect.gen(function* () {
      const tenantId = yield* systemTenantOf(systemTenantId)
      return json(yield* getDialLimits(tenantId))
    }),
})

export const dialLimitsPut = route({
  method: "PUT",
  path: "/api/internal/dial-limits",
  auth: "system",
  summary:
    "Set a workspace's own dial limits (X-System-Key and X-Tenant-Id): calls per second and calls in flight, " +
    "each null for its plan's; the DIALER_* settings stay ceilings; running runs follow within seconds",
  tags: ["internal", "runs"],
  body: { json: DialLimitsIn },
  responses,
  handler: ({ systemTenantId, body }) =>
    Effect.gen(function* () {
      const tenantId = yield* systemTenantOf(systemTenantId)
      const b = body!
      return json(
        yield* setDialLimits(tenantId, {
          callsPerSecond: b.calls_per_second,
          maxConcurrentCalls: b.max_concurrent_calls,
          maxConcurrentPerWorkflow: b.max_concurrent_per_workflow,
        }),
      )
    }),
})

export const dialLimitsDelete = route({
  method: "DELETE",
  path: "/api/internal/dial-limits",
  auth: "system",
  summary: "Drop a workspace's own dial limits (X-System-Key and X-Tenant-Id): its plan's apply again",
  tags: ["internal", "runs"],
  responses,
  handler: ({ systemTenantId }) =>
    Effect.gen(function* () {
      const tenantId = yield* systemTenantOf(systemTenantId)
      return json(yield* clearDialLimits(tenantId))
    }),
})
