// Secrets a deployment generates for itself when the operator configured none (the JWT key, the
// ALTCHA key): created once, stored in the database, and so shared by every process.
import { randomBytes } from "node:crypto"
import type { Sql } from "../platform/Db.js"

/** The named secret, created on first use; concurrent first uses agree on one value. */
export async function systemSecret(sql: Sql, name: string): Promise<string> {
  const candidate = randomBytes(48).toString("base64url")
  await sql`insert into system_secrets (name, value) values (${name}, ${candidate}) on conflict (name) do nothing`
  const [row] = await sql<[{ value: string }]>`select value from system_secrets where name = ${name}`
  return row.value
}
