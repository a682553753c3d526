// POST /api/workflows/{id}/audience: attach rows (a CSV file streamed as multipart, or JSON
// rows) to a workflow's audience; answers the counts of what was accepted and filtered out.
import { Effect } from "effect"
import { z } from "zod"
import { NAME_MAX } from "../../src/audience/audience.parse.js"
import { attachAudience } from "../../src/audience/audience.service.js"
import { csvFile } from "../form.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"
import { readingUpload } from "../upload.js"

export const MAX_JSON_ROWS = 10_000

const AudienceRows = z.object({
  rows: z
    .array(
      z.looseObject({
        phone: z.union([z.string().max(64, "must be at most 64 characters"), z.number()], {
          error: "is required (a string or a number)",
        }),
        name: z.string().max(NAME_MAX, `must be at most ${NAME_MAX} characters`).nullish(),
      }),
      { error: "must be an array of rows" },
    )
    .max(MAX_JSON_ROWS, `at most ${MAX_JSON_ROWS} rows per request; upload a CSV file for more`),
})

const Counts = z.object({
  accepted: z.number().int(),
  rejected_dnc: z.number().int(),
  rejected_ncpr: z.number().int(),
  rejected_cooldown: z.number().int(),
  rejected_erased: z.number().int(),
  rejected_invalid: z.number().int(),
  total_targets: z.number().int(),
  duplicates: z.number().int(),
  invalid_rows: z.array(z.object({ line: z.number().int(), phone: z.string(), reason: z.string() })),
  upload_id: z.number().int(),
})

export default route({
  method: "POST",
  path: "/api/workflows/{id}/audience",
  auth: "jwt",
  summary: "Attach an audience: a CSV file (multipart, field file) or JSON {rows:[{phone, name?, ...}]}",
  tags: ["workflows"],
  params: z.object({ id: Id }),
  body: {
    json: AudienceRows,
    multipart: "stream",
    form: { file: csvFile("The audience: a header row with a phone column (name and any others optional)") },
  },
  responses: { 200: { description: "What the attach accepted and filtered out", schema: Counts } },
  handler: ({ principal, params, body, upload }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      const who = { tenantId: caller.tenantId, userId: caller.kind === "user" ? caller.userId : null }
      const source =
        upload !== undefined
          ? { kind: "csv" as const, open: async () => (await upload.file())?.stream }
          : { kind: "json" as const, rows: body!.rows }
      return json(yield* attachAudience(who, params.id, source, readingUpload))
    }),
})
