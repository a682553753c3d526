// SQL of system_secrets: the values a deployment generates for itself once (see systemSecret in
// secret-store.ts), shared by every process through the database.
import type { Sql } from "./Db.js"

/** Stores `candidate` under `name` unless one is there, and returns the stored value. */
export const systemSecretOr = async (sql: Sql, name: string, candidate: string): Promise<string> => {
  await sql`insert into system_secrets (name, value) values (${name}, ${candidate}) on conflict (name) do nothing`
  const [row] = await sql<[{ value: string }]>`select value from system_secrets where name = ${name}`
  return row.value
}
