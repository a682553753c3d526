// A data source's rows from CSV (header first, every column kept) or a JSON array of objects,
// with the column list inferred in first-seen order; bounded in rows and columns.
import { pipeline, Readable } from "node:stream"
import { CsvError, parse } from "csv-parse"
import { CSV_OPTIONS, withoutNul } from "../phones/csv.js"
import { MAX_JSON_DEPTH, parseJson } from "../platform/json.js"

export const MAX_ROWS = 100_000
export const MAX_COLUMNS = 200
/** Column names longer than this are cut. */
const COLUMN_NAME_MAX = 100

/** Input that cannot become rows: the reason is shown to the user (422 on upload, `error` on a fetch). */
export class RowsFormatError extends Error {
  override readonly name = "RowsFormatError"
}

export interface ParsedRows {
  readonly rows: Record<string, unknown>[]
  readonly columns: string[]
}

/** Collects column names in first-seen order, refusing more than MAX_COLUMNS. */
class Columns {
  readonly names: string[] = []
  private readonly seen = new Set<string>()
  add(name: string): void {
    if (this.seen.has(name)) return
    if (this.names.length >= MAX_COLUMNS) throw new RowsFormatError(`more than ${MAX_COLUMNS} columns`)
    this.seen.add(name)
    this.names.push(name)
  }
}

/** Header cells → unique, non-empty column names (`col_3` for a blank one, `name_2` for a repeat). */
function headerNames(record: string[]): string[] {
  const used = new Set<string>()
  return record.map((cell, i) => {
    const base = withoutNul(cell).slice(0, COLUMN_NAME_MAX) || `col_${i + 1}`
    let name = base
    for (let n = 2; used.has(name); n++) name = `${base}_${n}`
    used.add(name)
    return name
  })
}

/** The rows of a CSV stream: the first non-blank record is the header; blank cells are left out of a row. */
export async function parseCsvRows(input: Readable | AsyncIterable<Buffer | string>): Promise<ParsedRows> {
  const parser = parse({ ...CSV_OPTIONS })
  pipeline(input instanceof Readable ? input : Readable.from(input), parser, () => {})
  let header: string[] | undefined
  const columns = new Columns()
  const rows: Record<string, unknown>[] = []
  try {
    for await (const record of parser as AsyncIterable<string[]>) {
      if (record.every((c) => c === "")) continue
      if (header === undefined) {
        header = headerNames(record)
        if (header.length > MAX_COLUMNS) throw new RowsFormatError(`more than ${MAX_COLUMNS} columns`)
        continue
      }
      if (rows.length >= MAX_ROWS) throw new RowsFormatError(`more than ${MAX_ROWS} rows`)
      const row: Record<string, unknown> = {}
      for (let i = 0; i < record.length; i++) {
        const value = withoutNul(record[i]!)
        if (value === "") continue
        const name = header[i] ?? `col_${i + 1}`
        columns.add(name)
        row[name] = value
      }
      rows.push(row)
    }
  } catch (e) {
    if (e instanceof CsvError) throw new RowsFormatError(`not readable CSV: ${e.message}`)
    throw e
  } finally {
    parser.destroy()
  }
  if (header === undefined) throw new RowsFormatError("the file is empty: it needs a header line and rows")
  // The header's columns come first, in its order, even those blank in every row.
  const ordered = new Columns()
  for (const h of header) ordered.add(h)
  for (const c of columns.names) ordered.add(c)
  return { rows, columns: ordered.names }
}

/** Strips NUL characters (Postgres jsonb refuses them) from the strings of a JSON value. */
function clean(v: unknown): unknown {
  if (typeof v === "string") return withoutNul(v)
  if (Array.isArray(v)) return v.map(clean)
  if (v !== null && typeof v === "object") {
    const out: Record<string, unknown> = {}
    for (const [k, x] of Object.entries(v)) out[withoutNul(k)] = clean(x)
    return out
  }
  return v
}

/** The rows of a JSON array of objects (other JSON is refused, and so is JSON nested too deep for `clean`). */
export function parseJsonRows(text: string): ParsedRows {
  const parsed = parseJson(text)
  if (!parsed.ok && parsed.reason === "syntax") throw new RowsFormatError(`not readable JSON: ${parsed.message}`)
  if (!parsed.ok) {
    const row = typeof parsed.path[0] === "number" ? `row ${parsed.path[0] + 1}` : "the JSON"
    throw new RowsFormatError(`${row} nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep`)
  }
  if (!Array.isArray(parsed.value)) throw new RowsFormatError("the JSON is not an array of objects")
  return objectRows(parsed.value)
}

/** Rows given as values (JSON, a shop's customers): each must be an object. */
export function objectRows(values: ReadonlyArray<unknown>): ParsedRows {
  if (values.length > MAX_ROWS) throw new RowsFormatError(`more than ${MAX_ROWS} rows`)
  const columns = new Columns()
  const rows: Record<string, unknown>[] = []
  values.forEach((v, i) => {
    if (v === null || typeof v !== "object" || Array.isArray(v))
      throw new RowsFormatError(`row ${i + 1} is not an object`)
    const row = clean(v) as Record<string, unknown>
    for (const k of Object.keys(row)) columns.add(k)
    rows.push(row)
  })
  return { rows, columns: columns.names }
}

/** A fetched body: JSON when it says so or looks like an array, CSV otherwise. */
export async function parseFetched(body: Buffer, contentType: string | null): Promise<ParsedRows> {
  const text = body.toString("utf8")
  const looksJson = /json/i.test(contentType ?? "") || /^\s*\[/.test(text)
  if (looksJson) return parseJsonRows(text)
  return parseCsvRows(Readable.from([body]))
}
