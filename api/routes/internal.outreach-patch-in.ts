// POST /api/internal/outreach/patch-in: moves a live call's callee into a recorded conference and
// dials the operator (default OPERATOR_NUMBER); the agent's leg hands off and drops.
import { Effect } from "effect"
import { z } from "zod"
import { patchIn } from "../../src/outreach/patch-in.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { systemTenantOf } from "../session.js"

export const PatchInBody = z.object({
  /** The call's id as GET /api/runs/live shows it (`call_id`). */
  call_uuid: z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER),
  operator_number: z
    .string()
    .trim()
    .regex(/^\+[1-9]\d{6,14}$/, "must be an E.164 number")
    .optional(),
})

export default route({
  method: "POST",
  path: "/api/internal/outreach/patch-in",
  auth: "system",
  summary:
    "Patch a live call through to an operator (X-System-Key and X-Tenant-Id): the callee joins a recorded " +
    "conference, the operator is dialed, the agent drops; 404 unknown/finished call, 409 CALL_HANDED_OFF",
  tags: ["internal", "outreach"],
  body: { json: PatchInBody },
  handler: ({ systemTenantId, body }) =>
    Effect.gen(function* () {
      const tenantId = yield* systemTenantOf(systemTenantId)
      return json(yield* patchIn(tenantId, body!.call_uuid, body!.operator_number))
    }),
})
