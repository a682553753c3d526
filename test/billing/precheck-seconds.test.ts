// GET /billing/precheck takes any positive whole number of seconds (the spec sets no maximum): a
// call longer than the wallet can pay is insufficient_funds, computed exactly (no overflow, no
// float), and the figures come back as exact JSON integers; anything else is 422.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { RATE_PER_MINUTE_MINOR } from "../../src/billing/pricing.js"
import { api, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
let a: ReturnType<typeof api>
let s: Session
beforeAll(async () => {
  srv = await sharedTestServer()
  a = api(srv)
  s = await a.signup({ country: "US" })
})
afterAll(async () => srv?.stop())

const precheck = async (seconds: string) => {
  const res = await a.call("GET", `/billing/precheck?expected_seconds=${seconds}`, { token: s.token })
  const text = await res.text()
  return { status: res.status, text, body: JSON.parse(text) as Record<string, unknown> }
}

describe("GET /billing/precheck?expected_seconds=", () => {
  it("answers small calls the wallet can pay with ok and the exact cost", async () => {
    const r = await precheck("60")
    expect(r.status).toBe(200)
    expect(r.body).toMatchObject({ status: "ok", expected_seconds: 60, required_minor: RATE_PER_MINUTE_MINOR.USD })
    expect((await precheck("0061")).body).toMatchObject({ expected_seconds: 61 })
  })

  it("answers any larger whole number with insufficient_funds, past every old limit and every float", async () => {
    const rate = BigInt(RATE_PER_MINUTE_MINOR.USD)
    for (const seconds of [
      "86401",
      "31536000",
      String(Number.MAX_SAFE_INTEGER),
      "9007199254740993",
      "18446744073709551617",
      `1${"0".repeat(30)}`,
      "9".repeat(400),
    ]) {
      const r = await precheck(seconds)
      expect(r.status, seconds).toBe(200)
      expect(r.body.status, seconds).toBe("insufficient_funds")
      const required = (BigInt(seconds) * rate + 59n) / 60n
      // Exact integers in the JSON text, whatever their size.
      expect(r.text).toContain(`"expected_seconds":${BigInt(seconds)}`)
      expect(r.text).toContain(`"required_minor":${required}`)
      expect(r.body.balance_minor).toEqual(expect.any(Number))
    }
  })

  it("refuses anything but a positive whole number (422, the field named)", async () => {
    for (const bad of ["0", "000", "-5", "1.5", "1e9", "abc", "%2B5", "0x10", "", "5%20"]) {
      const r = await precheck(bad)
      expect(r.status, bad).toBe(422)
      expect(r.body, bad).toMatchObject({ code: "VALIDATION_FAILED", field: "expected_seconds" })
    }
  })
})
