// Provider-secret encryption: round trip, a fresh nonce per value, tamper detection on each part
// of the envelope, binding to (tenant, provider), the wrong key, master-key decoding and the
// configuration check, and the masked hint.
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "vitest"
import { CredentialDecryptError, makeCredentialCrypto, maskSecret } from "../../src/onboarding/credentials.crypto.js"
import { loadConfig } from "../../src/platform/config.js"
import { decodeMasterKey, isMasterKey } from "../../src/platform/secret-store.js"

const key = randomBytes(32).toString("base64")
const crypto = makeCredentialCrypto(key)
const aad = { tenantId: 42, provider: "telco_a" }
const secret = "0123456789abcdef0123456789abcdef"

/** The envelope with byte `i` of its decoded body flipped. */
function flip(envelope: string, i: number): string {
  const raw = Buffer.from(envelope.slice(3), "base64")
  raw[i] = raw[i]! ^ 0x01
  return `v1:${raw.toString("base64")}`
}

describe("AES-256-GCM envelope", () => {
  it("round-trips, including empty and non-ASCII values", () => {
    for (const s of [secret, "", "ключ-🔑-秘密", "x".repeat(5000)])
      expect(crypto.decrypt(crypto.encrypt(s, aad), aad)).toBe(s)
  })

  it("is v1: + base64(12-byte nonce ‖ ciphertext ‖ 16-byte tag), without the plaintext", () => {
    const env = crypto.encrypt(secret, aad)
    expect(env).toMatch(/^v1:[A-Za-z0-9+/]+=*$/)
    const raw = Buffer.from(env.slice(3), "base64")
    expect(raw.length).toBe(12 + Buffer.byteLength(secret) + 16)
    expect(env).not.toContain(secret)
    expect(raw.includes(Buffer.from(secret))).toBe(false)
  })

  it("uses a fresh random nonce for every value", () => {
    const envs = Array.from({ length: 50 }, () => crypto.encrypt(secret, aad))
    expect(new Set(envs).size).toBe(50)
    expect(new Set(envs.map((e) => Buffer.from(e.slice(3), "base64").subarray(0, 12).toString("hex"))).size).toBe(50)
  })

  it("detects tampering with the nonce, the ciphertext and the tag", () => {
    const env = crypto.encrypt(secret, aad)
    const len = Buffer.from(env.slice(3), "base64").length
    for (const i of [0, 11, 12, 12 + 5, len - 17, len - 16, len - 1])
      expect(() => crypto.decrypt(flip(env, i), aad), `byte ${i}`).toThrow(CredentialDecryptError)
  })

  it("detects truncation, extension, a wrong version and garbage", () => {
    const env = crypto.encrypt(secret, aad)
    const raw = Buffer.from(env.slice(3), "base64")
    expect(() => crypto.decrypt(`v1:${raw.subarray(0, raw.length - 1).toString("base64")}`, aad)).toThrow(
      CredentialDecryptError,
    )
    expect(() => crypto.decrypt(`v1:${Buffer.concat([raw, Buffer.from([0])]).toString("base64")}`, aad)).toThrow(
      CredentialDecryptError,
    )
    expect(() => crypto.decrypt(`v1:${raw.subarray(0, 20).toString("base64")}`, aad)).toThrow(CredentialDecryptError)
    expect(() => crypto.decrypt(`v2:${raw.toString("base64")}`, aad)).toThrow(CredentialDecryptError)
    expect(() => crypto.decrypt(raw.toString("base64"), aad)).toThrow(CredentialDecryptError)
    expect(() => crypto.decrypt("v1:", aad)).toThrow(CredentialDecryptError)
  })

  it("is bound to the tenant and the provider: a copied row does not decrypt", () => {
    const env = crypto.encrypt(secret, aad)
    expect(() => crypto.decrypt(env, { tenantId: 43, provider: "telco_a" })).toThrow(CredentialDecryptError)
    expect(() => crypto.decrypt(env, { tenantId: 42, provider: "telco_b" })).toThrow(CredentialDecryptError)
    expect(() => crypto.decrypt(env, { tenantId: 4, provider: "2telco_a" })).toThrow(CredentialDecryptError)
  })

  it("does not decrypt under another master key", () => {
    const env = crypto.encrypt(secret, aad)
    const other = makeCredentialCrypto(randomBytes(32).toString("base64"))
    expect(() => other.decrypt(env, aad)).toThrow(CredentialDecryptError)
    // The same key given again (another process) decrypts.
    expect(makeCredentialCrypto(key).decrypt(env, aad)).toBe(secret)
  })

  it("never puts the plaintext in its error messages", () => {
    const env = crypto.encrypt(secret, aad)
    try {
      crypto.decrypt(flip(env, 20), aad)
      expect.unreachable()
    } catch (e) {
      expect(String((e as Error).message)).not.toContain(secret)
    }
  })
})

describe("master key", () => {
  it("must decode from base64 to exactly 32 bytes", () => {
    expect(decodeMasterKey(key).length).toBe(32)
    expect(isMasterKey(key.replace(/=+$/, ""))).toBe(true)
    for (const bad of [
      "",
      "short",
      randomBytes(16).toString("base64"),
      randomBytes(33).toString("base64"),
      `${key.slice(0, 10)}!${key.slice(11)}`,
      randomBytes(32).toString("hex"),
    ])
      expect(isMasterKey(bad), bad).toBe(false)
    expect(() => makeCredentialCrypto(randomBytes(31).toString("base64"))).toThrow(/32 bytes/)
  })

  it("is optional in the configuration, and start-up fails naming it when malformed", () => {
    expect(loadConfig({}).credentialsMasterKey).toBeUndefined()
    expect(loadConfig({ CREDENTIALS_MASTER_KEY: "" }).credentialsMasterKey).toBeUndefined()
    expect(loadConfig({ CREDENTIALS_MASTER_KEY: key }).credentialsMasterKey).toBe(key)
    const bad = randomBytes(24).toString("base64")
    expect(() => loadConfig({ CREDENTIALS_MASTER_KEY: bad })).toThrow(
      /CREDENTIALS_MASTER_KEY: must be 32 bytes encoded in base64/,
    )
    // The message names the variable, never its value.
    try {
      loadConfig({ CREDENTIALS_MASTER_KEY: bad })
    } catch (e) {
      expect((e as Error).message).not.toContain(bad)
    }
  })
})

describe("masked hint", () => {
  it("shows at most the last 4 characters and never more than a quarter", () => {
    expect(maskSecret(secret)).toBe("****cdef")
    expect(maskSecret("abcdefgh")).toBe("****gh")
    expect(maskSecret("abc")).toBe("****")
    expect(maskSecret("")).toBe("****")
  })
})
