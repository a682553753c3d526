// Encryption of provider secrets at rest: AES-256-GCM under CREDENTIALS_MASTER_KEY, a fresh random
// 96-bit nonce per value, and the (tenant, provider) pair as additional authenticated data.
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto"
import { isBase64Key } from "../platform/config.js"

const VERSION = "v1"
const NONCE_BYTES = 12
const TAG_BYTES = 16
const KEY_BYTES = 32

/** What a ciphertext is bound to: a row copied to another tenant or provider no longer decrypts. */
export interface CredentialAad {
  readonly tenantId: number
  readonly provider: string
}

export interface CredentialCrypto {
  /** `v1:` + base64(nonce ‖ ciphertext ‖ tag). */
  encrypt(plaintext: string, aad: CredentialAad): string
  /** The plaintext; throws CredentialDecryptError when the envelope was altered, moved or made under another key. */
  decrypt(envelope: string, aad: CredentialAad): string
}

export class CredentialDecryptError extends Error {
  override readonly name = "CredentialDecryptError"
}

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

// Length-prefixed parts, so no choice of provider string can make two pairs encode alike.
const aadBytes = (aad: CredentialAad): Buffer => {
  const provider = Buffer.from(aad.provider, "utf8")
  const head = Buffer.alloc(12)
  head.writeBigUInt64BE(BigInt(aad.tenantId), 0)
  head.writeUInt32BE(provider.length, 8)
  return Buffer.concat([Buffer.from(`parley/credential/${VERSION}\0`), head, provider])
}

export function makeCredentialCrypto(masterKeyBase64: string): CredentialCrypto {
  const key = decodeMasterKey(masterKeyBase64)
  return {
    encrypt(plaintext, aad) {
      const nonce = randomBytes(NONCE_BYTES)
      const cipher = createCipheriv("aes-256-gcm", key, nonce, { authTagLength: TAG_BYTES })
      cipher.setAAD(aadBytes(aad))
      const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()])
      return `${VERSION}:${Buffer.concat([nonce, body, cipher.getAuthTag()]).toString("base64")}`
    },
    decrypt(envelope, aad) {
      const sep = envelope.indexOf(":")
      if (sep < 0 || envelope.slice(0, sep) !== VERSION)
        throw new CredentialDecryptError("unknown credential envelope version")
      const raw = Buffer.from(envelope.slice(sep + 1), "base64")
      if (raw.length < NONCE_BYTES + TAG_BYTES) throw new CredentialDecryptError("credential envelope is truncated")
      const nonce = raw.subarray(0, NONCE_BYTES)
      const tag = raw.subarray(raw.length - TAG_BYTES)
      const body = raw.subarray(NONCE_BYTES, raw.length - TAG_BYTES)
      try {
        const decipher = createDecipheriv("aes-256-gcm", key, nonce, { authTagLength: TAG_BYTES })
        decipher.setAAD(aadBytes(aad))
        decipher.setAuthTag(tag)
        return Buffer.concat([decipher.update(body), decipher.final()]).toString("utf8")
      } catch {
        // GCM says only "unable to authenticate": tampered, moved to another row, or another key.
        throw new CredentialDecryptError("credential failed authentication (altered, moved, or another master key)")
      }
    },
  }
}

/** A masked hint of a secret: its last 4 characters (fewer for short secrets), never more than a quarter of it. */
export function maskSecret(secret: string): string {
  const shown = Math.min(4, Math.floor(secret.length / 4))
  return `****${shown === 0 ? "" : secret.slice(-shown)}`
}
