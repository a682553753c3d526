// GET /api/calls/{call_id}/recording: a recorded call's audio (Ogg Opus), played by the console's call
// view and any media player. Range requests are answered 206 with at most 256 KiB each (a player asks
// for the rest as it goes; nothing holds a whole recording), a request without one streams it all.
import { Effect } from "effect"
import { z } from "zod"
import { GatewayUnavailable, NotFound } from "../../src/platform/errors.js"
import { RecordingStoreError } from "../../src/recordings/recording-store.js"
import { RECORDING_CONTENT_TYPE, Recordings, TRACKS } from "../../src/recordings/recordings.service.js"
import { bytes, json, stream } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"

/** The most bytes one range answer carries. */
export const MAX_RANGE_BYTES = 256 * 1024

/** The one range of a `Range` header, clamped to the object; "none" (answer it whole), or unsatisfiable. */
export function byteRange(header: string | undefined, size: number): { start: number; end: number } | "none" | 416 {
  if (header === undefined || header.trim() === "") return "none"
  const m = /^\s*bytes\s*=\s*(\d{0,15})\s*-\s*(\d{0,15})\s*$/i.exec(header)
  // A multi-range or malformed header is ignored, as RFC 9110 allows: the whole object.
  if (m === null || (m[1] === "" && m[2] === "")) return "none"
  let start: number
  let end: number
  if (m[1] === "") {
    // The last n bytes.
    const n = Number(m[2])
    if (n === 0) return 416
    start = Math.max(0, size - n)
    end = size - 1
  } else {
    start = Number(m[1])
    end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1)
    if (m[2] !== "" && Number(m[2]) < start) return "none"
  }
  if (start >= size) return 416
  return { start, end: Math.min(end, start + MAX_RANGE_BYTES - 1) }
}

export default route({
  method: "GET",
  path: "/api/calls/{call_id}/recording",
  auth: "jwt",
  summary:
    "A recorded call's audio, Ogg Opus (audio/ogg): `track=mixed` (default; both sides, mono) or `sides` " +
    "(stereo: the callee left, the agent right). Range requests get 206 with at most 256 KiB each",
  tags: ["calls"],
  params: z.object({ call_id: Id }),
  query: z.object({ track: z.enum(TRACKS).default("mixed") }),
  responses: {
    200: { description: "The whole recording (Accept-Ranges: bytes)", contentType: RECORDING_CONTENT_TYPE },
    206: { description: "The bytes asked for (Content-Range), at most 256 KiB", contentType: RECORDING_CONTENT_TYPE },
    404: {
      description:
        "NOT_FOUND: no such call in this workspace, or it has no recording (not heard as audio, recording off, " +
        "expired or erased)",
    },
    502: { description: "GATEWAY_UNAVAILABLE: the recording store could not be reached" },
    416: { description: "RANGE_NOT_SATISFIABLE: the range starts past the recording's end (Content-Range: */size)" },
  },
  handler: ({ principal, params, query, headers }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      const recordings = yield* Recordings
      const row = yield* Effect.promise(() => recordings.recordingOf(c.tenantId, params.call_id, query.track))
      if (row === undefined) return yield* Effect.fail(new NotFound({ message: "this call has no recording" }))
      const common = {
        "Accept-Ranges": "bytes",
        // Not kept by the browser: an erased or expired recording must not outlive its row there.
        "Cache-Control": "private, no-store",
        "Content-Disposition": `inline; filename="call-${row.call_id}-${row.track}.ogg"`,
      }
      const range = byteRange(headers.range, row.bytes)
      if (range === 416)
        return json(
          { error: `the range starts past the recording's ${row.bytes} bytes`, code: "RANGE_NOT_SATISFIABLE" },
          416,
          { "Content-Range": `bytes */${row.bytes}` },
        )
      if (range === "none")
        return stream(
          row.content_type,
          async (writer) => {
            for await (const chunk of recordings.readRecording(row)) if (!(await writer.write(chunk))) return
          },
          200,
          common,
        )
      const parts: Uint8Array[] = []
      yield* Effect.tryPromise({
        try: async () => {
          for await (const chunk of recordings.readRecording(row, range)) parts.push(chunk)
        },
        catch: (e) =>
          e instanceof RecordingStoreError && e.reason !== "unavailable" && e.reason !== "unreachable"
            ? new NotFound({ message: "this call's recording is not in the store" })
            : new GatewayUnavailable({ message: "the recording store could not be reached: try again" }),
      })
      return bytes(row.content_type, Buffer.concat(parts), 206, {
        ...common,
        "Content-Range": `bytes ${range.start}-${range.end}/${row.bytes}`,
      })
    }),
})
