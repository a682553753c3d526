// India's National Customer Preference Register: importing the published file (numbers with the
// categories their owners still accept, or 0 for none), and looking a number up.
import type { Readable } from "node:stream"
import { type CsvLayout, inBatches, PHONE_HEADERS, readCsv } from "../phones/csv.js"
import { indianE164 } from "../phones/phone.js"
import type { Sql } from "../platform/Db.js"
import type { NcprRegistration } from "./ncpr.repo.js"
import * as repo from "./ncpr.repo.js"

export type { NcprRegistration } from "./ncpr.repo.js"

type NcprRole = "number" | "preference" | "op" | "date"

export const NCPR_LAYOUT: CsvLayout<NcprRole> = {
  key: "number",
  roles: {
    number: ["service_area_number", "subscriber_number", ...PHONE_HEADERS],
    preference: [
      "preference",
      "preferences",
      "pref",
      "prefs",
      "categories",
      "category",
      "preferred_categories",
      "pref_category",
      "ncpr_preference",
      "opted_categories",
    ],
    op: ["op", "optype", "op_type", "operation", "action", "activity"],
    date: [
      "date",
      "registered_at",
      "registration_date",
      "date_of_registration",
      "reg_date",
      "date_of_preference",
      "updated_at",
    ],
  },
  positional: ["number", "preference", "op", "date"],
}

export const NCPR_BATCH_SIZE = 1000

/**
 * A preference as the register writes it → our form: "0" (fully blocked), or the accepted
 * categories, ascending and comma-separated ("5#1#2", "1,2,5", "1|2 5" → "1,2,5"). A list with
 * 0 in it is "0". Empty (not given) is "0": a registration with no categories blocks everything.
 * Anything else → undefined.
 */
export function normalisePreference(raw: string | undefined): string | undefined {
  const text = (raw ?? "").trim()
  if (text === "") return "0"
  const tokens = text.split(/[\s#,|;/]+/).filter((t) => t !== "")
  if (tokens.length === 0 || !tokens.every((t) => /^\d{1,2}$/.test(t))) return undefined
  const categories = [...new Set(tokens.map(Number))].sort((a, b) => a - b)
  return categories.includes(0) ? "0" : categories.join(",")
}

/**
 * Whether a registration blocks a campaign of the given category (the workflow's rule-book
 * ncpr_category). audience.repo's merge applies the same rule in SQL.
 */
export function ncprBlocks(preference: string, category: number | string | null): boolean {
  if (preference === "0" || category === null) return true
  return !preference.split(",").includes(String(category))
}

function parseOp(raw: string | undefined): "add" | "delete" | undefined {
  const op = (raw ?? "").trim().toUpperCase()
  if (
    op === "" ||
    op === "A" ||
    op === "ADD" ||
    op === "I" ||
    op === "INSERT" ||
    op === "M" ||
    op === "U" ||
    op === "MODIFY" ||
    op === "UPDATE"
  )
    return "add"
  if (op === "D" || op === "DEL" || op === "DELETE") return "delete"
  return undefined
}

/** Dates as the register's files carry them: 2024-01-31 (with or without a time), 31-01-2024, 31/01/2024, 20240131. */
export function parseRegistryDate(raw: string | undefined): Date | null {
  const text = (raw ?? "").trim()
  if (text === "") return null
  let m = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?/.exec(text)
  if (m) return utc(m[1]!, m[2]!, m[3]!, m[4], m[5], m[6])
  m = /^(\d{2})[-/.](\d{2})[-/.](\d{4})(?: (\d{2}):(\d{2})(?::(\d{2}))?)?$/.exec(text)
  if (m) return utc(m[3]!, m[2]!, m[1]!, m[4], m[5], m[6])
  m = /^(\d{4})(\d{2})(\d{2})$/.exec(text)
  if (m) return utc(m[1]!, m[2]!, m[3]!)
  return null
}

function utc(y: string, mo: string, d: string, h = "0", mi = "0", s = "0"): Date | null {
  const date = new Date(Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s)))
  // Reject 31-02-2024 and friends rather than roll them into March.
  return date.getUTCMonth() === Number(mo) - 1 && date.getUTCDate() === Number(d) ? date : null
}

export interface NcprImportResult {
  /** Rows that added or refreshed a registration. */
  readonly imported: number
  /** Registrations removed: by delete rows, and with `replace`, every one the file did not list. */
  readonly deleted: number
  /** Rows that were not an Indian number, had an unreadable preference or operation. */
  readonly skipped: number
}

interface Change {
  readonly phone: string
  readonly op: "add" | "delete"
  readonly preference: string
  readonly registeredAt: Date | null
}

/**
 * Imports a registry file as it streams, in batches of upserts and deletes (each its own
 * statement, in file order; within a batch the last row of a number wins).
 *
 * `replace` makes the table exactly the file: every row the file adds is stamped with this
 * import's start time, and once the whole file is in, rows with an older stamp are deleted in
 * one statement. Until that last step the old registrations stay, so a failed import never
 * leaves the table emptier than it was; readers never see it empty either.
 * Throws CsvFormatError for a file with no number column or unreadable CSV.
 */
export async function importNcpr(
  sql: Sql,
  input: Readable | AsyncIterable<Buffer | string>,
  opts: { replace?: boolean } = {},
): Promise<NcprImportResult> {
  const stamp = await repo.databaseNow(sql)
  let imported = 0
  let deleted = 0
  let skipped = 0
  async function* changes(): AsyncGenerator<Change> {
    for await (const row of readCsv(input, NCPR_LAYOUT)) {
      const phone = indianE164(row.cells.number ?? "")
      const op = parseOp(row.cells.op)
      const preference = normalisePreference(row.cells.preference)
      if (phone === undefined || op === undefined || (op === "add" && preference === undefined)) {
        skipped++
        continue
      }
      yield { phone, op, preference: preference ?? "0", registeredAt: parseRegistryDate(row.cells.date) }
    }
  }
  for await (const batch of inBatches(changes(), NCPR_BATCH_SIZE)) {
    const last = new Map<string, Change>()
    for (const c of batch) {
      if (c.op === "add") imported++
      last.delete(c.phone) // re-insert so the map's order is the order of each number's last row
      last.set(c.phone, c)
    }
    const adds = [...last.values()].filter((c) => c.op === "add")
    const deletes = [...last.values()].filter((c) => c.op === "delete").map((c) => c.phone)
    if (adds.length > 0) await repo.upsertRegistrations(sql, adds, stamp)
    if (deletes.length > 0) deleted += await repo.deleteRegistrations(sql, deletes)
  }
  if (opts.replace) deleted += await repo.deleteImportedBefore(sql, stamp)
  return { imported, deleted, skipped }
}

/** The registration of an E.164 number, if the register lists it (only +91 numbers can be). */
export async function lookupNcpr(sql: Sql, e164: string): Promise<NcprRegistration | undefined> {
  if (!e164.startsWith("+91")) return undefined
  return repo.findRegistration(sql, e164)
}
