// A run's results as CSV, written page by page as the client reads: a header row, then one row per
// target. Cells a spreadsheet would run as a formula are defused; the socket paces the queries.
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
] as const

/** An extracted field's column: its own name, unless a fixed column has it already. */
export const fieldColumn = (name: string): string =>
  (FIXED_COLUMNS as ReadonlyArray<string>).includes(name) ? `field_${name}` : name

// A spreadsheet runs a cell starting with = + - @ (or a tab or CR before one) as a formula, so such
// a cell gets one leading "'" (as does one that already starts with quotes and then such a
// character, so taking exactly one off gives every value back). A plain number is left alone: a
// phone in E.164 (+14155550103) or a negative amount cannot run anything, and a CRM importing the
// file needs it as written.
const FORMULA = /^'*[=+\-@\t\r]/
const NUMBER = /^[+-]?\d+(\.\d+)?$/

export const safeCell = (cell: string): string => (FORMULA.test(cell) && !NUMBER.test(cell) ? `'${cell}` : cell)

/** The inverse of safeCell, for readers of the file (and the tests that read it back). */
export const unsafeCell = (cell: string): string => (/^'+[=+\-@\t\r]/.test(cell) ? cell.slice(1) : cell)

const text = (v: unknown): string => {
  if (v === null || v === undefined) return ""
  if (v instanceof Date) return v.toISOString()
  if (typeof v === "object") return JSON.stringify(v)
  return String(v)
}

const OPTIONS = { record_delimiter: "\r\n" } as const

export const csvHeader = (fields: ReadonlyArray<string>): string =>
  stringify([[...FIXED_COLUMNS, ...fields.map(fieldColumn)].map(safeCell)], OPTIONS)

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
        ...fields.map((f) => r.fields?.[f]),
      ].map((v) => safeCell(text(v))),
    ),
    OPTIONS,
  )

/** Where the CSV goes: resolves false once the client is gone (see api/reply.ts StreamWriter). */
export interface ChunkWriter {
  write(chunk: string): Promise<boolean>
}

/**
 * Writes the header, then every page `read` gives (pages of `pageSize` rows after a target id),
 * each once the socket took the one before: memory holds at most the page being written and the
 * next, read meanwhile. Stops reading when the client goes away.
 */
export async function writeResultsCsv(
  out: ChunkWriter,
  opts: { fields: ReadonlyArray<string>; currency: string; pageSize: number },
  read: (afterTargetId: number) => Promise<ReadonlyArray<ResultRow>>,
): Promise<void> {
  if (!(await out.write(csvHeader(opts.fields)))) return
  let page = await read(0)
  for (;;) {
    const last = page[page.length - 1]
    const next = page.length === opts.pageSize && last !== undefined ? read(last.target_id) : undefined
    const written = page.length === 0 || (await out.write(csvRows(page, opts.fields, opts.currency)))
    if (!written || next === undefined) {
      // The read ahead is abandoned with the client; its failure would have nobody to tell.
      next?.catch(() => {})
      return
    }
    page = await next
  }
}
