// POST /internal/turns: a turn from an external orchestrator, onto the same bus subject, table and
// streams as the runtime's own; idempotent on (outcome_id, seq) when outcome_id is given.
import { Effect } from "effect"
import { z } from "zod"
import { ingestTurn } from "../../src/turns/turns.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { systemTenantOf } from "../session.js"

const PositiveId = z.number().int().positive().max(Number.MAX_SAFE_INTEGER)

export const TurnIn = z.object({
  run_id: PositiveId,
  target_id: PositiveId,
  call_id: PositiveId.optional(),
  /** The caller's per-call turn index (stored as turn_index); the run-wide seq is assigned here. */
  seq: z.number().int().min(0).max(1_000_000),
  speaker: z.enum(["agent", "callee", "system"]),
  text: z.string().min(1).max(8000),
  outcome_id: z.string().trim().min(1).max(200).optional(),
  at: z.iso.datetime({ offset: true }).optional(),
})

export default route({
  method: "POST",
  path: "/internal/turns",
  auth: "system",
  summary: "Ingest a turn (X-System-Key and X-Tenant-Id); 201 with the stored turn and its run-wide seq",
  tags: ["internal", "turns"],
  body: { json: TurnIn },
  handler: ({ systemTenantId, body }) =>
    Effect.gen(function* () {
      const tenantId = yield* systemTenantOf(systemTenantId)
      const { turn, created } = yield* ingestTurn(tenantId, body!)
      return json({ ...turn, duplicate: !created }, 201)
    }),
})
