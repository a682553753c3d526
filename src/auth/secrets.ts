// Secrets a deployment generates for itself when the operator configured none (the JWT key, the
// ALTCHA key): created once, stored in the database, and so shared by every process.
import { randomBytes } from "node:crypto"
import type { Sql } from "../platform/Db.js"
import { systemSecretOr } from "./credentials.repo.js"

/** The named secret, created on first use; concurrent first uses agree on one value. */
export async function systemSecret(sql: Sql, name: string): Promise<string> {
  return systemSecretOr(sql, name, randomBytes(48).toString("base64url"))
}
