// An audience file or JSON body turned into normalised rows (E.164 phone, name, other columns),
// handed on in batches as they are read, with invalid numbers counted and the first few kept.
import type { Readable } from "node:stream"
import { type CsvLayout, type CsvRow, PHONE_HEADERS, readCsv, withoutNul } from "../phones/csv.js"
import { type TenantCountry, toE164 } from "../phones/phone.js"

export type AudienceRole = "phone" | "name"

export const AUDIENCE_LAYOUT: CsvLayout<AudienceRole> = {
  key: "phone",
  roles: {
    phone: PHONE_HEADERS,
    name: [
      "name",
      "full_name",
      "fullname",
      "customer_name",
      "contact_name",
      "first_name",
      "firstname",
      "first",
      "given_name",
    ],
  },
  positional: ["phone", "name"],
}

/** audience_targets.name is at most this long; longer CSV names are cut (JSON ones refused). */
export const NAME_MAX = 200
/** How many invalid rows a response lists (all are counted). */
export const INVALID_ROWS_SHOWN = 100
export const BATCH_SIZE = 1000

/** A valid row, ready for audience_staging. */
export interface AudienceRow {
  /** CSV: the file line the record starts on; JSON: the row's 1-based position. */
  readonly line: number
  readonly phone: string
  readonly name: string | null
  readonly fields: Readonly<Record<string, unknown>>
}

export interface InvalidRow {
  readonly line: number
  readonly phone: string
  readonly reason: string
}

export interface ParseTally {
  /** Data rows read (valid and invalid; not the header, not blank lines). */
  readonly rows: number
  readonly invalid: number
  readonly invalidRows: ReadonlyArray<InvalidRow>
}

/** Where valid rows go, at most `batchSize` at a time; the next batch waits for the last. */
export interface BatchSink {
  readonly batchSize: number
  onBatch(rows: AudienceRow[]): Promise<void>
}

/** One row as a JSON body sends it: phone, name, and any other keys (kept in fields). */
export interface JsonAudienceRow {
  readonly phone: string | number
  readonly name?: string | null | undefined
  readonly [key: string]: unknown
}

interface Candidate {
  readonly line: number
  readonly phone: string | number
  readonly name: string | null
  readonly fields: Record<string, unknown>
}

/**
 * Normalises each candidate and hands valid rows on in batches. One loop, no generator per
 * stage: at 100,000 rows the per-row async hops would cost as much as csv-parse itself.
 */
async function drain<T>(
  items: AsyncIterable<T> | Iterable<T>,
  candidate: (item: T) => Candidate,
  country: TenantCountry,
  sink: BatchSink,
): Promise<ParseTally> {
  let rows = 0
  let invalid = 0
  const invalidRows: InvalidRow[] = []
  let batch: AudienceRow[] = []
  for await (const item of items) {
    const c = candidate(item)
    rows++
    const phone = toE164(c.phone, country)
    if (phone.ok) {
      batch.push({ line: c.line, phone: phone.e164, name: c.name, fields: c.fields })
      if (batch.length >= sink.batchSize) {
        await sink.onBatch(batch)
        batch = []
      }
      continue
    }
    invalid++
    if (invalidRows.length < INVALID_ROWS_SHOWN)
      invalidRows.push({ line: c.line, phone: String(c.phone).slice(0, 64), reason: phone.reason })
  }
  if (batch.length > 0) await sink.onBatch(batch)
  return { rows, invalid, invalidRows }
}

/**
 * Reads an audience CSV as it streams in. Throws CsvFormatError for a file with no phone
 * column or unreadable CSV, and passes on any failure of the source itself.
 */
export function parseAudienceCsv(
  input: Readable | AsyncIterable<Buffer | string>,
  country: TenantCountry,
  sink: BatchSink,
): Promise<ParseTally> {
  const candidate = (row: CsvRow<AudienceRole>): Candidate => {
    const name = row.cells.name
    return {
      line: row.line,
      phone: row.cells.phone ?? "",
      name: name === undefined || name === "" ? null : name.slice(0, NAME_MAX),
      fields: row.extra,
    }
  }
  return drain(readCsv(input, AUDIENCE_LAYOUT), candidate, country, sink)
}

/** A JSON value with NUL characters taken out of every string in it. */
function jsonWithoutNul(value: unknown): unknown {
  if (typeof value === "string") return withoutNul(value)
  if (Array.isArray(value)) return value.map(jsonWithoutNul)
  if (typeof value === "object" && value !== null)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [withoutNul(k), jsonWithoutNul(v)]))
  return value
}

/** The rows of a JSON body (already validated), the same way; a row's line is its 1-based position. */
export function parseAudienceJson(
  rows: ReadonlyArray<JsonAudienceRow>,
  country: TenantCountry,
  sink: BatchSink,
): Promise<ParseTally> {
  let line = 0
  const candidate = ({ phone, name, ...fields }: JsonAudienceRow): Candidate => {
    const clean = name === undefined || name === null ? "" : withoutNul(name).trim()
    return {
      line: ++line,
      phone,
      name: clean === "" ? null : clean,
      fields: jsonWithoutNul(fields) as Record<string, unknown>,
    }
  }
  return drain(rows, candidate, country, sink)
}
