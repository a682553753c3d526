// Phone numbers as people type them, turned into E.164: the one normaliser behind audience
// uploads, the DNC list and its check, plus the narrower Indian form the national registry uses.
import { type CountryCode, parsePhoneNumberFromString, validatePhoneNumberLength } from "libphonenumber-js/max"

/** The countries a tenant may have (tenants.country); every one is a region libphonenumber knows. */
export type TenantCountry = "IN" | "US" | "GB" | "AU" | "CA" | "SG" | "AE"

/** Why a value is not a phone number, as reported per row (invalid_rows[].reason). */
export type InvalidPhoneReason =
  | "missing"
  | "not_a_number"
  | "invalid_country"
  | "too_short"
  | "too_long"
  | "invalid_length"
  | "invalid_number"

export type PhoneResult =
  | { readonly ok: true; readonly e164: string }
  | { readonly ok: false; readonly reason: InvalidPhoneReason }

const LENGTH_REASON: Readonly<Record<string, InvalidPhoneReason>> = {
  NOT_A_NUMBER: "not_a_number",
  INVALID_COUNTRY: "invalid_country",
  TOO_SHORT: "too_short",
  TOO_LONG: "too_long",
  INVALID_LENGTH: "invalid_length",
}

const valid = (text: string, country?: CountryCode): string | undefined => {
  const p = parsePhoneNumberFromString(text, country)
  return p?.isValid() ? p.number : undefined
}

/** Digits that are valid as an international number once a + is put back (or "00" read as +). */
function droppedPlus(text: string): string | undefined {
  if (text.startsWith("+")) return undefined
  const digits = text.replace(/[\s\-().\u00a0]/g, "").replace(/^00/, "")
  return /^[1-9]\d{6,14}$/.test(digits) ? valid(`+${digits}`) : undefined
}

/**
 * A number in any common format (spaces, dashes, brackets, national or international, trunk or
 * IDD prefixes) as E.164, valid by libphonenumber's full ("max") metadata. A number without a
 * leading + is read in the tenant's country first; failing that, as international digits whose
 * + was dropped (spreadsheets and query strings lose it: "919876543210" for a US tenant).
 */
export function toE164(raw: string | number, defaultCountry: TenantCountry): PhoneResult {
  const text = (typeof raw === "number" ? (Number.isSafeInteger(raw) && raw > 0 ? String(raw) : "") : raw).trim()
  if (text === "") return { ok: false, reason: typeof raw === "number" ? "not_a_number" : "missing" }
  const national = valid(text, defaultCountry)
  if (national !== undefined) return { ok: true, e164: national }
  const international = droppedPlus(text)
  if (international !== undefined) return { ok: true, e164: international }
  const length = validatePhoneNumberLength(text, defaultCountry)
  return { ok: false, reason: length === undefined ? "invalid_number" : (LENGTH_REASON[length] ?? "invalid_number") }
}

/**
 * A number written in international form (a leading +; spaces, dashes, dots and brackets allowed)
 * as E.164, valid by the full metadata; undefined for anything else. For a number typed where no
 * country may be assumed: the operator a supervisor hands a call over to.
 */
export function internationalE164(raw: string): string | undefined {
  const text = raw.trim()
  return /^\+[\d\s\-().\u00a0]{7,30}$/.test(text) ? valid(text) : undefined
}

/**
 * Every E.164 reading of a value, most likely first: toE164's answer, then, for digits without
 * a +, the international reading when it differs. For finding a number already stored, where
 * either reading may be the one that was meant.
 */
export function e164Candidates(raw: string, defaultCountry: TenantCountry): string[] {
  const first = toE164(raw, defaultCountry)
  const out = first.ok ? [first.e164] : []
  const international = droppedPlus(raw.trim())
  if (international !== undefined && !out.includes(international)) out.push(international)
  return out
}

/**
 * A phone number that came through a URL query string, where an unencoded "+" arrives as a
 * space: " 14155550100" was "+14155550100".
 */
export function restorePlus(fromQuery: string): string {
  return /^\s+\d/.test(fromQuery) ? `+${fromQuery.trim()}` : fromQuery
}

/**
 * An Indian number as the national registry lists it (10-digit national, with a 0 trunk prefix,
 * or prefixed 91 / +91 / 0091) → "+91" and the 10 digits; anything else → undefined. Deliberately
 * not a validity check: the registry is a block list, and an entry the metadata does not know
 * yet must still block.
 */
export function indianE164(raw: string): string | undefined {
  const s = raw.trim().replace(/[\s\-().\u00a0]/g, "")
  // Ten digits are always national ("9198…" is a number beginning 91, not a prefix): the
  // optional prefix only matches when ten digits follow it.
  const m = /^(?:\+91|0091|91|0)?([1-9]\d{9})$/.exec(s)
  return m === null ? undefined : `+91${m[1]}`
}

/** E.164 numbers the national registry covers. */
export const isIndian = (e164: string): boolean => e164.startsWith("+91")
