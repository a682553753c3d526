// POST /internal/turns: turns from an external orchestrator, one (an object) or a batch (an array of
// up to 500, stored in order), onto the same bus subject, table and streams as the runtime's own
// through the process's turn writer; idempotent on (outcome_id, seq) when outcome_id is given.
import { Effect } from "effect"
import { z } from "zod"
import { ingestTurns } from "../../src/turns/turns.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { systemTenantOf } from "../session.js"

const PositiveId = z.number().int().positive().max(Number.MAX_SAFE_INTEGER)
export const MAX_TURNS_PER_REQUEST = 500

export const TurnIn = z.object({
  run_id: PositiveId,
  target_id: PositiveId,
  call_id: PositiveId.optional(),
  /** The caller's per-call turn index (stored as turn_index); the run-wide seq is assigned here. */
  seq: z.number().int().min(0).max(1_000_000),
  speaker: z.enum(["agent", "callee", "system"]),
  text: z
    .string()
    .min(1)
    .max(8000)
    .refine((s) => !s.includes("\u0000"), "must not contain NUL characters"),
  outcome_id: z.string().trim().min(1).max(200).optional(),
  at: z.iso.datetime({ offset: true }).optional(),
})

export const TurnsIn = z.union([TurnIn, z.array(TurnIn).min(1).max(MAX_TURNS_PER_REQUEST)])

export default route({
  method: "POST",
  path: "/internal/turns",
  auth: "system",
  summary:
    "Ingest turns (X-System-Key and X-Tenant-Id): one TurnIn object, or an array of 1–500 stored in order in " +
    "one write; each gets its run-wide seq",
  tags: ["internal", "turns"],
  body: { json: TurnsIn },
  responses: {
    201: {
      description:
        "For an object: the stored turn `{turn_id, seq, run_id, target_id, call_id, turn_index, speaker, text, at, " +
        "outcome_id, duplicate}`. For an array: `{turns: [...]}`, one such object per item in the order sent. " +
        "`duplicate: true` marks a turn already stored under the same (outcome_id, seq) (or call_id and seq), " +
        "answered as it was stored and not published again. Turns of one run are stored and published in the " +
        "order sent; an array over 500 items is refused whole (422), as is one with any invalid item.",
    },
  },
  handler: ({ systemTenantId, body }) =>
    Effect.gen(function* () {
      const tenantId = yield* systemTenantOf(systemTenantId)
      const batch = Array.isArray(body)
      const items = batch ? body : [body!]
      const stored = yield* ingestTurns(tenantId, items, (i) => (batch ? `${i}.call_id` : "call_id"))
      const out = stored.map(({ turn, created }) => ({ ...turn, duplicate: !created }))
      return json(batch ? { turns: out } : out[0], 201)
    }),
})
