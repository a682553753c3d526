// Pieces every provider's HTTP adapter needs when talking to a vendor API: the error it fails
// with, reading Retry-After, and describing a network failure with its underlying cause.

/** A provider call that failed; `retryable` says whether the same call may succeed later. */
export class ProviderCallError extends Error {
  /** The provider's HTTP status, when it answered at all. */
  readonly status: number | undefined
  constructor(
    message: string,
    /** true: the same call may succeed later (network, timeout, 429, 5xx); false: it never will. */
    readonly retryable: boolean,
    options?: { cause?: unknown; status?: number },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.status = options?.status
  }
}

/** Retry-After as delta-seconds or an HTTP date, in ms from now. */
export function parseRetryAfter(value: string | null): number | undefined {
  if (value === null) return undefined
  const trimmed = value.trim()
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000
  const at = Date.parse(trimmed)
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now())
}

/** A network error's message, with undici's underlying cause (ECONNREFUSED, …) when present. */
export function describeNetworkError(e: unknown): string {
  if (!(e instanceof Error)) return String(e)
  const cause = e.cause instanceof Error ? `: ${e.cause.message}` : ""
  return `${e.message}${cause}`
}
