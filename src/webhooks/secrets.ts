// Webhook signing secrets: their format, and their encryption at rest. Unlike provider credentials,
// webhooks must work with no CREDENTIALS_MASTER_KEY, so the key falls back to one kept in the database.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto"
import { systemSecret } from "../auth/secrets.js"
import type { Config } from "../platform/config.js"
import type { Sql } from "../platform/Db.js"

const VERSION = "w1"
const NONCE_BYTES = 12
const TAG_BYTES = 16
const KEY_BYTES = 32
const HKDF_INFO = "parley/webhook-secrets"
// The system_secrets row used when no master key is configured: shared by every process.
const STORED_KEY_NAME = "webhook_secret_key"

/** `whsec_` + base64url of 32 random bytes: shown to the user on create and on rotate only. */
export const newWebhookSecret = (): string => `whsec_${randomBytes(32).toString("base64url")}`

export interface SecretBox {
  /** `w1:` + base64(nonce ‖ ciphertext ‖ tag), bound to the tenant. */
  seal(secret: string, tenantId: number): string
  /** The secret; throws when the envelope was altered, copied to another tenant or made under another key. */
  open(ciphertext: string, tenantId: number): string
}

export class WebhookSecretDecryptError extends Error {
  override readonly name = "WebhookSecretDecryptError"
}

// A ciphertext copied to another workspace's row no longer opens.
const aad = (tenantId: number): Buffer => {
  const head = Buffer.alloc(8)
  head.writeBigUInt64BE(BigInt(tenantId), 0)
  return Buffer.concat([Buffer.from(`parley/webhook-secret/${VERSION}\0`), head])
}

/** AES-256-GCM with a fresh 96-bit nonce per value and the tenant id as additional authenticated data. */
export function webhookSecretBox(key: Buffer): SecretBox {
  if (key.length !== KEY_BYTES) throw new Error(`the webhook secret key must be ${KEY_BYTES} bytes`)
  return {
    seal(secret, tenantId) {
      const nonce = randomBytes(NONCE_BYTES)
      const cipher = createCipheriv("aes-256-gcm", key, nonce, { authTagLength: TAG_BYTES })
      cipher.setAAD(aad(tenantId))
      const body = Buffer.concat([cipher.update(secret, "utf8"), cipher.final()])
      return `${VERSION}:${Buffer.concat([nonce, body, cipher.getAuthTag()]).toString("base64")}`
    },
    open(ciphertext, tenantId) {
      const sep = ciphertext.indexOf(":")
      if (sep < 0 || ciphertext.slice(0, sep) !== VERSION)
        throw new WebhookSecretDecryptError("unknown webhook secret envelope version")
      const raw = Buffer.from(ciphertext.slice(sep + 1), "base64")
      if (raw.length < NONCE_BYTES + TAG_BYTES)
        throw new WebhookSecretDecryptError("webhook secret envelope is truncated")
      const nonce = raw.subarray(0, NONCE_BYTES)
      const tag = raw.subarray(raw.length - TAG_BYTES)
      const body = raw.subarray(NONCE_BYTES, raw.length - TAG_BYTES)
      try {
        const decipher = createDecipheriv("aes-256-gcm", key, nonce, { authTagLength: TAG_BYTES })
        decipher.setAAD(aad(tenantId))
        decipher.setAuthTag(tag)
        return Buffer.concat([decipher.update(body), decipher.final()]).toString("utf8")
      } catch {
        throw new WebhookSecretDecryptError("webhook secret failed authentication (altered, moved, or another key)")
      }
    },
  }
}

// HKDF with its own info string: the master key is never used directly, so a webhook ciphertext
// can never be confused with a provider-credential one made under the same master key.
const derive = (ikm: Buffer): Buffer => Buffer.from(hkdfSync("sha256", ikm, Buffer.alloc(0), HKDF_INFO, KEY_BYTES))

/**
 * The key webhook secrets are sealed with: derived from CREDENTIALS_MASTER_KEY when configured,
 * otherwise from a random value generated once per deployment and kept in the database (as the
 * JWT key is), so the embedded default works with no environment at all.
 */
export async function webhookSecretKey(config: Config, sql: Sql): Promise<Buffer> {
  if (config.credentialsMasterKey !== undefined)
    return derive(Buffer.from(config.credentialsMasterKey.trim(), "base64"))
  return derive(Buffer.from(await systemSecret(sql, STORED_KEY_NAME), "base64url"))
}
