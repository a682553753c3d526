// A data subject's identifier as the caller typed it: a phone (any format, read in the workspace's
// country; E.164 out) or an email (trimmed, lower-cased). Anything else is 422 on contact_identifier.
import { parsePhoneNumberFromString } from "libphonenumber-js/max"
import { type TenantCountry, toE164 } from "../phones/phone.js"
import { ValidationFailed } from "../platform/errors.js"

export type ContactIdentifier =
  | {
      readonly kind: "phone"
      /** E.164 */
      readonly value: string
      /** The digit strings a stored copy in another format reduces to (E.164 digits, national, 0+national). */
      readonly digitForms: readonly string[]
    }
  | { readonly kind: "email"; readonly value: string }

export const FIELD = "contact_identifier"
// Deliberately plain: one @, no spaces, a dot in the domain (what the email routes accept).
const EMAIL = /^[^\s@]{1,64}@[^\s@]+\.[^\s@]{2,}$/

const invalid = (message: string) =>
  new ValidationFailed({ message: `${FIELD}: ${message}`, errors: [{ field: FIELD, message }] })

/** The identifier normalised, or the 422 to answer with. */
export function parseIdentifier(raw: string, country: TenantCountry): ContactIdentifier | ValidationFailed {
  const text = raw.trim()
  if (text.includes("@")) {
    const email = text.toLowerCase()
    if (email.length > 254 || !EMAIL.test(email)) return invalid("must be a phone number or an email address")
    return { kind: "email", value: email }
  }
  const phone = toE164(text, country)
  if (!phone.ok) return invalid(`must be a phone number or an email address (phone: ${phone.reason})`)
  const national = parsePhoneNumberFromString(phone.e164)?.nationalNumber ?? ""
  const forms = [phone.e164.slice(1), national, `0${national}`].filter((f) => f.length >= 7)
  return { kind: "phone", value: phone.e164, digitForms: [...new Set(forms)] }
}
