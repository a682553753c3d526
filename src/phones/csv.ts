// Streaming CSV of phone numbers with a header or without: csv-parse reads the bytes as they
// arrive; the first record decides which column plays which role (phone, name, reason, …).
import { pipeline, type Readable } from "node:stream"
import { CsvError, type InfoRecord, type Options, parse } from "csv-parse"

/** Which columns play which role, for one kind of file (audience, DNC import, registry). */
export interface CsvLayout<R extends string> {
  /** The role every file must have a column for (the phone number). */
  readonly key: R
  /**
   * Header names that give a column each role, in order of preference, as `headerKey` writes
   * them (lower case, runs of other characters as one "_"): "Phone Number" → phone_number.
   */
  readonly roles: Readonly<Record<R, ReadonlyArray<string>>>
  /** Without a header, the roles of the first columns, in order; later columns are col_3, col_4, …. */
  readonly positional: ReadonlyArray<R>
}

export interface CsvRow<R extends string> {
  /** The line of the file the record starts on (1-based; a header is line 1). */
  readonly line: number
  /** The cell of each role the file has a column for. */
  readonly cells: Partial<Record<R, string>>
  /** Every other non-empty cell, by its header name (col_N past the header or without one). */
  readonly extra: Record<string, string>
}

/** The file is not CSV we can read (no phone column, an unclosed quote, a runaway record). */
export class CsvFormatError extends Error {
  override readonly name = "CsvFormatError"
}

export const headerKey = (cell: string): string =>
  cell
    .normalize("NFKC")
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, "_")
    .replace(/^_+|_+$/g, "")

/** Header names that mark the phone column in every layout. */
export const PHONE_HEADERS = [
  "phone_e164",
  "e164",
  "phone",
  "phone_number",
  "phonenumber",
  "phone_no",
  "mobile",
  "mobile_number",
  "mobile_no",
  "mobile_phone",
  "cell",
  "cell_phone",
  "cellphone",
  "msisdn",
  "number",
  "tel",
  "telephone",
  "telephone_number",
  "whatsapp",
  "whatsapp_number",
  "contact",
  "contact_number",
  "contact_no",
] as const

/** csv-parse options shared by every reader here (and by bench/audience.ts's baseline). */
export const CSV_OPTIONS = {
  bom: true,
  trim: true,
  skip_empty_lines: true,
  relax_column_count: true,
  // An unescaped quote inside an unquoted field is taken literally rather than refused.
  relax_quotes: true,
  // Bounds memory: an unclosed quote would otherwise swallow the rest of the file into one field.
  max_record_size: 64 * 1024,
} as const

interface Located {
  readonly record: string[]
  readonly line: number
}

interface Plan<R extends string> {
  readonly roleAt: ReadonlyMap<number, R>
  readonly names: ReadonlyArray<string | undefined>
}

const hasDigit = (s: string) => /\d/.test(s)

/**
 * Decides from the first record whether it is a header. It is one when a cell names the key
 * role; a first record with no digit anywhere is taken as a header too, and then the file has
 * no key column (CsvFormatError), rather than a first row of unreadable phone numbers.
 */
