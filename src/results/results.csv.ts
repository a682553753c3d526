// A run's results as CSV, written page by page (sized by bytes) as the client reads: a header row, then
// one row per target. Cells a spreadsheet would run as a formula are defused; the socket paces the queries.
import { stringify } from "csv-stringify/sync"
import type { ResultRow } from "./results.repo.js"

/** The columns every export has, before the workflow's own analysis fields. */
export const FIXED_COLUMNS = [
  "target_id",
  "phone",
  "name",
  "status",
  "outcome",
  "attempts",
  "talk_seconds",
  "cost_minor",
  "currency",
  "analysis_status",
  "summary",
  "goal_met",
  "sentiment",
  "callback_at",
  "agreed_value_minor",
  "arm",
] as const

/**
 * The extracted fields' column names, in their order, each unique: a field's own name, unless a fixed
 * column has it, then `field_<name>` (again until free: a field named `field_phone` beside one named
 * `phone` keeps its own name, and `phone`'s column becomes `field_field_phone`). Names a field has as
 * its own are taken before any is prefixed, so a field's column does not depend on the others' order.
 */
export function fieldColumns(fields: ReadonlyArray<string>): string[] {
  const taken = new Set<string>(FIXED_COLUMNS)
  const own = fields.map((name) => {
    if (taken.has(name)) return undefined
    taken.add(name)
    return name
  })
  return fields.map((name, i) => {
    const mine = own[i]
    if (mine !== undefined) return mine
    let column = `field_${name}`
    while (taken.has(column)) column = `field_${column}`
    taken.add(column)
    return column
  })
}

// A spreadsheet runs a cell starting with = + - @ (or a tab or CR) as a formula, and some trim
// leading whitespace and line breaks first (" =HYPERLINK(...)", "\n=1+1"), so a cell whose first
// character other than whitespace is one of those gets one leading "'" (as does one that already
// starts with quotes and then such a cell, so taking exactly one off gives every value back). A plain
// number is left alone: a phone in E.164 (+14155550103) or a negative amount cannot run anything, and
// a CRM importing the file needs it as written. (OWASP, "CSV Injection".)
const FORMULA = /^'*(?:[\t\r]|\s*[=+\-@])/
const NUMBER = /^[+-]?\d+(\.\d+)?$/

const needsQuote = (cell: string): boolean => FORMULA.test(cell) && !NUMBER.test(cell)

export const safeCell = (cell: string): string => (needsQuote(cell) ? `'${cell}` : cell)

/** The inverse of safeCell, for readers of the file (and the tests that read it back). */
export const unsafeCell = (cell: string): string =>
  cell.startsWith("'") && needsQuote(cell.slice(1)) ? cell.slice(1) : cell

const text = (v: unknown): string => {
  if (v === null || v === undefined) return ""
  if (v instanceof Date) return v.toISOString()
  if (typeof v === "object") return JSON.stringify(v)
  return String(v)
}

const OPTIONS = { record_delimiter: "\r\n" } as const

export const csvHeader = (fields: ReadonlyArray<string>): string =>
  stringify([[...FIXED_COLUMNS, ...fieldColumns(fields)].map(safeCell)], OPTIONS)

export const csvRows = (rows: ReadonlyArray<ResultRow>, fields: ReadonlyArray<string>, currency: string): string =>
  stringify(
    rows.map((r) =>
      [
        r.target_id,
        r.phone,
        r.name,
        r.status,
        r.outcome,
        r.attempts,
        r.talk_seconds,
        r.cost_minor,
        currency,
        r.analysis_status,
        r.summary,
        r.goal_met,
        r.sentiment,
        r.callback_at,
        r.agreed_value_minor,
        r.arm,
        ...fields.map((f) => r.fields?.[f]),
      ].map((v) => safeCell(text(v))),
    ),
    OPTIONS,
  )

/** Where the CSV goes: resolves false once the client is gone (see api/reply.ts StreamWriter). */
export interface ChunkWriter {
  write(chunk: string): Promise<boolean>
}

/** How an export sizes its pages: by bytes of CSV, within a range of rows. */
export interface PagePlan {
  /** Rows of the first query, before anything is known of the rows' size. */
  readonly firstRows: number
  readonly maxRows: number
  /** The CSV one page should come to: the next page's rows are this over the last page's bytes per row. */
  readonly pageBytes: number
}

/**
 * Writes the header, then every page `read` gives (up to `limit` rows after a target id), each once
 * the socket took the one before: memory holds at most the page being written and the next, read
 * meanwhile, each about `pageBytes` of CSV however wide the rows are (a page of 1,000 rows with long
 * summaries and twenty fields would be several MB). Stops reading when the client goes away.
 */
export async function writeResultsCsv(
  out: ChunkWriter,
  opts: { fields: ReadonlyArray<string>; currency: string; pages: PagePlan },
  read: (afterTargetId: number, limit: number) => Promise<ReadonlyArray<ResultRow>>,
): Promise<void> {
  if (!(await out.write(csvHeader(opts.fields)))) return
  const { firstRows, maxRows, pageBytes } = opts.pages
  let limit = firstRows
  let page = await read(0, limit)
  for (;;) {
    const chunk = page.length === 0 ? "" : csvRows(page, opts.fields, opts.currency)
    const last = page[page.length - 1]
    let next: Promise<ReadonlyArray<ResultRow>> | undefined
    // A short page is the last one.
    if (page.length === limit && last !== undefined) {
      const perRow = Buffer.byteLength(chunk) / page.length
      // At most double the rows from one page to the next: a run's first rows may be its shortest.
      limit = Math.max(1, Math.min(maxRows, 2 * limit, Math.floor(pageBytes / Math.max(1, perRow))))
      next = read(last.target_id, limit)
    }
    const written = chunk === "" || (await out.write(chunk))
    if (!written || next === undefined) {
      // The read ahead is abandoned with the client; its failure would have nobody to tell.
      next?.catch(() => {})
      return
    }
    page = await next
  }
}
