// The tenant's do-not-call list: list, add (idempotent), remove, import (CSV stream or JSON), and
// the check of one number against everything that keeps it from being dialled.
import type { Readable } from "node:stream"
import { Effect } from "effect"
import { isErasedIdentifier } from "../erasure/suppression.js"
import { CsvFormatError, type CsvLayout, inBatches, PHONE_HEADERS, readCsv, withoutNul } from "../phones/csv.js"
import { e164Candidates, isIndian, type TenantCountry, toE164 } from "../phones/phone.js"
import { Clock } from "../platform/Clock.js"
import { Db, type Sql } from "../platform/Db.js"
import { type DomainError, NotFound, ValidationFailed } from "../platform/errors.js"
import { tenantCountry } from "../workspaces/workspaces.repo.js"
import type { DncRow, DncSource } from "./dnc.repo.js"
import * as repo from "./dnc.repo.js"
import { lookupNcpr } from "./ncpr.import.js"

/** The cool-down: a number the tenant reached less than this long ago is not dialled again. */
export const COOLDOWN_DAYS = 7
export const COOLDOWN_MS = COOLDOWN_DAYS * 86_400_000
export const REASON_MAX = 200
const IMPORT_BATCH_SIZE = 1000

export const DNC_SOURCES = [
  "manual",
  "import",
  "call",
  "unsubscribe",
  "erasure",
] as const satisfies ReadonlyArray<DncSource>

export const DNC_LAYOUT: CsvLayout<"phone" | "reason"> = {
  key: "phone",
  roles: {
    phone: PHONE_HEADERS,
    reason: ["reason", "note", "notes", "comment", "comments", "remark", "remarks", "description"],
  },
  positional: ["phone", "reason"],
}

export interface DncEntry {
  readonly id: number
  readonly phone_e164: string
  readonly reason: string | null
  readonly source: DncSource
  readonly added_at: string
}

const view = (r: DncRow): DncEntry => ({
  id: r.id,
  phone_e164: r.phone_e164,
  reason: r.reason,
  source: r.source,
  added_at: r.added_at.toISOString(),
})

const invalidPhone = (field: string, reason: string) =>
  new ValidationFailed({
    message: `${field}: not a valid phone number (${reason})`,
    errors: [{ field, message: `must be a valid phone number (${reason})` }],
  })

/** A number as the tenant typed it → E.164 in the tenant's country, or 422 on `field`. */
const normalised = (sql: Sql, tenantId: number, raw: string, field: string) =>
  Effect.gen(function* () {
    const country = yield* Effect.promise(() => tenantCountry(sql, tenantId))
    const phone = toE164(raw, country)
    if (!phone.ok) return yield* Effect.fail(invalidPhone(field, phone.reason))
    return phone.e164
  })

export const listDnc = (tenantId: number, page: { limit: number; offset: number; source: DncSource | undefined }) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const { rows, total } = yield* Effect.promise(() => repo.list(sql, tenantId, page))
    return { entries: rows.map(view), total, limit: page.limit, offset: page.offset }
  })

export const addDnc = (tenantId: number, raw: string, reason: string | null, source: DncSource = "manual") =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const phone = yield* normalised(sql, tenantId, raw, "phone_e164")
    const row = yield* Effect.promise(() =>
      repo.upsert(sql, {
        tenantId,
        phone,
        reason: reason === null ? null : withoutNul(reason),
        source,
        now: clock.now(),
      }),
    )
    return { entry: view(row) }
  })

/** Removes a number, given with its + (encoded or not) or without it; 404 when it is not listed. */
export const removeDnc = (tenantId: number, raw: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const country = yield* Effect.promise(() => tenantCountry(sql, tenantId))
    const candidates = e164Candidates(raw, country)
    if (candidates.length === 0) {
      const r = toE164(raw, country)
      return yield* Effect.fail(invalidPhone("phone_e164", r.ok ? "invalid_number" : r.reason))
    }
    const deleted = yield* Effect.promise(() => repo.removeFirst(sql, tenantId, candidates))
    if (deleted === undefined)
      return yield* Effect.fail(new NotFound({ message: `${candidates[0]} is not on the do-not-call list` }))
    return { deleted: true as const, phone_e164: deleted }
  })

