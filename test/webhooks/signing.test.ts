// The X-SVC-Signature header checked by an independent receiver written here with node:crypto
// alone (what the README shows), plus rotation's two entries and the verifier's refusals.
import { createHmac, timingSafeEqual } from "node:crypto"
import { describe, expect, it } from "vitest"
import { REPLAY_WINDOW_SECONDS, signWebhook, verifyWebhook } from "../../src/webhooks/signing.js"

/** A receiver's check, written from the contract only: t=…,v1=… over `${t}.${raw}`, 5-minute window. */
function receiverAccepts(raw: Buffer, header: string, secret: string, now = Date.now() / 1000): boolean {
  const parts = header.split(",").map((p) => p.split("=") as [string, string])
  const t = parts.find(([k]) => k === "t")?.[1]
  if (t === undefined || Math.abs(now - Number(t)) > 300) return false
  const expected = createHmac("sha256", secret).update(`${t}.`).update(raw).digest()
  return parts
    .filter(([k]) => k === "v1")
    .some(([, v]) => {
      const got = Buffer.from(v, "hex")
      return got.length === expected.length && timingSafeEqual(got, expected)
    })
}

const body = Buffer.from('{"id":"evt_1","type":"call.completed","data":{"call_id":7,"note":"héllo"}}')
const secret = "whsec_current_secret_value_for_tests_0123456789"
const old = "whsec_previous_secret_value_for_tests_9876543210"
const now = Math.floor(Date.now() / 1000)

describe("webhook signatures", () => {
  it("are t=<unix seconds>,v1=<64 hex> and verify with an independent implementation", () => {
    const header = signWebhook(body, [secret], now)
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/)
    expect(header.startsWith(`t=${now},`)).toBe(true)
    expect(receiverAccepts(body, header, secret, now)).toBe(true)
    expect(verifyWebhook(body, header, secret, now)).toBe(true)
  })

  it("sign the exact bytes: a changed byte, another secret or a moved timestamp fails", () => {
    const header = signWebhook(body, [secret], now)
    const altered = Buffer.from(body)
    altered[10] = altered[10]! ^ 1
    expect(receiverAccepts(altered, header, secret, now)).toBe(false)
    expect(receiverAccepts(body, header, "whsec_someone_else", now)).toBe(false)
    expect(receiverAccepts(body, header.replace(`t=${now}`, `t=${now + 1}`), secret, now)).toBe(false)
    expect(verifyWebhook(altered, header, secret, now)).toBe(false)
  })

  it("carry two v1 entries during a rotation: either secret verifies", () => {
    const header = signWebhook(body, [secret, old], now)
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/)
    expect(receiverAccepts(body, header, secret, now)).toBe(true)
    expect(receiverAccepts(body, header, old, now)).toBe(true)
    expect(verifyWebhook(body, header, old, now)).toBe(true)
    expect(receiverAccepts(body, header, "whsec_neither", now)).toBe(false)
  })

  it("are refused outside the 5-minute replay window, either way", () => {
    const header = signWebhook(body, [secret], now)
    expect(REPLAY_WINDOW_SECONDS).toBe(300)
    expect(verifyWebhook(body, header, secret, now + 300)).toBe(true)
    expect(verifyWebhook(body, header, secret, now + 301)).toBe(false)
    expect(verifyWebhook(body, header, secret, now - 301)).toBe(false)
    expect(receiverAccepts(body, header, secret, now + 301)).toBe(false)
  })

  it("verification answers false on malformed headers, never throws", () => {
    const good = signWebhook(body, [secret], now)
    for (const h of [
      undefined,
      "",
      "garbage",
      `t=${now}`,
      `v1=${"a".repeat(64)}`,
      `t=${now},t=${now},v1=${good.split("v1=")[1]}`,
      `t=abc,v1=${good.split("v1=")[1]}`,
      `t=${now},v1=zz`,
      `t=${now},v1=${"a".repeat(63)}`,
      `${good},${"x".repeat(5000)}`,
    ])
      expect(verifyWebhook(body, h, secret, now)).toBe(false)
    expect(verifyWebhook(body, good, "", now)).toBe(false)
    expect(() => signWebhook(body, [], now)).toThrow()
  })
})
