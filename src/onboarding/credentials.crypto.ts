// Provider secrets at rest, in the secret store (src/platform/secret-store.ts): sealed under
// CREDENTIALS_MASTER_KEY itself as `v1:` envelopes, bound to the (tenant, provider) pair.
import { decodeMasterKey, secretBox } from "../platform/secret-store.js"

const VERSION = "v1"

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

// Length-prefixed parts, so no choice of provider string can make two pairs encode alike.
const aadBytes = (aad: CredentialAad): Buffer => {
  const provider = Buffer.from(aad.provider, "utf8")
  const head = Buffer.alloc(12)
  head.writeBigUInt64BE(BigInt(aad.tenantId), 0)
  head.writeUInt32BE(provider.length, 8)
  return Buffer.concat([Buffer.from(`parley/credential/${VERSION}\0`), head, provider])
}

const REFUSALS = {
  version: "unknown credential envelope version",
  truncated: "credential envelope is truncated",
  // GCM says only "unable to authenticate": tampered, moved to another row, or another key.
  authentication: "credential failed authentication (altered, moved, or another master key)",
} as const

export function makeCredentialCrypto(masterKeyBase64: string): CredentialCrypto {
  const box = secretBox<CredentialAad>({
    key: decodeMasterKey(masterKeyBase64),
    version: VERSION,
    aad: aadBytes,
    refuse: (why) => new CredentialDecryptError(REFUSALS[why]),
  })
  return { encrypt: box.seal, decrypt: box.open }
}

/** A masked hint of a secret: its last 4 characters (fewer for short secrets), never more than a quarter of it. */
export function maskSecret(secret: string): string {
  const shown = Math.min(4, Math.floor(secret.length / 4))
  return `****${shown === 0 ? "" : secret.slice(-shown)}`
}
