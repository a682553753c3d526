// The S3 recording store: objects at {endpoint}/{bucket}/{key} (path-style, so any S3-compatible
// server does), each request signed with AWS Signature V4 (aws4fetch's signer) and sent by fetch.
// A failure is a RecordingStoreError; the secret key only ever goes into the signature.
import { createHash } from "node:crypto"
import { AwsV4Signer } from "aws4fetch"
import type { S3Settings } from "../platform/config/recordings.js"
import { type Attempt, describeNetworkError, MAX_ATTEMPTS, withRetries } from "../providers/http.util.js"
import {
  type ByteRange,
  checkRange,
  type RecordingStore,
  RecordingStoreError,
  type RecordingStoreFailure,
} from "./recording-store.js"

/** SHA-256 of no bytes: the payload hash of a GET or DELETE. */
const EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
/** How much of an error answer is read for its code (S3's XML errors are well under 1 KiB). */
const ERROR_BODY_LIMIT = 16 * 1024
/** Upload speed a PUT is allowed on top of its timeout: at least 256 KiB/s. */
const PUT_BYTES_PER_SECOND = 256 * 1024

export interface S3StoreOptions extends S3Settings {
  /** Longest a request waits for its answer (a PUT gets one more second per 256 KiB); default 30 s. */
  readonly timeoutMs?: number
  /** Longest a read waits for the next bytes of an object being streamed; default 30 s. */
  readonly idleTimeoutMs?: number
  /** Replaces the global fetch (tests). */
  readonly fetch?: typeof fetch
}

type Op = "put" | "read" | "delete"
/** A GET's answer, and the controller that aborts it (its idle timeout while the body streams). */
type Answer = { readonly res: Response; readonly controller: AbortController }

/** What an S3 status and error code mean for the caller. */
function failureOf(status: number, code: string | undefined): RecordingStoreFailure {
  if (status === 404 && code !== "NoSuchBucket") return "not_found"
  if (status === 416) return "range"
  if (status === 401 || status === 403) return "auth"
  if (status === 429 || status >= 500) return "unavailable"
  return "refused"
}

