// Knowledge-base rule files: the CSV and JSON an export writes and an import reads back unchanged.
// Reading checks every row against the rule schema and collects every error; nothing here writes.
import { CsvError, type InfoRecord, type Options, parse } from "csv-parse"
import { stringify } from "csv-stringify/sync"
import type { RuleRow } from "./kb.repo.js"
import { ImportedRule, type ImportedRuleInput, PHRASE_SEPARATOR } from "./rule.schema.js"

export const IMPORT_FORMATS = ["csv", "json"] as const
export type ImportFormat = (typeof IMPORT_FORMATS)[number]
/** The most rules one import may hold (they go in as one transaction). */
export const IMPORT_MAX_ROWS = 10_000

export const CSV_COLUMNS = [
  "bucket",
  "title",
  "body",
  "trigger_phrases",
  "trigger_category",
  "workflow_id",
  "priority",
  "status",
] as const
type Column = (typeof CSV_COLUMNS)[number]
const REQUIRED_COLUMNS: ReadonlyArray<Column> = ["bucket", "title", "body"]

/** One problem with an import: the row as numbered in the file, the column or field, what is wrong. */
export interface RowError {
  readonly row: number
  readonly field: string
  readonly message: string
}

export interface ImportRow {
  /** CSV: the line the record starts on (the header is line 1); JSON: the 1-based index. */
  readonly row: number
  readonly rule: ImportedRuleInput
}

export type ReadResult =
  | { readonly ok: true; readonly rows: ReadonlyArray<ImportRow> }
  | { readonly ok: false; readonly errors: ReadonlyArray<RowError> }

// --- formula cells --------------------------------------------------------------------------------
// A spreadsheet runs a cell starting with = + - @ (or a tab or CR before one) as a formula. The
// export puts one "'" before such a cell (and before one that already starts with quotes and then
// such a character), and the import takes exactly one off again, so every value round-trips.
const FORMULA_OUT = /^'*[=+\-@\t\r]/
const FORMULA_IN = /^'+[=+\-@\t\r]/

export const escapeCell = (cell: string): string => (FORMULA_OUT.test(cell) ? `'${cell}` : cell)
export const unescapeCell = (cell: string): string => (FORMULA_IN.test(cell) ? cell.slice(1) : cell)

// --- writing --------------------------------------------------------------------------------------

/** A rule as an export file holds it (JSON), without ids or timestamps: an import recreates it. */
export const portableRule = (r: RuleRow) => ({
  bucket: r.bucket,
  title: r.title,
  body: r.body,
  trigger: r.trigger === null ? null : { phrases: [...r.trigger.phrases], category: r.trigger.category ?? null },
  workflow_id: r.workflow_id,
  priority: r.priority,
  status: r.status,
})

export function rulesCsv(rows: ReadonlyArray<RuleRow>): string {
  const records = rows.map((r) =>
    [
      r.bucket,
      r.title,
      r.body,
      (r.trigger?.phrases ?? []).join(PHRASE_SEPARATOR),
      r.trigger?.category ?? "",
      r.workflow_id === null ? "" : String(r.workflow_id),
      String(r.priority),
      r.status,
    ].map(escapeCell),
  )
  return stringify(records, { header: true, columns: [...CSV_COLUMNS], record_delimiter: "\r\n" })
}

export const rulesJson = (rows: ReadonlyArray<RuleRow>): string =>
  `${JSON.stringify({ rules: rows.map(portableRule) }, null, 2)}\n`

// --- reading --------------------------------------------------------------------------------------

const tooMany = (): ReadResult => ({
  ok: false,
  errors: [{ row: 0, field: "rows", message: `at most ${IMPORT_MAX_ROWS} rules per import` }],
})

/** Checks one candidate against the schema; errors are named by `fieldOf` the zod path. */
function check(
  row: number,
  candidate: unknown,
  fieldOf: (path: ReadonlyArray<PropertyKey>) => string,
  out: { rows: ImportRow[]; errors: RowError[] },
): void {
  const r = ImportedRule.safeParse(candidate)
  if (r.success) out.rows.push({ row, rule: r.data })
  else for (const issue of r.error.issues) out.errors.push({ row, field: fieldOf(issue.path), message: issue.message })
}

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve))
/** Rows checked between yields to the event loop, so a large import never holds it for long. */
const CHECK_SLICE = 250

