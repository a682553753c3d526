// What the public demo feed must not show in the clear: phone numbers and email addresses in a
// transcript line, whoever said them (typed as digits, or spoken as words). Pure.

/** Digits a phone number shows before the mask: its last two, enough to recognise one's own. */
const KEEP_DIGITS = 2
/** A run of fewer digits is a time, a price or a count, not a phone number. */
const MIN_PHONE_DIGITS = 7

const EMAIL = /[\p{L}\p{N}._%+-]+@[\p{L}\p{N}-]+(?:\.[\p{L}\p{N}-]+)+/gu
/** An email read out: "jane dot doe at example dot com". */
const SPOKEN_EMAIL =
  /[\p{L}\p{N}._-]+(?:\s+dot\s+[\p{L}\p{N}_-]+)*\s+at\s+[\p{L}\p{N}-]+(?:\s+dot\s+[\p{L}\p{N}-]+)+/giu
/**
 * Digits with what people and transcribers put between them (spaces, dashes, dots, slashes,
 * brackets), from a + or a digit not glued to a word, to a digit.
 */
const DIGIT_RUN = /(?<![\p{L}\p{N}])\+?\(?\d(?:[ \t\-./()]{0,3}\d)+/gu
const DIGIT_WORD = "(?:zero|oh|one|two|three|four|five|six|seven|eight|nine|double|triple)"
const SPOKEN_DIGITS = new RegExp(`\\b${DIGIT_WORD}(?:[\\s,-]+${DIGIT_WORD})+\\b`, "giu")

const maskEmail = (email: string): string => {
  const at = email.indexOf("@")
  const tld = email.slice(email.lastIndexOf(".") + 1)
  return `${email.slice(0, Math.min(1, at))}***@***.${tld}`
}

/** Every digit but the last two becomes *, separators stay: "+1 202 555 0147" → "+* *** *** **47". */
const maskDigits = (run: string): string => {
  const digits = run.replace(/\D/g, "").length
  if (digits < MIN_PHONE_DIGITS) return run
  let seen = 0
  return run.replace(/\d/g, (d) => (++seen > digits - KEEP_DIGITS ? d : "*"))
}

/** How many digits a run of digit words says ("double five" is two). */
const spokenDigits = (run: string): number => {
  let n = 0
  let repeat = 1
  for (const word of run.toLowerCase().split(/[\s,-]+/)) {
    if (word === "double") repeat = 2
    else if (word === "triple") repeat = 3
    else {
      n += repeat
      repeat = 1
    }
  }
  return n
}

/** `text` with its emails and phone numbers (written or spoken) masked. */
export function maskContactDetails(text: string): string {
  return text
    .replace(EMAIL, maskEmail)
    .replace(SPOKEN_EMAIL, "*** at *** dot ***")
    .replace(DIGIT_RUN, maskDigits)
    .replace(SPOKEN_DIGITS, (run) => (spokenDigits(run) >= MIN_PHONE_DIGITS ? "***" : run))
}
