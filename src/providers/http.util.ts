// Pieces every provider's HTTP adapter needs when talking to a vendor API: the error it fails
// with, retries, reading Retry-After and a JSON object answer, and describing a network failure.

/** A provider call that failed; `retryable` says whether the same call may succeed later. */
import { setTimeout as sleep } from "node:timers/promises"

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

export const MAX_ATTEMPTS = 3
const BACKOFF_BASE_MS = 250
/** A Retry-After longer than this is not worth holding the caller's request open for. */
const MAX_RETRY_AFTER_MS = 5_000

/** One try at a provider call: its value, or why it failed and when the provider asked us to return. */
export type Attempt<T, E extends Error> = { ok: true; value: T } | { ok: false; error: E; retryAfterMs?: number }

/**
 * Runs `attempt` up to MAX_ATTEMPTS times while its failures are retryable, backing off 250 ms,
 * 500 ms (or the provider's Retry-After, up to 5 s). The last failure is rethrown; a retryable one
 * is wrapped by `wrap` to say the call gave up.
 */
export async function withRetries<T, E extends ProviderCallError>(
  attempt: () => Promise<Attempt<T, E>>,
  wrap: (message: string, cause: E) => E,
): Promise<T> {
  let last: E | undefined
  for (let n = 1; n <= MAX_ATTEMPTS; n++) {
    const result = await attempt()
    if (result.ok) return result.value
    last = result.error
    if (!result.error.retryable || n === MAX_ATTEMPTS) break
    const backoff = BACKOFF_BASE_MS * 2 ** (n - 1)
    await sleep(Math.min(Math.max(backoff, result.retryAfterMs ?? 0), MAX_RETRY_AFTER_MS))
  }
  if (!last!.retryable) throw last
  throw wrap(`${last!.message} (gave up after ${MAX_ATTEMPTS} attempts)`, last!)
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

/** The JSON object a vendor answered, or undefined for anything else (not JSON, an array, a scalar). */
export function parseJsonObject(text: string): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(text)
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed))
      return parsed as Record<string, unknown>
  } catch {
    // Not JSON: the caller reports it.
  }
  return undefined
}
