// SQL for the National Customer Preference Register: one row per registered number with its
// accepted categories and the import that last wrote it.
import type { Sql } from "../platform/Db.js"

export interface NcprRegistration {
  readonly phone_e164: string
  readonly preference: string
  readonly registered_at: Date | null
}

export interface NcprAdd {
  readonly phone: string
  readonly preference: string
  readonly registeredAt: Date | null
}

/** The database's clock at this moment: the stamp an import puts on every row it writes. */
export const databaseNow = async (sql: Sql): Promise<Date> => {
  const [{ stamp }] = await sql<[{ stamp: Date }]>`select clock_timestamp() as stamp`
  return stamp
}

/** Upserts registrations in one statement; an add without a date keeps the known one. */
export const upsertRegistrations = async (sql: Sql, adds: readonly NcprAdd[], stamp: Date): Promise<void> => {
  await sql`
    insert into ncpr_registry (phone_e164, preference, registered_at, imported_at)
    select p, pref, reg, ${stamp}
    from unnest(
      ${sql.array(
        adds.map((c) => c.phone),
        25,
      )}::text[],
      ${sql.array(
        adds.map((c) => c.preference),
        25,
      )}::text[],
      ${sql.array(
        adds.map((c) => (c.registeredAt === null ? null : c.registeredAt.toISOString())),
        25,
      )}::timestamptz[]
    ) as t(p, pref, reg)
    on conflict (phone_e164) do update set
      preference = excluded.preference,
      registered_at = coalesce(excluded.registered_at, ncpr_registry.registered_at),
      imported_at = excluded.imported_at`
}

/** Deletes the numbers' registrations; returns how many there were. */
export const deleteRegistrations = async (sql: Sql, phones: string[]): Promise<number> => {
  const gone =
    await sql`delete from ncpr_registry where phone_e164 = any (${sql.array(phones, 25)}::text[]) returning 1`
  return gone.count
}

/** Deletes the registrations no import since `stamp` wrote; returns how many. */
export const deleteImportedBefore = async (sql: Sql, stamp: Date): Promise<number> => {
  const swept = await sql`delete from ncpr_registry where imported_at < ${stamp}`
  return swept.count
}

export const findRegistration = async (sql: Sql, e164: string): Promise<NcprRegistration | undefined> => {
  const [row] = await sql<
    [NcprRegistration?]
  >`select phone_e164, preference, registered_at from ncpr_registry where phone_e164 = ${e164}`
  return row
}