/** The key as a URL path: each segment percent-encoded as SigV4 canonicalises it (RFC 3986). */
const encodeKey = (key: string): string =>
  key
    .split("/")
    .map((s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`))
    .join("/")

/** A timer that aborts `controller` unless cleared first. */
function deadline(controller: AbortController, ms: number, what: string): NodeJS.Timeout {
  return setTimeout(() => controller.abort(new DOMException(`${what} within ${ms} ms`, "TimeoutError")), ms)
}

export class S3RecordingStore implements RecordingStore {
  readonly kind = "s3" as const
  readonly #o: S3StoreOptions
  readonly #timeoutMs: number
  readonly #idleTimeoutMs: number
  /** The signing keys derived from the secret, per day (aws4fetch's cache). */
  readonly #signingKeys = new Map<string, ArrayBuffer>()

  constructor(options: S3StoreOptions) {
    this.#o = { ...options, endpoint: options.endpoint.replace(/\/+$/, "") }
    this.#timeoutMs = options.timeoutMs ?? 30_000
    this.#idleTimeoutMs = options.idleTimeoutMs ?? 30_000
  }

  /** The object's URL (path-style). */
  urlOf(key: string): string {
    return `${this.#o.endpoint}/${this.#o.bucket}/${encodeKey(key)}`
  }

  async put(key: string, bytes: Uint8Array, contentType: string): Promise<void> {
    const sha = createHash("sha256").update(bytes).digest("hex")
    const timeoutMs = this.#timeoutMs + Math.ceil(bytes.byteLength / PUT_BYTES_PER_SECOND) * 1000
    await withRetries(
      () =>
        this.#once("put", key, timeoutMs, async (signal) => {
          const res = await this.#send(
            "PUT",
            key,
            { "content-type": contentType, "x-amz-content-sha256": sha },
            {
              body: bytes,
              signal,
            },
          )
          await res.body?.cancel().catch(() => {}) // a PUT's answer says nothing past its status
        }),
      gaveUp,
    )
  }

  async delete(key: string): Promise<void> {
    await withRetries(
      () =>
        this.#once("delete", key, this.#timeoutMs, async (signal) => {
          const res = await this.#send("DELETE", key, { "x-amz-content-sha256": EMPTY_SHA256 }, { signal }, [404])
          await res.body?.cancel().catch(() => {}) // 204: nothing to read
        }),
      gaveUp,
    )
  }

  read(key: string, range?: ByteRange): AsyncIterable<Uint8Array> {
    checkRange(range)
    const store = this
    return {
      async *[Symbol.asyncIterator]() {
        yield* store.#stream(key, range)
      },
    }
  }

  async *#stream(key: string, range: ByteRange | undefined): AsyncGenerator<Uint8Array> {
    // Until the answer's headers are in, a failure may be retried; after the first byte it may not.
    const { res, controller } = await withRetries(async (): Promise<Attempt<Answer, RecordingStoreError>> => {
      const controller = new AbortController()
      const timer = deadline(controller, this.#timeoutMs, "no answer")
      try {
        const headers: Record<string, string> = { "x-amz-content-sha256": EMPTY_SHA256 }
        if (range !== undefined) headers.range = `bytes=${range.start}-${range.end}`
        const res = await this.#send("GET", key, headers, { signal: controller.signal })
        return { ok: true, value: { res, controller } }
      } catch (e) {
        return { ok: false, error: this.#asError("read", key, e, this.#timeoutMs) }
      } finally {
        clearTimeout(timer)
      }
    }, gaveUp)
    // A server that ignores Range answers 200 with the whole object: only the bytes asked for go on.
    let at = res.status === 206 ? (range?.start ?? 0) : 0
    const from = range?.start ?? 0
    const to = range?.end ?? Number.POSITIVE_INFINITY
    const reader = res.body?.getReader()
    if (reader === undefined) return
    let done = false
    try {
      while (at <= to) {
        const timer = deadline(controller, this.#idleTimeoutMs, "no bytes")
        let next: Awaited<ReturnType<typeof reader.read>>
        try {
          next = await reader.read()
        } catch (e) {
          throw this.#asError("read", key, e, this.#idleTimeoutMs, "no more bytes")
        } finally {
          clearTimeout(timer)
        }
        if (next.done) {
          done = true
          break
        }
        const chunk = next.value
        const lo = Math.max(0, from - at)
        const hi = Math.min(chunk.byteLength, to - at + 1)
        at += chunk.byteLength
        if (hi > lo) yield lo === 0 && hi === chunk.byteLength ? chunk : chunk.subarray(lo, hi)
      }
    } finally {
      // Stopped early (the caller's choice, a timeout, or past the range): the connection goes.
      if (!done) await reader.cancel().catch(() => {}) // nothing more is wanted from it
    }
  }

  /** One request with its own timeout, as an Attempt for withRetries. */
  async #once(
    op: Op,
    key: string,
    timeoutMs: number,
    run: (signal: AbortSignal) => Promise<void>,
  ): Promise<Attempt<void, RecordingStoreError>> {
    const controller = new AbortController()
    const timer = deadline(controller, timeoutMs, "no answer")
    try {
      await run(controller.signal)
      return { ok: true, value: undefined }
    } catch (e) {
      return { ok: false, error: this.#asError(op, key, e, timeoutMs) }
    } finally {
      clearTimeout(timer)
    }
  }

  /** Signs and sends one request; a status other than 2xx (or `alsoOk`) throws RecordingStoreError. */
  async #send(
    method: "PUT" | "GET" | "DELETE",
    key: string,
    headers: Record<string, string>,
    init: { body?: Uint8Array; signal: AbortSignal },
    alsoOk: readonly number[] = [],
  ): Promise<Response> {
    const signed = await new AwsV4Signer({
      method,
      url: this.urlOf(key),
      headers,
      accessKeyId: this.#o.accessKeyId,
      secretAccessKey: this.#o.secretAccessKey,
      service: "s3",
      region: this.#o.region,
      cache: this.#signingKeys,
    }).sign()
    const doFetch = this.#o.fetch ?? fetch
    const res = await doFetch(signed.url.toString(), {
      method,
      headers: signed.headers,
      redirect: "manual",
      signal: init.signal,
      ...(init.body !== undefined && { body: init.body }),
    })
    if ((res.status >= 200 && res.status < 300) || alsoOk.includes(res.status)) return res
    const op: Op = method === "PUT" ? "put" : method === "GET" ? "read" : "delete"
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel().catch(() => {}) // a redirect is never followed: its body is of no use
      throw new RecordingStoreError("s3", op, key, "unreachable", `answered HTTP ${res.status} (a redirect)`, {
        status: res.status,
      })
    }
    const { code, message } = await errorOf(res)
    let detail = `HTTP ${res.status}`
    if (code !== undefined) detail += ` ${code}`
    if (message !== undefined) detail += `: ${message}`
    throw new RecordingStoreError("s3", op, key, failureOf(res.status, code), detail, {
      status: res.status,
      ...(code !== undefined && { code }),
    })
  }

  #asError(op: Op, key: string, e: unknown, timeoutMs: number, late = "no answer"): RecordingStoreError {
    if (e instanceof RecordingStoreError) return e
    const timedOut = e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError")
    const detail = timedOut ? `unreachable: ${late} within ${timeoutMs} ms` : `unreachable: ${describeNetworkError(e)}`
    return new RecordingStoreError("s3", op, key, "unreachable", detail, { cause: e })
  }
}

/** The last failure of a retried request, saying that it gave up. */
const gaveUp = (_message: string, cause: RecordingStoreError): RecordingStoreError =>
  new RecordingStoreError(
    cause.store,
    cause.op,
    cause.key,
    cause.reason,
    `${cause.detail} (gave up after ${MAX_ATTEMPTS} attempts)`,
    {
      ...(cause.status !== undefined && { status: cause.status }),
      ...(cause.code !== undefined && { code: cause.code }),
      cause,
    },
  )

/** S3's error code and message from its XML answer (HEAD and some errors have none). */
async function errorOf(res: Response): Promise<{ code?: string; message?: string }> {
  let text = ""
  try {
    const reader = res.body?.getReader()
    if (reader !== undefined) {
      const parts: Uint8Array[] = []
      let size = 0
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        parts.push(value)
        size += value.byteLength
        if (size >= ERROR_BODY_LIMIT) {
          await reader.cancel().catch(() => {}) // enough of it to find the code
          break
        }
      }
      text = Buffer.concat(parts).toString("utf8")
    }
  } catch {
    // The status alone says enough.
  }
  const tag = (name: string) => new RegExp(`<${name}>([^<]{1,300})</${name}>`).exec(text)?.[1]
  const code = tag("Code")
  const message = tag("Message")
  return { ...(code !== undefined && { code }), ...(message !== undefined && { message }) }
}
