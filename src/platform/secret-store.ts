// The secret store: how secrets are kept at rest, one mechanism for every kind of them. A value is
// sealed with AES-256-GCM under a 32-byte key, a fresh random 96-bit nonce each time, and
// additional authenticated data that binds it to its row (a ciphertext copied elsewhere no longer
// opens); stored as `<version>:` + base64(nonce ‖ ciphertext ‖ 16-byte tag). The keys come from
// CREDENTIALS_MASTER_KEY (used as is, or through HKDF with a purpose of its own) or from a random
// value generated once per deployment and kept in the database (systemSecret), so the embedded
// default works with no environment at all. Its users: provider credentials
// (src/onboarding/credentials.crypto.ts, `v1:`), webhook signing secrets (src/webhooks/secrets.ts,
// `w1:`), and sealed idempotent answers (raw bytes, under a key only the client holds).
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto"
import { isBase64Key } from "./config.js"
import type { Sql } from "./Db.js"
import { systemSecretOr } from "./system-secrets.repo.js"

export const KEY_BYTES = 32
const NONCE_BYTES = 12
const TAG_BYTES = 16

/** Decodes a base64 master key; throws unless it is exactly 32 bytes of canonical base64. */
export function decodeMasterKey(base64: string): Buffer {
  if (!isBase64Key(base64, KEY_BYTES)) throw new Error(`the master key must be ${KEY_BYTES} bytes encoded in base64`)
  return Buffer.from(base64.trim(), "base64")
}

/** true when `base64` is a usable master key. */
export function isMasterKey(base64: string): boolean {
  try {
    decodeMasterKey(base64)
    return true
  } catch {
    return false
  }
}

/**
 * A key of its own for one purpose, derived from `ikm` (HKDF-SHA256, empty salt, `info` naming the
 * purpose): one master key serves several kinds of secret, and no ciphertext of one kind can be
 * taken for another's.
 */
export const deriveKey = (ikm: Buffer, info: string): Buffer =>
  Buffer.from(hkdfSync("sha256", ikm, Buffer.alloc(0), info, KEY_BYTES))

/** `plaintext` sealed under `key`: nonce ‖ ciphertext ‖ tag, bound to `aad` when given. */
export function sealBytes(key: Buffer, plaintext: Buffer | string, aad?: Buffer): Buffer {
  const nonce = randomBytes(NONCE_BYTES)
  const cipher = createCipheriv("aes-256-gcm", key, nonce, { authTagLength: TAG_BYTES })
  if (aad !== undefined) cipher.setAAD(aad)
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()])
  return Buffer.concat([nonce, body, cipher.getAuthTag()])
}

/**
 * The plaintext of `sealed` (sealBytes' layout). Throws when it does not authenticate: altered,
 * bound to other data, or sealed under another key (GCM cannot tell which). The caller checks
 * that `sealed` holds at least a nonce and a tag (SEALED_MIN_BYTES).
 */
export function openBytes(key: Buffer, sealed: Buffer, aad?: Buffer): Buffer {
  const nonce = sealed.subarray(0, NONCE_BYTES)
  const tag = sealed.subarray(sealed.length - TAG_BYTES)
  const body = sealed.subarray(NONCE_BYTES, sealed.length - TAG_BYTES)
  const decipher = createDecipheriv("aes-256-gcm", key, nonce, { authTagLength: TAG_BYTES })
  if (aad !== undefined) decipher.setAAD(aad)
  decipher.setAuthTag(tag)
  return Buffer.concat([decipher.update(body), decipher.final()])
}

/** The shortest sealed value: a nonce and a tag around an empty ciphertext. */
export const SEALED_MIN_BYTES = NONCE_BYTES + TAG_BYTES

/** Why an envelope did not open. */
export type OpenFailure = "version" | "truncated" | "authentication"

/** Seals strings bound to a context `C` (the row they belong to), as `<version>:` envelopes. */
export interface SecretBox<C> {
  seal(plaintext: string, context: C): string
  /** The plaintext; throws the box's `refuse` error when the envelope does not open. */
  open(envelope: string, context: C): string
}

/**
 * A box for one kind of secret: its envelope version, the additional data a context binds it to
 * (length-prefix variable parts, so no two contexts encode alike), and the error it refuses with.
 */
export function secretBox<C>(kind: {
  readonly key: Buffer
  readonly version: string
  readonly aad: (context: C) => Buffer
  readonly refuse: (why: OpenFailure) => Error
}): SecretBox<C> {
  const { key, version, aad, refuse } = kind
  if (key.length !== KEY_BYTES) throw new Error(`a secret store key must be ${KEY_BYTES} bytes`)
  return {
    seal: (plaintext, context) =>
      `${version}:${sealBytes(key, Buffer.from(plaintext, "utf8"), aad(context)).toString("base64")}`,
    open(envelope, context) {
      const sep = envelope.indexOf(":")
      if (sep < 0 || envelope.slice(0, sep) !== version) throw refuse("version")
      const raw = Buffer.from(envelope.slice(sep + 1), "base64")
      if (raw.length < SEALED_MIN_BYTES) throw refuse("truncated")
      try {
        return openBytes(key, raw, aad(context)).toString("utf8")
      } catch {
        throw refuse("authentication")
      }
    },
  }
}

/**
 * A secret the deployment generated for itself (the JWT and ALTCHA keys when none is configured,
 * the webhook secrets' key without a master key, the DSR and email-token keys): created on first
 * use, kept in the database and so shared by every process; concurrent first uses agree on one.
 */
export async function systemSecret(sql: Sql, name: string): Promise<string> {
  return systemSecretOr(sql, name, randomBytes(48).toString("base64url"))
}
