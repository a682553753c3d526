// How a data-subject erase finds a contact in a table's columns and scrubs it out: the SQL each
// table's repository applies to its own rows in its part of the erase (src/dsr/erase.repo.ts runs
// the parts in one transaction), so every table matches the phone or email the same way.
import type { PendingQuery, Row } from "postgres"
import type { Tx } from "../platform/Db.js"
import type { ContactKind } from "./erased-contacts.repo.js"

type Fragment = PendingQuery<Row[]>

/** The contact an erase removes from one workspace. */
export interface EraseTarget {
  readonly tenantId: number
  readonly kind: ContactKind
  /** E.164 phone or lower-cased email. */
  readonly identifier: string
  /** Lower-case strings a stored copy reduces to (phone: digit forms, see src/dsr/identifier.ts; email: itself). */
  readonly forms: readonly string[]
  /** `erased:<hash>`: what kept rows hold instead. */
  readonly marker: string
}

/**
 * The contact, with the conditions and rewrites of a column that name it. Columns are named by the
 * repository that owns them, never taken from a request.
 */
export interface ContactMatch extends EraseTarget {
  /** The column's text mentions the contact (the phone in any stored form, the email in any case). */
  readonly mentions: (column: string) => Fragment
  /** The column's text with every mention of the contact replaced by the marker. */
  readonly scrub: (column: string) => Fragment
  /** A JSONB object holds the phone as a value in any format (spaces, dashes, national): its digits. */
  readonly holds: (column: string) => Fragment
}

const reEscape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** The contact's match in the erase's transaction. */
export function contactMatch(tx: Tx, t: EraseTarget): ContactMatch {
  const forms = t.forms.length > 0 ? t.forms : [t.identifier]
  const alternatives = forms.map(reEscape).join("|")
  const pattern = t.kind === "phone" ? `(?<![0-9])\\+?(${alternatives})(?![0-9])` : `(${alternatives})`
  const mentions = (col: string) =>
    tx`lower(${tx.unsafe(col)}::text) ~ ${t.kind === "phone" ? `(?<![0-9])(${alternatives})(?![0-9])` : alternatives}`
  const scrub = (col: string) => tx`regexp_replace(${tx.unsafe(col)}::text, ${pattern}, ${t.marker}, 'gi')`
  const holds = (col: string) =>
    t.kind === "email"
      ? mentions(col)
      : tx`(${mentions(col)} or exists (
          select 1 from jsonb_each_text(case when jsonb_typeof(${tx.unsafe(col)}) = 'object'
            then ${tx.unsafe(col)} else '{}' end) f
          where regexp_replace(f.value, '[^0-9]', '', 'g') = any(${tx.array([...forms])}::text[])))`
  return { ...t, mentions, scrub, holds }
}