/**
 * Whether a number would be kept out of an audience. The registry has no campaign here to
 * weigh categories against, so any registration counts (as for a workflow without an
 * ncpr_category).
 */
export const checkDnc = (tenantId: number, raw: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const phone = yield* normalised(sql, tenantId, raw, "phone_e164")
    const since = new Date(clock.nowMs() - COOLDOWN_MS)
    const [{ on_dnc, in_cooldown }, registration, erased] = yield* Effect.promise(() =>
      Promise.all([
        repo.suppression(sql, tenantId, phone, since),
        isIndian(phone) ? lookupNcpr(sql, phone) : Promise.resolve(undefined),
        isErasedIdentifier(sql, tenantId, "phone", phone),
      ]),
    )
    const on_ncpr = registration !== undefined
    return {
      phone_e164: phone,
      on_dnc,
      on_ncpr,
      in_cooldown,
      // a data subject erased from the workspace (POST /dsr/erase): suppressed for good
      erased,
      would_be_filtered: on_dnc || on_ncpr || in_cooldown || erased,
    }
  })

export interface ImportRow {
  readonly phone: string | number
  readonly reason: string | null
}

export type DncImportSource =
  | { readonly kind: "json"; readonly rows: ReadonlyArray<ImportRow> }
  | { readonly kind: "csv"; readonly open: () => Promise<Readable | AsyncIterable<Buffer | string> | undefined> }

export interface DncImportResult {
  readonly added: number
  readonly skipped_existing: number
  readonly skipped_invalid: number
}

type Imported =
  | { readonly ok: true; readonly result: DncImportResult }
  | { readonly ok: false; readonly error: DomainError }

const fileError = (message: string) => new ValidationFailed({ message, errors: [{ field: "file", message }] })

async function importRows(
  sql: Sql,
  tenantId: number,
  country: TenantCountry,
  rows: AsyncIterable<ImportRow> | Iterable<ImportRow>,
  now: Date,
): Promise<DncImportResult> {
  let added = 0
  let existing = 0
  let invalid = 0
  async function* valid(): AsyncGenerator<{ phone: string; reason: string | null }> {
    for await (const r of rows) {
      const phone = toE164(r.phone, country)
      if (!phone.ok) invalid++
      else
        yield {
          phone: phone.e164,
          reason: r.reason === null || r.reason === "" ? null : withoutNul(r.reason).slice(0, REASON_MAX),
        }
    }
  }
  for await (const batch of inBatches(valid(), IMPORT_BATCH_SIZE)) {
    const n = await repo.addMissing(sql, { tenantId, rows: batch, source: "import", now })
    added += n
    // A number already listed, or listed earlier in this file, is "existing".
    existing += batch.length - n
  }
  return { added, skipped_existing: existing, skipped_invalid: invalid }
}

/**
 * Adds many numbers (source import); numbers already listed keep their entry. Batches are
 * committed as they are read: an import that fails half-way keeps what it added (a longer
 * list only suppresses more), and sending it again adds the rest.
 */
export const importDnc = (
  tenantId: number,
  source: DncImportSource,
  run: <A>(work: () => Promise<A>) => Effect.Effect<A, DomainError>,
) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const country = yield* Effect.promise(() => tenantCountry(sql, tenantId))
    const done = yield* run(async (): Promise<Imported> => {
      if (source.kind === "json")
        return { ok: true, result: await importRows(sql, tenantId, country, source.rows, clock.now()) }
      const input = await source.open()
      if (input === undefined)
        return { ok: false, error: fileError("the form has no file part: send the CSV as a file") }
      async function* rows(): AsyncGenerator<ImportRow> {
        for await (const r of readCsv(input!, DNC_LAYOUT))
          yield { phone: r.cells.phone ?? "", reason: r.cells.reason ?? null }
      }
      try {
        return { ok: true, result: await importRows(sql, tenantId, country, rows(), clock.now()) }
      } catch (e) {
        if (e instanceof CsvFormatError) return { ok: false, error: fileError(e.message) }
        throw e
      }
    })
    if (!done.ok) return yield* Effect.fail(done.error)
    return done.result
  })
