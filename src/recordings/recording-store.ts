// Where a recording's bytes live, behind one interface: Postgres chunks (pg-recording-store.ts) or an
// S3-compatible bucket (s3-recording-store.ts). The rows that say which bytes exist are recordings.repo.ts's.
import { ProviderCallError } from "../providers/http.util.js"

/** Bytes [start, end] of an object, both inclusive, as HTTP's Range: bytes=start-end. */
export interface ByteRange {
  readonly start: number
  readonly end: number
}

export interface RecordingStore {
  readonly kind: "pg" | "s3"
  put(key: string, bytes: Uint8Array, contentType: string): Promise<void>
  /**
   * Bytes [start, end] inclusive (undefined range = whole); yields chunks, never the whole object at
   * once. An end past the object's last byte reads to its end (as HTTP does); a start past it throws
   * RecordingStoreError with reason "range", a key with no object one with reason "not_found".
   */
  read(key: string, range?: ByteRange): AsyncIterable<Uint8Array>
  /** Deleting a key with no object is not an error (so a retried delete is harmless). */
  delete(key: string): Promise<void>
}

/**
 * Why a store refused or failed: not_found (no object under the key), range (start past the end),
 * auth (S3 refused the credentials: InvalidAccessKeyId, SignatureDoesNotMatch, AccessDenied),
 * unavailable (5xx, 429), refused (any other status), unreachable (network, timeout, a redirect).
 */
export type RecordingStoreFailure = "not_found" | "range" | "auth" | "unavailable" | "refused" | "unreachable"

/** A store's failure, typed. Its message never carries a credential. */
export class RecordingStoreError extends ProviderCallError {
  override readonly name = "RecordingStoreError"
  /** The store's own error code when it gave one (S3: NoSuchKey, SignatureDoesNotMatch, …). */
  readonly code: string | undefined
  constructor(
    readonly store: "pg" | "s3",
    readonly op: "put" | "read" | "delete",
    readonly key: string,
    readonly reason: RecordingStoreFailure,
    /** What went wrong, without the store, operation and key the message starts with. */
    readonly detail: string,
    options: { status?: number; code?: string; cause?: unknown } = {},
  ) {
    super(
      `recording store ${store}: ${op} ${key}: ${detail}`,
      reason === "unavailable" || reason === "unreachable",
      options,
    )
    this.code = options.code
  }
}

/** The range checked: whole numbers, start ≤ end. Throws RangeError for a malformed one (a caller's bug). */
export function checkRange(range: ByteRange | undefined): void {
  if (range === undefined) return
  const { start, end } = range
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || end < start)
    throw new RangeError(`bad byte range ${start}-${end}`)
}
