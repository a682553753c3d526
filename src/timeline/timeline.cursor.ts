// The timeline's paging position: an event's time to the microsecond plus a tiebreak key that is
// unique across every source, so `before` pages neither repeat nor skip events that share a time.

/**
 * Each source's events carry `key = row id * KEY_SOURCES + source code`: unique across sources,
 * and ordering by it within one source is ordering by row id.
 */
export const KEY_SOURCES = 16

export const SOURCE = {
  call: 0,
  turns: 1,
  approvalRequested: 2,
  approvalResolved: 3,
  dnc: 4,
  dialer: 5,
  apiKey: 6,
  workflow: 7,
  consent: 8,
  signup: 9,
  verificationEmail: 10,
  emailVerified: 11,
  inboundCall: 12,
  kb: 13,
  message: 14,
} as const

/**
 * Where a page ends. `key` absent: a bare timestamp, read strictly (events at that very instant
 * are excluded); present: events older than `at`, or at `at` with a smaller key.
 */
export interface Cursor {
  /** ISO 8601 that Postgres reads exactly (microseconds kept). */
  readonly at: string
  readonly key?: number
}

/** Microseconds since the epoch → ISO 8601 with six fractional digits. */
export function isoMicros(us: number): string {
  const ms = Math.floor(us / 1000)
  const micros = us - ms * 1000
  return new Date(ms).toISOString().replace(/Z$/, `${String(micros).padStart(3, "0")}Z`)
}

export const encodeCursor = (atMicros: number, key: number): string => `${isoMicros(atMicros)}~${key}`

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:?\d{2})$/i

/**
 * `before` as a client sends it: a cursor from `next_before`/`cursor`, or any ISO 8601 timestamp
 * with a zone. An unencoded "+" of a zone offset arrives as a space and is put back.
 * Undefined when the value is neither.
 */
export function parseBefore(raw: string): Cursor | undefined {
  const text = raw.trim().replace(/ (\d{2}:?\d{2})$/, "+$1")
  const [at, key, ...rest] = text.split("~")
  if (at === undefined || rest.length > 0 || !TIMESTAMP.test(at) || Number.isNaN(Date.parse(at))) return undefined
  if (key === undefined) return { at }
  if (!/^\d{1,16}$/.test(key) || !Number.isSafeInteger(Number(key))) return undefined
  return { at, key: Number(key) }
}
