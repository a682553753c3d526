// The columns of every table as the migrations create them (create table / alter table … add
// column), and which phone/email-looking columns the contact-tables registry does not cover.
// Shared by test/dsr/registry.test.ts (and any test that walks the registry against the schema).
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { CONTACT_TABLES, EXCLUDED, IDENTIFIER_COLUMN } from "../../src/dsr/contact-tables.js"

const MIGRATIONS = join(import.meta.dirname, "..", "..", "migrations")

/** Every migration's text, in order. */
export const allMigrations = (): string =>
  readdirSync(MIGRATIONS)
    .filter((f) => f.endsWith(".sql"))
    .sort()
    .map((f) => readFileSync(join(MIGRATIONS, f), "utf8"))
    .join("\n;\n")

/** table → its columns, from create table / alter table … add column statements. */
export function columnsOf(sqlText: string): Map<string, Set<string>> {
  const text = sqlText.replace(/--[^\n]*/g, "")
  const out = new Map<string, Set<string>>()
  const add = (table: string, column: string) => {
    const set = out.get(table) ?? new Set<string>()
    set.add(column)
    out.set(table, set)
  }
  for (const m of text.matchAll(/create\s+(?:unlogged\s+)?table\s+(?:if\s+not\s+exists\s+)?(\w+)\s*\(/gi)) {
    // The body: up to the parenthesis that closes the one after the table name.
    let depth = 1
    let i = (m.index ?? 0) + m[0].length
    const start = i
    for (; i < text.length && depth > 0; i++) {
      if (text[i] === "(") depth++
      else if (text[i] === ")") depth--
    }
    const body = text.slice(start, i - 1)
    let part = ""
    depth = 0
    const parts: string[] = []
    for (const ch of body) {
      if (ch === "(") depth++
      if (ch === ")") depth--
      if (ch === "," && depth === 0) {
        parts.push(part)
        part = ""
      } else part += ch
    }
    parts.push(part)
    for (const p of parts) {
      const col = /^\s*"?(\w+)"?\s+/.exec(p)?.[1]
      if (col && !/^(primary|unique|check|constraint|foreign|exclude)$/i.test(col)) add(m[1]!.toLowerCase(), col)
    }
  }
  for (const m of text.matchAll(/alter\s+table\s+(?:only\s+)?(\w+)([^;]*);/gi))
    for (const c of m[2]!.matchAll(/add\s+column\s+(?:if\s+not\s+exists\s+)?"?(\w+)"?/gi))
      add(m[1]!.toLowerCase(), c[1]!.toLowerCase())
  return out
}

/** "table.column" of every identifier-looking column neither registered nor excluded. */
export function unregistered(tables: Map<string, Set<string>>): string[] {
  const known = new Set([
    ...CONTACT_TABLES.flatMap((t) => t.columns.map((c) => `${t.table}.${c.name}`)),
    ...EXCLUDED.flatMap((t) => t.columns.map((c) => `${t.table}.${c}`)),
  ])
  const missing: string[] = []
  for (const [table, cols] of tables)
    for (const c of cols) if (IDENTIFIER_COLUMN.test(c) && !known.has(`${table}.${c}`)) missing.push(`${table}.${c}`)
  return missing.sort()
}
