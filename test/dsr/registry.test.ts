// The registry of contact-bearing tables (src/dsr/contact-tables.ts) against the migrations: every
// column that looks like a phone or an email (phone, phone_e164, target_phone, email, to_email,
// from_e164, …) must be registered or listed as excluded with a reason, so a new table that holds
// contacts cannot be missed by the export and the erase.
import { describe, expect, it } from "vitest"
import { CONTACT_TABLES, EXCLUDED } from "../../src/dsr/contact-tables.js"
import { allMigrations, columnsOf, unregistered } from "./migration-columns.js"

describe("contact-bearing tables registry", () => {
  it("registers (or excludes with a reason) every phone/email column of every migration", () => {
    expect(unregistered(columnsOf(allMigrations()))).toEqual([])
  })

  it("names only tables and columns that exist", () => {
    const tables = columnsOf(allMigrations())
    for (const t of CONTACT_TABLES) {
      expect(tables.has(t.table), t.table).toBe(true)
      for (const c of [...t.columns.map((c) => c.name), ...t.freeText])
        expect(tables.get(t.table)?.has(c), `${t.table}.${c}`).toBe(true)
    }
    for (const t of EXCLUDED) {
      expect(tables.has(t.table), t.table).toBe(true)
      for (const c of t.columns) expect(tables.get(t.table)?.has(c), `${t.table}.${c}`).toBe(true)
    }
  })

  it("fails for a migration that adds a phone or email column nobody registered", () => {
    const extra = columnsOf(`
      create table callbacks (id bigint primary key, tenant_id bigint, callback_phone text not null, note text);
      alter table calls add column forwarded_to_e164 text, add column contact_email text;`)
    expect(unregistered(extra)).toEqual(["callbacks.callback_phone", "calls.contact_email", "calls.forwarded_to_e164"])
  })

  it("gives every entry an erase action, a retention and a note, and every exclusion a reason", () => {
    const names = CONTACT_TABLES.map((t) => t.table)
    expect(new Set(names).size).toBe(names.length)
    for (const t of CONTACT_TABLES) {
      expect(t.finders.length, t.table).toBeGreaterThan(0)
      expect(t.retention.length, t.table).toBeGreaterThan(0)
      expect(t.note.length, t.table).toBeGreaterThan(0)
    }
    for (const t of EXCLUDED) expect(t.why.length, t.table).toBeGreaterThan(10)
  })
})
