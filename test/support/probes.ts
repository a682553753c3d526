// Probe routes mounted beside the product's table in HTTP-layer tests: each exercises one
// mechanism of the layer (validation, multipart, raw bytes, streams, aborts, defects, system auth).
import { createHash } from "node:crypto"
import { Effect } from "effect"
import { z } from "zod"
import { json, stream } from "../../api/reply.js"
import { type AnyRoute, route } from "../../api/route.js"
import { Id, QueryBool, QueryInt } from "../../api/schemas.js"
import { readingUpload } from "../../api/upload.js"

export interface ProbeState {
  aborted: number
  streamBuffered: number[]
  /** Chunks the stream probe has handed to the writer so far. */
  streamWritten: number
  streamEnded: boolean
}

export const newProbeState = (): ProbeState => ({
  aborted: 0,
  streamBuffered: [],
  streamWritten: 0,
  streamEnded: false,
})

export function probeRoutes(state: ProbeState): AnyRoute[] {
  return [
    route({
      method: "POST",
      path: "/test/echo",
      auth: "public",
      summary: "echo a validated body",
      tags: ["test"],
      body: { json: z.object({ name: z.string().min(1).max(10), n: z.number().int().optional() }) },
      handler: ({ body }) => Effect.succeed(json({ got: body }, 201)),
    }),
    route({
      method: "GET",
      path: "/test/items/{id}",
      auth: "public",
      summary: "validated path and query",
      tags: ["test"],
      params: z.object({ id: Id }),
      query: z.object({ limit: QueryInt(1, 50).optional(), flag: QueryBool.optional() }),
      handler: ({ params, query }) =>
        Effect.succeed(json({ id: params.id, limit: query.limit ?? null, flag: query.flag ?? null })),
    }),
    route({
      method: "POST",
      path: "/test/upload",
      auth: "public",
      summary: "json or multipart",
      tags: ["test"],
      body: { json: z.object({ rows: z.array(z.object({ phone: z.string() })) }), multipart: true },
      handler: ({ body, parts }) =>
        Effect.succeed(
          json({
            json_rows: body?.rows.length ?? null,
            parts:
              parts?.map((p) => ({
                name: p.name,
                filename: p.filename ?? null,
                type: p.type ?? null,
                bytes: p.data.length,
                text: p.data.toString("utf8").slice(0, 40),
              })) ?? null,
          }),
        ),
    }),
    route({
      method: "POST",
      path: "/test/upload-stream",
      auth: "jwt",
      summary: "json or streamed multipart: counts the first file's bytes and lines as they arrive",
      tags: ["test"],
      body: { json: z.object({ rows: z.array(z.object({ phone: z.string() })) }), multipart: "stream" },
      handler: ({ body, upload }) =>
        Effect.gen(function* () {
          if (upload === undefined) return json({ json_rows: body?.rows.length ?? null })
          const counted = yield* readingUpload(async () => {
            const file = await upload.file()
            if (file === undefined) return null
            let bytes = 0
            let lines = 0
            let chunks = 0
            for await (const chunk of file.stream as AsyncIterable<Buffer>) {
              chunks++
              bytes += chunk.length
              for (const b of chunk) if (b === 10) lines++
            }
            return { field: file.field, filename: file.filename ?? null, bytes, lines, chunks }
          })
          return json({ file: counted })
        }),
    }),
    route({
      method: "POST",
      path: "/test/raw",
      auth: "public",
      summary: "exact raw bytes",
      tags: ["test"],
      body: { raw: true },
      handler: ({ rawBody, headers }) =>
        Effect.succeed(
          json({
            sha256: createHash("sha256").update(rawBody).digest("hex"),
            length: rawBody.length,
            type: headers["content-type"] ?? null,
          }),
        ),
    }),
    route({
      method: "GET",
      path: "/test/stream",
      auth: "public",
      summary: "n chunks of 64 KiB",
      tags: ["test"],
      query: z.object({ n: QueryInt(1, 10_000) }),
      handler: ({ query }) =>
        Effect.succeed(
          stream("application/octet-stream", async (w) => {
            state.streamEnded = false
            state.streamWritten = 0
            for (let i = 0; i < query.n; i++) {
              const chunk = Buffer.alloc(64 * 1024, i % 251)
              state.streamWritten++
              if (!(await w.write(chunk))) break
              state.streamBuffered.push(w.bufferedBytes())
            }
            state.streamEnded = true
          }),
        ),
    }),
    route({
      method: "GET",
      path: "/test/stream-fails",
      auth: "public",
      summary: "two chunks, then the producer throws",
      tags: ["test"],
      handler: () =>
        Effect.succeed(
          stream("text/csv", async (w) => {
            await w.write("a,b\n1,2\n")
            await w.write("3,4\n")
            throw new Error("the database went away half-way")
          }),
        ),
    }),
    route({
      method: "GET",
      path: "/test/slow",
      auth: "public",
      summary: "answers after ms",
      tags: ["test"],
      query: z.object({ ms: QueryInt(0, 60_000) }),
      handler: ({ query, onAbort }) =>
        Effect.async<ReturnType<typeof json>>((resume) => {
          const t = setTimeout(() => resume(Effect.succeed(json({ slept: query.ms }))), query.ms)
          // A handler that stops its work on an abort ends too: the request is over, not left in flight
          // (a stop waited SHUTDOWN_TIMEOUT_MS for it).
          onAbort(() => {
            state.aborted++
            clearTimeout(t)
            resume(Effect.interrupt)
          })
        }),
    }),
    route({
      method: "GET",
      path: "/test/defect",
      auth: "public",
      summary: "a bug in a handler",
      tags: ["test"],
      handler: () => Effect.die(new Error("boom")),
    }),
    route({
      method: "GET",
      path: "/test/throw",
      auth: "public",
      summary: "a handler that throws synchronously",
      tags: ["test"],
      handler: () => {
        throw new Error("sync boom")
      },
    }),
    route({
      method: "POST",
      path: "/test/system",
      auth: "system",
      summary: "system-key route",
      tags: ["test"],
      handler: ({ systemTenantId }) => Effect.succeed(json({ tenant_id: systemTenantId ?? null })),
    }),
  ]
}
