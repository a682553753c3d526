// GET /dsr/recordings/{token}: a data-subject export's recordings (its `recordings_zip_url`), a zip of
// the contact's calls' recordings written as it is downloaded. The signed token is the credential (it
// can be handed to the data subject); an hour after the export it no longer works. Recordings erased or
// expired since the export are not in the zip.
import { Effect } from "effect"
import { z } from "zod"
import { verifyRecordingsLink } from "../../src/dsr/recordings-link.js"
import { writeZip, type ZipEntry } from "../../src/dsr/recordings-zip.js"
import { Clock } from "../../src/platform/Clock.js"
import { Db } from "../../src/platform/Db.js"
import { NotFound } from "../../src/platform/errors.js"
import { Recordings } from "../../src/recordings/recordings.service.js"
import { stream } from "../reply.js"
import { route } from "../route.js"

export default route({
  method: "GET",
  path: "/dsr/recordings/{token}",
  auth: "public",
  summary:
    "Download a data-subject export's recordings (the export's recordings_zip_url): a zip of the contact's " +
    "calls' recordings, Ogg Opus, `call-<id>-mixed.ogg` and `call-<id>-sides.ogg` each; the link works for an hour",
  tags: ["dsr"],
  params: z.object({ token: z.string().min(1).max(8192) }),
  responses: {
    200: { description: "The zip, streamed (stored, not compressed: Opus is)", contentType: "application/zip" },
    404: { description: "NOT_FOUND: not a link we gave, or it expired (export again for a new one)" },
  },
  handler: ({ params }) =>
    Effect.gen(function* () {
      const { sql } = yield* Db
      const now = (yield* Clock).now()
      const recordings = yield* Recordings
      const grant = yield* Effect.promise(() =>
        verifyRecordingsLink(sql, params.token, Math.floor(now.getTime() / 1000)),
      )
      if (grant === "expired")
        return yield* Effect.fail(new NotFound({ message: "this recordings link has expired: export again" }))
      if (grant === "invalid") return yield* Effect.fail(new NotFound({ message: "no such recordings link" }))
      const rows = yield* Effect.promise(() => recordings.recordingsOf(grant.tenantId, grant.callIds))
      async function* entries(): AsyncIterable<ZipEntry> {
        for (const row of rows)
          yield {
            name: `call-${row.call_id}-${row.track}.ogg`,
            modified: row.created_at,
            chunks: recordings.readRecording(row),
          }
      }
      return stream(
        "application/zip",
        async (writer) => {
          await writeZip(entries(), (chunk) => writer.write(chunk))
        },
        200,
        {
          "Content-Disposition": `attachment; filename="recordings-${grant.receiptId.replace(/[^\w-]/g, "")}.zip"`,
          "Cache-Control": "no-store",
        },
      )
    }),
})