async function checkAll(
  items: ReadonlyArray<{ row: number; candidate: unknown }>,
  fieldOf: (path: ReadonlyArray<PropertyKey>) => string,
  errors: RowError[],
): Promise<ReadResult> {
  const out = { rows: [] as ImportRow[], errors }
  for (let i = 0; i < items.length; i++) {
    if (i > 0 && i % CHECK_SLICE === 0) await yieldToLoop()
    check(items[i]!.row, items[i]!.candidate, fieldOf, out)
  }
  return out.errors.length > 0 ? { ok: false, errors: out.errors } : { ok: true, rows: out.rows }
}

// JSON ---------------------------------------------------------------------------------------------

const jsonField = (path: ReadonlyArray<PropertyKey>) => (path.length === 0 ? "row" : path.map(String).join("."))

/** `{rules: [...]}` as the export writes it, or a bare array of rules. */
export async function readJson(raw: Buffer): Promise<ReadResult> {
  let doc: unknown
  try {
    doc = JSON.parse(raw.toString("utf8").replace(/^\uFEFF/, ""))
  } catch (e) {
    return { ok: false, errors: [{ row: 0, field: "file", message: `not valid JSON: ${(e as Error).message}` }] }
  }
  const list = Array.isArray(doc) ? doc : (doc as { rules?: unknown } | null)?.rules
  if (!Array.isArray(list))
    return {
      ok: false,
      errors: [{ row: 0, field: "rules", message: "must be {rules: [...]} or an array of rules" }],
    }
  if (list.length > IMPORT_MAX_ROWS) return tooMany()
  return checkAll(
    list.map((candidate, i) => ({ row: i + 1, candidate })),
    jsonField,
    [],
  )
}

// CSV ----------------------------------------------------------------------------------------------

interface Located {
  readonly cells: string[]
  readonly line: number
}

/** csv-parse options: strict quoting, blank lines skipped, a runaway quote bounded. */
const CSV_OPTIONS = {
  bom: true,
  skip_empty_lines: true,
  relax_column_count: true,
  max_record_size: 256 * 1024,
} as const

/** Bytes handed to the parser between yields to the event loop. */
const PARSE_CHUNK = 64 * 1024

/**
 * The records of a CSV buffer with the line each starts on, parsed a chunk at a time with a turn
 * of the event loop between chunks. Stops early past `maxRecords`. Unreadable CSV is an error on
 * the line of the record it broke in. Records whose cells are all empty are skipped.
 */
async function csvRecords(
  raw: Buffer,
  maxRecords: number,
): Promise<{ records: Located[]; tooMany: boolean } | { error: RowError }> {
  const records: Located[] = []
  // Where each record starts: one line past where the last one ended, plus the blank lines skipped.
  let lastEnd = 0
  let lastEmpty = 0
  let failure: unknown
  const options: Options = {
    ...CSV_OPTIONS,
    on_record: ((cells: string[], info: InfoRecord) => {
      // A record of empty cells (",,,") is a blank line too: not counted, not a row.
      if (cells.some((c) => c !== "")) records.push({ cells, line: lastEnd + 1 + (info.empty_lines - lastEmpty) })
      lastEnd = info.lines
      lastEmpty = info.empty_lines
      return cells
    }) as Options["on_record"],
  }
  const parser = parse(options)
  parser.on("data", () => {})
  parser.on("error", (e) => {
    failure = e
  })
  const ended = new Promise<void>((resolve) => {
    parser.once("end", resolve)
    parser.once("error", () => resolve())
  })
  for (let at = 0; at < raw.length && failure === undefined; at += PARSE_CHUNK) {
    parser.write(raw.subarray(at, at + PARSE_CHUNK))
    if (records.length > maxRecords) {
      parser.destroy()
      return { records, tooMany: true }
    }
    await yieldToLoop()
  }
  if (failure === undefined) {
    parser.end()
    await ended
  }
  if (failure !== undefined) {
    const e = failure as CsvError & { empty_lines?: number }
    const line = lastEnd + 1 + ((typeof e.empty_lines === "number" ? e.empty_lines : lastEmpty) - lastEmpty)
    const message = failure instanceof CsvError ? e.message : String(failure)
    return { error: { row: line, field: "file", message: `not readable CSV: ${message}` } }
  }
  return { records, tooMany: records.length > maxRecords }
}

