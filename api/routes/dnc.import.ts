// POST /dnc/import: many numbers onto the do-not-call list at once, from a CSV file (multipart,
// streamed) or JSON rows; numbers already listed are counted, not changed.
import { Effect } from "effect"
import { z } from "zod"
import { importDnc, REASON_MAX } from "../../src/compliance/dnc.service.js"
import { csvFile } from "../form.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { callerOf } from "../session.js"
import { readingUpload } from "../upload.js"

export const MAX_JSON_ROWS = 10_000

export default route({
  method: "POST",
  path: "/dnc/import",
  auth: "jwt",
  summary: "Import do-not-call numbers: a CSV file (multipart) or JSON {rows:[{phone_e164, reason?}]}",
  tags: ["dnc"],
  body: {
    json: z.object({
      rows: z
        .array(
          z.object({
            phone_e164: z.union([z.string().max(64, "must be at most 64 characters"), z.number()], {
              error: "is required (a string or a number)",
            }),
            reason: z.string().trim().max(REASON_MAX, `must be at most ${REASON_MAX} characters`).nullish(),
          }),
          { error: "must be an array of rows" },
        )
        .max(MAX_JSON_ROWS, `at most ${MAX_JSON_ROWS} rows per request; upload a CSV file for more`),
    }),
    multipart: "stream",
    form: { file: csvFile("The numbers: a header row with a phone column (reason optional)") },
  },
  handler: ({ principal, body, upload }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      const source =
        upload !== undefined
          ? { kind: "csv" as const, open: async () => (await upload.file())?.stream }
          : { kind: "json" as const, rows: body!.rows.map((r) => ({ phone: r.phone_e164, reason: r.reason ?? null })) }
      return json(yield* importDnc(caller.tenantId, source, readingUpload))
    }),
})
