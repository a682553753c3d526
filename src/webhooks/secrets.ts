// Webhook signing secrets: their format, and their keeping at rest in the secret store
// (src/platform/secret-store.ts) as `w1:` envelopes bound to the tenant. Unlike provider
// credentials, webhooks must work with no CREDENTIALS_MASTER_KEY, so the key falls back to one
// kept in the database.
import { randomBytes } from "node:crypto"
import type { Config } from "../platform/config.js"
import type { Sql } from "../platform/Db.js"
import { type SecretBox as Box, decodeMasterKey, deriveKey, secretBox, systemSecret } from "../platform/secret-store.js"

const VERSION = "w1"
const HKDF_INFO = "parley/webhook-secrets"
// The system_secrets row used when no master key is configured: shared by every process.
const STORED_KEY_NAME = "webhook_secret_key"

/** `whsec_` + base64url of 32 random bytes: shown to the user on create and on rotate only. */
export const newWebhookSecret = (): string => `whsec_${randomBytes(32).toString("base64url")}`

/** `seal` gives `w1:` + base64(nonce ‖ ciphertext ‖ tag), bound to the tenant id. */
export type SecretBox = Box<number>

export class WebhookSecretDecryptError extends Error {
  override readonly name = "WebhookSecretDecryptError"
}

// A ciphertext copied to another workspace's row no longer opens.
const aad = (tenantId: number): Buffer => {
  const head = Buffer.alloc(8)
  head.writeBigUInt64BE(BigInt(tenantId), 0)
  return Buffer.concat([Buffer.from(`parley/webhook-secret/${VERSION}\0`), head])
}

const REFUSALS = {
  version: "unknown webhook secret envelope version",
  truncated: "webhook secret envelope is truncated",
  authentication: "webhook secret failed authentication (altered, moved, or another key)",
} as const

/** The box webhook secrets are sealed in under `key` (webhookSecretKey). */
export function webhookSecretBox(key: Buffer): SecretBox {
  return secretBox<number>({
    key,
    version: VERSION,
    aad,
    refuse: (why) => new WebhookSecretDecryptError(REFUSALS[why]),
  })
}

/**
 * The key webhook secrets are sealed with: derived (HKDF, its own purpose) from
 * CREDENTIALS_MASTER_KEY when configured, otherwise from a random value generated once per
 * deployment and kept in the database (as the JWT key is). The master key is never used directly,
 * so a webhook ciphertext can never be confused with a provider-credential one made under it.
 */
export async function webhookSecretKey(config: Config, sql: Sql): Promise<Buffer> {
  if (config.credentialsMasterKey !== undefined)
    return deriveKey(decodeMasterKey(config.credentialsMasterKey), HKDF_INFO)
  return deriveKey(Buffer.from(await systemSecret(sql, STORED_KEY_NAME), "base64url"), HKDF_INFO)
}
