// POST /api/internal/usage-events: a batch of up to 1,000 usage events for one workspace
// (X-System-Key and X-Tenant-Id), stored once per event id; priced kinds are charged exactly once.
import { Effect } from "effect"
import { z } from "zod"
import { MAX_BATCH, recordUsage } from "../../src/usage-events/usage-events.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { systemTenantOf } from "../session.js"

const ATTRIBUTES_MAX_BYTES = 4096

export const UsageEventIn = z.object({
  event_id: z.string().trim().min(1).max(200),
  tenant_id: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
  kind: z.string().regex(/^[a-z][a-z0-9_.-]{0,63}$/, "must be 1-64 of a-z, 0-9, _ . - starting with a letter"),
  quantity: z.number().finite().min(0).max(1_000_000_000),
  unit: z.string().trim().min(1).max(32),
  at: z.iso.datetime({ offset: true }),
  attributes: z
    .record(z.string().max(100), z.unknown())
    .refine((a) => JSON.stringify(a).length <= ATTRIBUTES_MAX_BYTES, `must be at most ${ATTRIBUTES_MAX_BYTES} bytes`)
    .optional(),
})

export const UsageEventBatch = z.object({
  events: z.array(UsageEventIn).min(1).max(MAX_BATCH, `at most ${MAX_BATCH} events per batch`),
})

export default route({
  method: "POST",
  path: "/api/internal/usage-events",
  auth: "system",
  summary:
    "Record usage events (X-System-Key and X-Tenant-Id): 201 {accepted, duplicates, charged_minor, currency, " +
    "unbilled}; idempotent on event_id per workspace",
  tags: ["internal", "billing"],
  body: { json: UsageEventBatch },
  responses: {
    201: {
      description:
        "Stored: accepted = new events, duplicates = event ids already stored (or repeated in the batch). Priced " +
        "kinds (sms, email, llm_tokens) were charged once from the wallet (charged_minor in its currency); events " +
        "the balance could not pay, or with a unit other than the price's, are stored as unbilled and never overdraw",
    },
    404: { description: "NOT_FOUND: no workspace with this X-Tenant-Id" },
  },
  handler: ({ systemTenantId, body }) =>
    Effect.gen(function* () {
      const tenantId = yield* systemTenantOf(systemTenantId)
      const result = yield* recordUsage(tenantId, body!.events)
      return json(result, 201)
    }),
})
