// POST /api/internal/outreach/call: one call to one person on the workspace's workflow (or its
// most recently updated callable one), through the runtime with the workspace's rules and billing.
import { Effect } from "effect"
import { z } from "zod"
import { placeOutreachCall } from "../../src/outreach/outreach-call.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { systemTenantOf } from "../session.js"

export const OutreachCallBody = z.object({
  phone: z.string({ error: "is required" }).trim().min(1, "is required").max(64, "must be at most 64 characters"),
  name: z.string().trim().min(1).max(200).optional(),
  workflow_id: z.number().int().positive().max(Number.MAX_SAFE_INTEGER).optional(),
})

export default route({
  method: "POST",
  path: "/api/internal/outreach/call",
  auth: "system",
  summary:
    "Call one person on a workflow (X-System-Key and X-Tenant-Id): 202 with the run that dials them; " +
    "the call appears in GET /api/runs/live?run_id=",
  tags: ["internal", "outreach"],
  body: { json: OutreachCallBody },
  handler: ({ systemTenantId, body }) =>
    Effect.gen(function* () {
      const tenantId = yield* systemTenantOf(systemTenantId)
      return json(yield* placeOutreachCall(tenantId, body!), 202)
    }),
})
