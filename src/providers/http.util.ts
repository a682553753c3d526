// Pieces every provider's HTTP adapter needs when talking to a vendor API: reading Retry-After
// and describing a network failure with its underlying cause.

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