function planFor<R extends string>(first: string[], layout: CsvLayout<R>): { plan: Plan<R>; header: boolean } {
  const keys = first.map(headerKey)
  const keyAliases = new Set<string>(layout.roles[layout.key])
  const isHeader = keys.some((k) => keyAliases.has(k))
  if (!isHeader) {
    if (!first.some(hasDigit) && first.some((c) => c !== ""))
      throw new CsvFormatError(
        `no ${layout.key} column: the header (${first
          .slice(0, 8)
          .map((c) => JSON.stringify(c))
          .join(", ")}) names none; ` +
          `call it one of ${layout.roles[layout.key].slice(0, 6).join(", ")}, … ` +
          `or leave out the header and put the ${layout.key} first`,
      )
    return { plan: { roleAt: new Map(layout.positional.map((r, i) => [i, r])), names: [] }, header: false }
  }
  const roleAt = new Map<number, R>()
  const taken = new Set<number>()
  // The key role first, then the others; within a role, its names in order of preference.
  const roles = [layout.key, ...(Object.keys(layout.roles) as R[]).filter((r) => r !== layout.key)]
  for (const role of roles) {
    for (const alias of layout.roles[role]) {
      const i = keys.findIndex((k, j) => k === alias && !taken.has(j))
      if (i >= 0) {
        roleAt.set(i, role)
        taken.add(i)
        break
      }
    }
  }
  const seen = new Map<string, number>()
  const names = first.map(withoutNul).map((cell, i) => {
    if (roleAt.has(i) || cell === "") return undefined
    const n = (seen.get(cell) ?? 0) + 1
    seen.set(cell, n)
    return n === 1 ? cell : `${cell}_${n}`
  })
  return { plan: { roleAt, names }, header: true }
}

/** Text without NUL characters, which Postgres text and jsonb refuse (binary files carry them). */
export const withoutNul = (s: string): string => (s.includes("\0") ? s.replaceAll("\0", "") : s)

function rowOf<R extends string>(located: Located, plan: Plan<R>): CsvRow<R> {
  const cells: Partial<Record<R, string>> = {}
  const extra: Record<string, string> = {}
  const { record } = located
  for (let i = 0; i < record.length; i++) {
    const value = withoutNul(record[i]!)
    const role = plan.roleAt.get(i)
    if (role !== undefined) cells[role] = value
    else if (value !== "") extra[plan.names[i] ?? `col_${i + 1}`] = value
  }
  return { line: located.line, cells, extra }
}

/**
 * The records of a CSV byte stream, one at a time, as the bytes arrive: a caller that awaits
 * between records holds the source back (backpressure reaches the socket). Blank lines and
 * records whose cells are all empty are skipped. A failure of the source (an upload past its
 * limit, a client gone) is thrown as it is; unreadable CSV is a CsvFormatError.
 * An empty file, or one with only blank lines, has no key column either (CsvFormatError).
 */
export async function* readCsv<R extends string>(
  input: Readable | AsyncIterable<Buffer | string>,
  layout: CsvLayout<R>,
): AsyncGenerator<CsvRow<R>> {
  // Where each record starts: one line past where the last one ended, plus the blank lines skipped.
  let lastEnd = 0
  let lastEmpty = 0
  const options: Options<Located, string[]> = {
    ...CSV_OPTIONS,
    on_record: (record: string[], info: InfoRecord): Located => {
      const line = lastEnd + 1 + (info.empty_lines - lastEmpty)
      lastEnd = info.lines
      lastEmpty = info.empty_lines
      return { record, line }
    },
  }
  // The typings tie on_record to `columns`; without columns it is the same call.
  const parser = parse(options as unknown as Options)
  pipeline(input, parser, () => {})
  let plan: Plan<R> | undefined
  try {
    for await (const located of parser as AsyncIterable<Located>) {
      if (located.record.every((c) => c === "")) continue
      if (plan === undefined) {
        const first = planFor(located.record, layout)
        plan = first.plan
        if (first.header) continue
      }
      yield rowOf(located, plan)
    }
  } catch (e) {
    if (e instanceof CsvError) throw new CsvFormatError(`the file is not readable CSV: ${e.message}`)
    throw e
  }
  if (plan === undefined) throw new CsvFormatError(`the file is empty: it needs a ${layout.key} column`)
}

/** Groups a sequence into arrays of at most `size`, the last one possibly shorter. */
export async function* inBatches<T>(items: AsyncIterable<T> | Iterable<T>, size: number): AsyncGenerator<T[]> {
  let batch: T[] = []
  for await (const item of items) {
    batch.push(item)
    if (batch.length >= size) {
      yield batch
      batch = []
    }
  }
  if (batch.length > 0) yield batch
}