const csvField = (path: ReadonlyArray<PropertyKey>): string => {
  const [head, sub] = path
  if (head === "trigger") return sub === "category" ? "trigger_category" : "trigger_phrases"
  return head === undefined ? "row" : String(head)
}

const asInteger = (cell: string): unknown => (/^-?\d+$/.test(cell) ? Number(cell) : cell)

/** A CSV record as the candidate rule the schema checks (cells un-escaped, blanks as absent). */
function candidateOf(cells: ReadonlyArray<string>, at: ReadonlyMap<Column, number>): Record<string, unknown> {
  const cell = (c: Column): string | undefined => {
    const i = at.get(c)
    return i === undefined ? undefined : unescapeCell(cells[i] ?? "")
  }
  const phrases = cell("trigger_phrases") ?? ""
  const category = cell("trigger_category") ?? ""
  const workflow = cell("workflow_id") ?? ""
  const priority = cell("priority") ?? ""
  const status = cell("status") ?? ""
  return {
    bucket: cell("bucket"),
    title: cell("title"),
    body: cell("body"),
    trigger: {
      phrases: phrases.trim() === "" ? [] : phrases.split("|"),
      category: category.trim() === "" ? null : category.trim(),
    },
    workflow_id: workflow.trim() === "" ? null : asInteger(workflow.trim()),
    priority: priority.trim() === "" ? undefined : asInteger(priority.trim()),
    status: status.trim() === "" ? undefined : status.trim(),
  }
}

/** A header row naming the columns (any order, any case); bucket, title and body are required. */
export async function readCsv(raw: Buffer): Promise<ReadResult> {
  // The header, the rows, and one more to tell that there are too many.
  const parsed = await csvRecords(raw, IMPORT_MAX_ROWS + 1)
  if ("error" in parsed) return { ok: false, errors: [parsed.error] }
  if (parsed.tooMany) return tooMany()
  const [header, ...rows] = parsed.records
  if (header === undefined)
    return {
      ok: false,
      errors: [{ row: 1, field: "file", message: `the file is empty: it needs a header (${CSV_COLUMNS.join(",")})` }],
    }
  const errors: RowError[] = []
  const at = new Map<Column, number>()
  header.cells.forEach((name, i) => {
    const key = name.trim().toLowerCase()
    if (!(CSV_COLUMNS as ReadonlyArray<string>).includes(key))
      errors.push({
        row: header.line,
        field: name.trim() === "" ? `column ${i + 1}` : name,
        message: `unknown column; the columns are ${CSV_COLUMNS.join(", ")}`,
      })
    else if (at.has(key as Column)) errors.push({ row: header.line, field: key, message: "column given twice" })
    else at.set(key as Column, i)
  })
  for (const c of REQUIRED_COLUMNS)
    if (!at.has(c)) errors.push({ row: header.line, field: c, message: "missing column (required)" })
  if (REQUIRED_COLUMNS.some((c) => !at.has(c))) return { ok: false, errors }
  const width = header.cells.length
  const items: Array<{ row: number; candidate: unknown }> = []
  for (const r of rows) {
    if (r.cells.length !== width)
      errors.push({ row: r.line, field: "row", message: `has ${r.cells.length} cells; the header has ${width}` })
    else items.push({ row: r.line, candidate: candidateOf(r.cells, at) })
  }
  const checked = await checkAll(items, csvField, errors)
  if (checked.ok) return checked
  return { ok: false, errors: [...checked.errors].sort((x, y) => x.row - y.row) }
}

export const readImport = (format: ImportFormat, raw: Buffer): Promise<ReadResult> =>
  format === "csv" ? readCsv(raw) : readJson(raw)
