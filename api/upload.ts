// Streamed multipart uploads: busboy parses the form as uWS hands over the body, pausing the
// socket while the handler is behind, and a route sees the first file part as a Readable (and the
// text fields once the form has ended), the form held to the parts the route declares.
import { PassThrough } from "node:stream"
import busboy from "busboy"
import { Effect } from "effect"
import { BadRequestBody, type DomainError, PayloadTooLarge, type ValidationFailed } from "../src/platform/errors.js"
import { type FormSpec, fileRefused, formRefused } from "./form.js"
import { ClientGone, type Exchange } from "./http.js"
import type { Upload, UploadedFile } from "./route.js"

/** The tags of the errors a streamed body can fail with; they answer like any handler failure. */
const STREAM_ERROR_TAGS = new Set(["PayloadTooLarge", "BadRequestBody", "ValidationFailed"])

const isStreamError = (e: unknown): e is PayloadTooLarge | BadRequestBody | ValidationFailed =>
  typeof e === "object" && e !== null && STREAM_ERROR_TAGS.has((e as { _tag?: string })._tag ?? "")

/**
 * Runs work that reads an upload: a body failure (too large, malformed, not the declared form)
 * becomes its domain error, a client that went away interrupts, and anything else is a defect.
 */
export const readingUpload = <A>(work: () => Promise<A>): Effect.Effect<A, DomainError> =>
  Effect.tryPromise({ try: work, catch: (e) => e }).pipe(
    Effect.catchAll((e) =>
      isStreamError(e) ? Effect.fail(e) : e instanceof ClientGone ? Effect.interrupt : Effect.die(e),
    ),
  )

/** What the server needs to know about a streamed body once the handler is done with it. */
export interface StreamedBody extends Upload {
  /** true once the whole body has been read: the connection may then be kept alive. */
  readonly complete: boolean
}

/**
 * Starts reading a multipart body from the exchange (call it synchronously in the uWS handler).
 * At most `limit` bytes are accepted; past that every file stream fails with PayloadTooLarge.
 * With `form`, a first file in an undeclared field ends the read with ValidationFailed, and a
 * form that ends without a required part, or with a text field too long, has `file()` (when no
 * file came) and `fields()` reject with it.
 */
export function streamMultipart(ex: Exchange, contentType: string, limit: number, form?: FormSpec): StreamedBody {
  let complete = false
  let size = 0
  let failure: unknown
  let parser: busboy.Busboy
  try {
    parser = busboy({
      headers: { "content-type": contentType },
      limits: { fieldSize: 64 * 1024, fields: 100, parts: 200 },
    })
  } catch (e) {
    // A content type busboy cannot read (no boundary): fail on first use, read nothing.
    failure = new BadRequestBody({
      code: "BAD_MULTIPART",
      message: `multipart body could not be read: ${(e as Error).message}`,
    })
    return {
      get complete() {
        return false
      },
      file: () => Promise.reject(failure),
      fields: () => Promise.reject(failure),
    }
  }

  let current: PassThrough | undefined
  let firstFile: ((f: UploadedFile | undefined) => void) | undefined
  let firstFailed: ((e: unknown) => void) | undefined
  let handedOver = false
  /** The field the handed-over file came in. */
  let fileField: string | undefined
  let paused = false
  const pending = new Promise<UploadedFile | undefined>((resolve, reject) => {
    firstFile = resolve
    firstFailed = reject
  })
  pending.catch(() => {}) // observed when file() is called; an unasked-for failure is not unhandled
  // No prototype: a field named "__proto__" or "constructor" is just a field.
  const fields: Record<string, string> = Object.create(null)
  let fieldsRead: ((f: Record<string, string>) => void) | undefined
  let fieldsFailed: ((e: unknown) => void) | undefined
  const allFields = new Promise<Record<string, string>>((resolve, reject) => {
    fieldsRead = resolve
    fieldsFailed = reject
  })
  allFields.catch(() => {}) // observed by whoever asks for the fields; unasked for, not unhandled

  const malformed = (e: Error) =>
    new BadRequestBody({ code: "BAD_MULTIPART", message: `multipart body could not be read: ${e.message}` })

  const fail = (e: unknown): void => {
    if (failure !== undefined) return
    failure = e
    firstFailed?.(e)
    fieldsFailed?.(e)
    current?.destroy(e as Error)
    parser.destroy()
    // Let uWS go on reading (and discarding) so the reply and the close are not held up.
    if (paused) {
      paused = false
      ex.release()
    }
  }

  parser.on("file", (field, stream, info) => {
    if (handedOver || failure !== undefined) {
      stream.on("error", () => {}).resume() // only the first file is wanted: drain the rest
      return
    }
    const refusal = form === undefined ? undefined : fileRefused(form, field)
    if (refusal !== undefined) {
      stream.on("error", () => {}).resume()
      return fail(refusal)
    }
    handedOver = true
    fileField = field
    // The handler reads this copy, so every failure reaches it as one of our errors.
    const out = new PassThrough()
    // Its failure reaches the handler through its reads; one that comes first must not be unhandled.
    out.on("error", () => {})
    current = out
    stream.on("error", (e: Error) => fail(malformed(e)))
    stream.pipe(out)
    out.once("end", () => (current = undefined))
    firstFile?.({ field, filename: info.filename, type: info.mimeType, stream: out })
  })
  parser.on("field", (name, value) => {
    if (!(name in fields)) fields[name] = value
  })
  parser.on("error", (e: Error) => fail(malformed(e)))
  parser.on("close", () => {
    complete = failure === undefined
    const refusal = failure === undefined && form !== undefined ? formRefused(form, fileField, fields) : undefined
    if (refusal !== undefined) {
      // The whole body was read: a file already handed over is left to finish.
      failure = refusal
      firstFailed?.(refusal)
      fieldsFailed?.(refusal)
      return
    }
    if (!handedOver) firstFile?.(undefined)
    if (failure === undefined) fieldsRead?.(fields)
  })

  ex.onAbort(() => fail(new ClientGone()))
  ex.onData((chunk, isLast) => {
    if (failure !== undefined) return
    size += chunk.byteLength
    if (size > limit) return fail(new PayloadTooLarge({ limitBytes: limit }))
    // uWS reuses the chunk's memory once this callback returns: copy it.
    const ok = parser.write(Buffer.from(chunk.slice(0)))
    if (isLast) parser.end()
    else if (!ok && ex.writable && !paused) {
      paused = true
      ex.hold()
      parser.once("drain", () => {
        if (!paused) return
        paused = false
        ex.release()
      })
    }
  })

  return {
    get complete() {
      return complete
    },
    file: () => pending,
    fields: () => allFields,
  }
}
