// ALTCHA against a migrated database: challenges solved by altcha-lib's own solver (the widget's
// algorithm) verify once; replayed, tampered, foreign, expired or malformed payloads do not.
import { type Challenge, createChallenge, solveChallenge } from "altcha-lib"
import { deriveKey } from "altcha-lib/algorithms/sha"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeAltcha } from "../../src/auth/altcha.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

const HMAC_KEY = "test-altcha-hmac-key-0123456789"

/** Solves a challenge as the widget does and encodes the payload it would submit. */
async function solve(challenge: Record<string, unknown>): Promise<string> {
  const solution = await solveChallenge({ challenge: challenge as unknown as Challenge, deriveKey })
  if (solution === null) throw new Error("challenge not solved")
  return encode({ challenge, solution })
}

const encode = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString("base64")
const decode = (
  p: string,
): {
  challenge: { parameters: Record<string, unknown>; signature: string }
  solution: { counter: number; derivedKey: string }
} => JSON.parse(Buffer.from(p, "base64").toString("utf8"))

describe("ALTCHA", () => {
  let srv: TestServer
  beforeAll(async () => {
    srv = await sharedTestServer()
  })
  afterAll(async () => {
    await srv?.stop()
  })

  const altcha = (over: { hmacKey?: string; maxNumber?: number; expiresInSeconds?: number } = {}) =>
    makeAltcha({ hmacKey: HMAC_KEY, sql: srv.sql, maxNumber: 2_000, ...over })

  it("issues a signed PoW v2 challenge the widget accepts", async () => {
    const before = Date.now() / 1000
    const c = await makeAltcha({ hmacKey: HMAC_KEY, sql: srv.sql }).challenge()
    expect(Object.keys(c).sort()).toEqual(["parameters", "signature"])
    expect(c.signature).toMatch(/^[0-9a-f]{64}$/)
    const p = c.parameters as Record<string, unknown>
    // The fields the widget checks before solving.
    for (const k of ["algorithm", "nonce", "salt", "keyPrefix"]) expect(typeof p[k]).toBe("string")
    expect(p.algorithm).toBe("SHA-256")
    expect(p.cost).toBe(1)
    // Default expiry: five minutes.
    expect(p.expiresAt as number).toBeGreaterThanOrEqual(Math.floor(before) + 299)
    expect(p.expiresAt as number).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 300)
    // It survives a JSON round trip, as it must on its way through HTTP.
    expect(JSON.parse(JSON.stringify(c))).toEqual(c)
  })

  it("keeps the default difficulty within the configured work", async () => {
    const a = makeAltcha({ hmacKey: HMAC_KEY, sql: srv.sql })
    const t0 = performance.now()
    const payload = await solve(await a.challenge())
    const solvedIn = performance.now() - t0
    const { counter } = decode(payload).solution
    expect(counter).toBeGreaterThanOrEqual(50_000)
    expect(counter).toBeLessThanOrEqual(100_000)
    // Node's solver is slower per hash than the widget's parallel workers; still well bounded.
    expect(solvedIn).toBeLessThan(10_000)
    expect(await a.verify(payload)).toBe(true)
  })

  it("verifies a solution once and refuses its replay", async () => {
    const a = altcha()
    const payload = await solve(await a.challenge())
    expect(await a.verify(payload)).toBe(true)
    expect(await a.verify(payload)).toBe(false)
    // A second instance (another api process) shares the spent list through the database.
    expect(await altcha().verify(payload)).toBe(false)

    const { challenge } = decode(payload)
    const rows = await srv.sql<
      { expires_at: Date }[]
    >`select expires_at from altcha_spent where signature = ${challenge.signature}`
    expect(rows).toHaveLength(1)
    expect(rows[0]!.expires_at.getTime()).toBe((challenge.parameters.expiresAt as number) * 1000)
  })

  it("lets exactly one of several concurrent submissions of one solution through", async () => {
    const a = altcha()
    const payload = await solve(await a.challenge())
    const results = await Promise.all(Array.from({ length: 8 }, () => a.verify(payload)))
    expect(results.filter(Boolean)).toHaveLength(1)
  })

  it("accepts distinct solutions independently", async () => {
    const a = altcha()
    const [p1, p2] = await Promise.all([a.challenge().then(solve), a.challenge().then(solve)])
    expect(await a.verify(p1)).toBe(true)
    expect(await a.verify(p2)).toBe(true)
  })

  it("refuses a tampered counter, derived key, signature or parameter", async () => {
    const a = altcha()
    const payload = await solve(await a.challenge())
    const original = decode(payload)

    const wrongCounter = decode(payload)
    wrongCounter.solution.counter += 1
    expect(await a.verify(encode(wrongCounter))).toBe(false)

    // A counter with its own, correctly derived key is still not a solution: no matching prefix.
    const otherKey = decode(payload)
    otherKey.solution.counter = 0
    const { derivedKey } = await deriveKey(
      original.challenge.parameters as unknown as Challenge["parameters"],
      Buffer.from(original.challenge.parameters.salt as string, "hex"),
      Buffer.concat([Buffer.from(original.challenge.parameters.nonce as string, "hex"), Buffer.alloc(4)]),
    )
    otherKey.solution.derivedKey = Buffer.from(derivedKey).toString("hex")
    expect(await a.verify(encode(otherKey))).toBe(false)

    const wrongKey = decode(payload)
    const k = wrongKey.solution.derivedKey
    wrongKey.solution.derivedKey = (k[0] === "0" ? "1" : "0") + k.slice(1)
    expect(await a.verify(encode(wrongKey))).toBe(false)

    const wrongSig = decode(payload)
    const s = wrongSig.challenge.signature
    wrongSig.challenge.signature = s.slice(0, -1) + (s.endsWith("0") ? "1" : "0")
    expect(await a.verify(encode(wrongSig))).toBe(false)

    const noSig = decode(payload) as { challenge: Record<string, unknown> }
    delete noSig.challenge.signature
    expect(await a.verify(encode(noSig))).toBe(false)

    const extended = decode(payload)
    extended.challenge.parameters.expiresAt = (extended.challenge.parameters.expiresAt as number) + 3600
    expect(await a.verify(encode(extended))).toBe(false)

    const extraField = decode(payload)
    extraField.challenge.parameters.data = { note: "added" }
    expect(await a.verify(encode(extraField))).toBe(false)

    const cheaper = decode(payload)
    cheaper.challenge.parameters.keyPrefix = "00"
    expect(await a.verify(encode(cheaper))).toBe(false)

    // None of the refusals spent the genuine solution.
    expect(await a.verify(payload)).toBe(true)
  })

  it("refuses a solution to another deployment's challenge", async () => {
    const theirs = altcha({ hmacKey: "another-deployment-hmac-key-xyz" })
    const payload = await solve(await theirs.challenge())
    expect(await altcha().verify(payload)).toBe(false)
    expect(await theirs.verify(payload)).toBe(true)
  })

  it("refuses an expired challenge", async () => {
    // Signed with our key and correctly solved, but past its expiry.
    const crafted = await createChallenge({
      algorithm: "SHA-256",
      cost: 1,
      counter: 10,
      deriveKey,
      expiresAt: Math.floor(Date.now() / 1000) - 5,
      hmacSignatureSecret: HMAC_KEY,
    })
    expect(await altcha().verify(await solve({ ...crafted }))).toBe(false)

    // One issued with a one-second lifetime, submitted after it ran out.
    const a = altcha({ expiresInSeconds: 1 })
    const payload = await solve(await a.challenge())
    const expiresAt = decode(payload).challenge.parameters.expiresAt as number
    await new Promise((r) => setTimeout(r, Math.max(0, expiresAt * 1000 - Date.now()) + 1100))
    expect(await a.verify(payload)).toBe(false)
  })

  it(
    "refuses a challenge issued without an expiry or with another algorithm, " + "even if signed with our key",
    async () => {
      const noExpiry = await createChallenge({
        algorithm: "SHA-256",
        cost: 1,
        counter: 10,
        deriveKey,
        hmacSignatureSecret: HMAC_KEY,
      })
      expect(await altcha().verify(await solve({ ...noExpiry }))).toBe(false)
      const sha512 = await createChallenge({
        algorithm: "SHA-512",
        cost: 1,
        counter: 10,
        deriveKey,
        expiresAt: Math.floor(Date.now() / 1000) + 60,
        hmacSignatureSecret: HMAC_KEY,
      })
      expect(await altcha().verify(await solve({ ...sha512 }))).toBe(false)
    },
  )

  it("answers false, never throws, on garbage", async () => {
    const a = altcha()
    const garbage: unknown[] = [
      "x",
      "",
      null,
      undefined,
      123,
      true,
      {},
      [],
      { challenge: {}, solution: {} },
      Buffer.from("not json at all").toString("base64"),
      Buffer.from("{").toString("base64"),
      encode(null),
      encode("a string"),
      encode([1, 2]),
      encode({}),
      encode({ challenge: null, solution: null, test: true }), // the widget's test mode
      encode({ challenge: { parameters: {}, signature: "ab" }, solution: { counter: 1, derivedKey: "ab" } }),
      encode({ challenge: { parameters: "x", signature: "ab" }, solution: { counter: "1", derivedKey: 2 } }),
      encode({ algorithm: "SHA-256", challenge: "ab", number: 1, salt: "s", signature: "ab", took: 1 }), // a v1 payload
      "%%%%",
      `eyJ${"A".repeat(10_000)}`,
    ]
    for (const g of garbage) {
      await expect(a.verify(g), JSON.stringify(g)?.slice(0, 60)).resolves.toBe(false)
    }
    // A well-formed payload with a non-hex nonce and a bogus signature.
    const payload = decode(await solve(await a.challenge()))
    payload.challenge.parameters.nonce = "zz"
    await expect(a.verify(encode(payload))).resolves.toBe(false)
  })

  it("purges long-expired spent rows while recording a new one", async () => {
    await srv.sql`insert into altcha_spent (signature, expires_at)
      values ('stale-one', now() - interval '1 day'),
             ('recent-one', now() - interval '10 seconds')`
    const a = altcha()
    expect(await a.verify(await solve(await a.challenge()))).toBe(true)
    const left = await srv.sql<
      { signature: string }[]
    >`select signature from altcha_spent where signature in ('stale-one', 'recent-one')`
    // The recent one is inside the clock-skew margin, so it stays for now.
    expect(left.map((r) => r.signature)).toEqual(["recent-one"])
  })

  it("rejects nonsensical options at construction", () => {
    expect(() => makeAltcha({ hmacKey: "", sql: srv.sql })).toThrow(/hmacKey/)
    expect(() => makeAltcha({ hmacKey: HMAC_KEY, sql: srv.sql, maxNumber: 0 })).toThrow(/maxNumber/)
    expect(() => makeAltcha({ hmacKey: HMAC_KEY, sql: srv.sql, expiresInSeconds: 0 })).toThrow(/expiresInSeconds/)
  })
})
