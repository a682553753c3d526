// The secret store keeps what is already stored readable: envelopes and sealed bytes made before
// the three kinds of secret shared one mechanism (provider credentials `v1:`, webhook signing
// secrets `w1:`, sealed idempotent answers) open to the same values, and what it seals now has the
// same layout. The fixed vectors below were made by the code before the move; never regenerate them.
import { describe, expect, it } from "vitest"
import { makeCredentialCrypto } from "../../src/onboarding/credentials.crypto.js"
import type { Config } from "../../src/platform/config.js"
import type { Sql } from "../../src/platform/Db.js"
import { deriveKey, openBytes, sealBytes, secretBox } from "../../src/platform/secret-store.js"
import { webhookSecretBox, webhookSecretKey } from "../../src/webhooks/secrets.js"

const MASTER = Buffer.alloc(32, 7).toString("base64")
const CREDENTIAL = "v1:hKamDcT21SiTUesKGLeCjqZuMZ88r7R5yitMlxYYACw8gsdgDObHu4D4hJrYrg=="
const WEBHOOK_KEY = "caWWV/3Zj5Chdu24i77SmESbwCavS0FZ0VXY4bP/ny0="
const WEBHOOK = "w1:yWHPOwBN2TaceDHc6xPA/hWwU3O2wMpkZ38wDYIUbwP+xKbs2vKgjB+v4nkZEw=="
const IDEMPOTENT = "E54pMIUD32zms/CH/gBKx5Vjc9w2+s69mvKnCu3mp0HT9RRZfTut"

describe("envelopes stored before the secret store", () => {
  it("a provider credential opens under the master key, bound to its tenant and provider", () => {
    const crypto = makeCredentialCrypto(MASTER)
    expect(crypto.decrypt(CREDENTIAL, { tenantId: 42, provider: "telco_a" })).toBe("sk_test_0123456789")
    expect(() => crypto.decrypt(CREDENTIAL, { tenantId: 43, provider: "telco_a" })).toThrow(
      "credential failed authentication",
    )
  })

  it("a webhook secret opens under the key derived from the master key, bound to its tenant", async () => {
    const key = await webhookSecretKey({ credentialsMasterKey: MASTER } as Config, undefined as unknown as Sql)
    expect(key.toString("base64")).toBe(WEBHOOK_KEY)
    expect(webhookSecretBox(key).open(WEBHOOK, 42)).toBe("whsec_known_answer")
    expect(() => webhookSecretBox(key).open(WEBHOOK, 41)).toThrow("webhook secret failed authentication")
  })

  it("a sealed idempotent answer opens as raw bytes without additional data", () => {
    const sealed = Buffer.from(IDEMPOTENT, "base64")
    expect(openBytes(Buffer.alloc(32, 9), sealed).toString()).toBe('{"ok":true}')
  })
})

describe("a secret box", () => {
  const box = secretBox<number>({
    key: deriveKey(Buffer.alloc(32, 1), "parley/test"),
    version: "t1",
    aad: (n) => Buffer.from(`n=${n}`),
    refuse: (why) => new Error(why),
  })

  it("seals as <version>: + base64(12-byte nonce ‖ ciphertext ‖ 16-byte tag), a fresh nonce each time", () => {
    const a = box.seal("secret", 1)
    expect(a).toMatch(/^t1:[A-Za-z0-9+/]+=*$/)
    expect(Buffer.from(a.slice(3), "base64")).toHaveLength(12 + 6 + 16)
    expect(box.seal("secret", 1)).not.toBe(a)
    expect(box.open(a, 1)).toBe("secret")
  })

  it("says why an envelope does not open", () => {
    const a = box.seal("secret", 1)
    expect(() => box.open(`t2${a.slice(2)}`, 1)).toThrow("version")
    expect(() => box.open("t1:AAAA", 1)).toThrow("truncated")
    expect(() => box.open(a, 2)).toThrow("authentication")
  })

  it("seals bytes that open only under the same key and data", () => {
    const key = Buffer.alloc(32, 3)
    const sealed = sealBytes(key, Buffer.from("body"), Buffer.from("aad"))
    expect(openBytes(key, sealed, Buffer.from("aad")).toString()).toBe("body")
    expect(() => openBytes(key, sealed)).toThrow()
    expect(() => openBytes(Buffer.alloc(32, 4), sealed, Buffer.from("aad"))).toThrow()
  })
})
