// The simulator's number inventory: a deterministic stock for any country libphonenumber knows
// (US +1 <area> 555 01xx, IN +91 98765 501xx, …); buying, taking over and releasing always work.
import {
  type CountryCode,
  getCountryCallingCode,
  getExampleNumber,
  isSupportedCountry,
  parsePhoneNumberFromString,
} from "libphonenumber-js/max"
import examples from "libphonenumber-js/mobile/examples"
import type { AvailableNumber, NumberInventory, NumberSearch } from "./numbers.interface.js"

/** Numbers per country and area code: the last two digits run 00 to 99. */
const STOCK = 100

/** Where each country's stock starts when no area code is asked for (NANP: the area code). */
const DEFAULT_PREFIX: Readonly<Partial<Record<CountryCode, string>>> = {
  US: "415",
  CA: "416",
  IN: "98765",
  GB: "207946",
  AU: "25550",
}

/** The provider id the simulator gives a number: its digits, so it is the same in every process. */
export const simNumberId = (phoneE164: string): string => `PNsim${phoneE164.replace(/\D/g, "")}`

/** The simulator's stock for a country and area code, in order (empty when it has none). */
export function simStock(q: Omit<NumberSearch, "limit">): string[] {
  const country = q.country.toUpperCase()
  if (!isSupportedCountry(country)) return []
  const code = country as CountryCode
  const callingCode = getCountryCallingCode(code)
  const nanp = callingCode === "1"
  const example = getExampleNumber(code, examples)?.nationalNumber
  const length = nanp ? 10 : (example?.length ?? 0)
  if (length < 6) return []
  const prefix = q.areaCode ?? DEFAULT_PREFIX[code] ?? (example ?? "").slice(0, length - 4)
  if (nanp && prefix.length !== 3) return []
  if (prefix.length > length - 4) return []
  // The digits between the prefix and the final 01xx: 555 on the NANP (the fictional exchange),
  // else the country's example number, so the result usually stays a valid number.
  const middle = nanp ? "555" : (example ?? "").slice(prefix.length, length - 4).padEnd(length - 4 - prefix.length, "0")
  const out: string[] = []
  for (let i = 0; i < STOCK; i++) {
    const e164 = `+${callingCode}${prefix}${middle}01${String(i).padStart(2, "0")}`
    const parsed = parsePhoneNumberFromString(e164)
    if (parsed?.isValid() && parsed.country === code) out.push(e164)
  }
  return out
}

export function makeSimNumbers(): NumberInventory {
  return {
    provider: "sim",
    async search(q: NumberSearch): Promise<AvailableNumber[]> {
      const country = q.country.toUpperCase()
      const nanp = isSupportedCountry(country) && getCountryCallingCode(country) === "1"
      return simStock(q)
        .slice(0, q.limit)
        .map((phone_e164) => ({ phone_e164, country, capabilities: { voice: true, sms: nanp } }))
    },
    async provision(req) {
      return { providerNumberId: simNumberId(req.phoneE164) }
    },
    async registerOwned(req) {
      return { providerNumberId: simNumberId(req.phoneE164) }
    },
    async release() {},
  }
}
