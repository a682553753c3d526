// The storefront pieces without a server: the platform's hmac (its documented example), the
// configuration rules, and the demo shop's customers.
import { parsePhoneNumberFromString } from "libphonenumber-js/max"
import { describe, expect, it } from "vitest"
import { loadConfig } from "../../src/platform/config.js"
import { DEMO_CUSTOMER_COUNT, demoCustomers } from "../../src/providers/storefront/sim.storefront.js"
import { signQuery, verifyQueryHmac } from "../../src/providers/storefront/storefront.interface.js"

const DOC_QUERY =
  "code=0907a61c0c8d55e99db179b68161bc00&shop=some-shop.myshopify.com&state=0.6784241404160823&timestamp=1337178173"
const DOC_HMAC = "700e2dadb827fcc8609e9d5ce208b2e9cdaab9df07390d2cbca10d7c328fc4bf"

describe("the hmac query signature", () => {
  it("matches the platform's documented example, whatever the parameter order", () => {
    expect(signQuery(new URLSearchParams(DOC_QUERY), "hush")).toBe(DOC_HMAC)
    expect(verifyQueryHmac(`hmac=${DOC_HMAC}&${DOC_QUERY}`, "hush")).toBe(true)
    const reordered = DOC_QUERY.split("&").reverse().join("&")
    expect(verifyQueryHmac(`${reordered}&hmac=${DOC_HMAC.toUpperCase()}`, "hush")).toBe(true)
  })

  it("refuses another secret, a changed parameter, and a malformed hmac", () => {
    expect(verifyQueryHmac(`hmac=${DOC_HMAC}&${DOC_QUERY}`, "hush2")).toBe(false)
    expect(verifyQueryHmac(`hmac=${DOC_HMAC}&${DOC_QUERY.replace("1337178173", "1337178174")}`, "hush")).toBe(false)
    expect(verifyQueryHmac(`hmac=${DOC_HMAC.slice(2)}&${DOC_QUERY}`, "hush")).toBe(false)
    expect(verifyQueryHmac(DOC_QUERY, "hush")).toBe(false)
  })
})

describe("storefront configuration", () => {
  it("uses the simulator unless both app key and secret are set", () => {
    expect(loadConfig({}).storefront).toEqual({
      app: undefined,
      platformDomain: "myshopify.com",
      baseUrlOverride: undefined,
    })
    expect(loadConfig({ STOREFRONT_API_KEY: "k" }).storefront.app).toBeUndefined()
    expect(loadConfig({ STOREFRONT_API_KEY: "k", STOREFRONT_API_SECRET: "s" }).storefront.app).toEqual({
      apiKey: "k",
      apiSecret: "s",
    })
  })

  it("takes the base URL override only with ALLOW_PRIVATE_PROVIDER_URLS=true", () => {
    expect(() => loadConfig({ STOREFRONT_BASE_URL_OVERRIDE: "http://127.0.0.1:9" })).toThrow(
      /ALLOW_PRIVATE_PROVIDER_URLS/,
    )
    expect(
      loadConfig({ STOREFRONT_BASE_URL_OVERRIDE: "http://127.0.0.1:9/", ALLOW_PRIVATE_PROVIDER_URLS: "true" })
        .storefront.baseUrlOverride,
    ).toBe("http://127.0.0.1:9")
    expect(() => loadConfig({ STOREFRONT_PLATFORM_DOMAIN: "not a domain" })).toThrow(/STOREFRONT_PLATFORM_DOMAIN/)
  })
})

describe("the demo shop", () => {
  it("has 200 customers, the same each time: 187 valid phones, 8 malformed, 5 missing", () => {
    const cs = demoCustomers()
    expect(cs).toHaveLength(DEMO_CUSTOMER_COUNT)
    expect(new Set(cs.map((c) => c.customer_id)).size).toBe(200)
    const valid = cs.filter((c) => c.phone !== null && parsePhoneNumberFromString(c.phone)?.isValid())
    expect(valid).toHaveLength(187)
    expect(cs.filter((c) => c.phone === null)).toHaveLength(5)
    expect(cs[0]).toMatchObject({ customer_id: 7_000_001, name: "Kavya Brown", city: "San Francisco", currency: "USD" })
    expect(new Set(cs.map((c) => c.country))).toEqual(new Set(["IN", "US", "GB"]))
  })
})
