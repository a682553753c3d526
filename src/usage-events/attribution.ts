// Signup attribution values: the optional utm/referrer/landing fields of the signup body, the
// first-touch cookie `parley_ft`, and the source/medium/campaign a signup is counted under.
import { z } from "zod"

/** The first-touch cookie: set by the marketing site on the first visit, read once at signup. */
export const FIRST_TOUCH_COOKIE = "parley_ft"

const NO_CONTROL = /^[^\p{Cc}]*$/u
const text = (max: number) =>
  z
    .string()
    .trim()
    .min(1)
    .max(max, `must be at most ${max} characters`)
    .regex(NO_CONTROL, "must not contain control characters")

/** The signup body's optional attribution fields (also the fields of the first-touch cookie). */
export const AttributionFields = z.object({
  utm_source: text(200).optional(),
  utm_medium: text(200).optional(),
  utm_campaign: text(200).optional(),
  referrer: text(2048).optional(),
  landing_path: text(2048).startsWith("/", "must start with /").optional(),
})
export type Touch = z.infer<typeof AttributionFields>

const FIELDS = ["utm_source", "utm_medium", "utm_campaign", "referrer", "landing_path"] as const

/**
 * The first-touch values from the cookie (already URL-decoded once by the cookie parser): either a
 * querystring (`utm_source=news&utm_medium=email&landing_path=%2Fpricing`) or a JSON object with
 * the same names. A value that is malformed or too long is dropped; the cookie never fails a signup.
 */
export function parseFirstTouch(raw: string | undefined): Touch | undefined {
  if (raw === undefined || raw.length === 0 || raw.length > 8192) return undefined
  let candidate: Record<string, unknown>
  if (raw.trimStart().startsWith("{")) {
    try {
      const parsed: unknown = JSON.parse(raw)
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return undefined
      candidate = parsed as Record<string, unknown>
    } catch {
      return undefined
    }
  } else candidate = Object.fromEntries(new URLSearchParams(raw))
  const out: Record<string, string> = {}
  for (const f of FIELDS) {
    const v = AttributionFields.shape[f].safeParse(candidate[f])
    if (v.success && v.data !== undefined) out[f] = v.data
  }
  return Object.keys(out).length > 0 ? (out as Touch) : undefined
}

export interface SignupAttribution {
  readonly body: Touch
  readonly firstTouch: Touch | undefined
}

export interface Channel {
  readonly source: string
  readonly medium: string
  readonly campaign: string
}

const hostOf = (referrer: string | undefined): string | undefined => {
  if (referrer === undefined) return undefined
  try {
    const host = new URL(referrer).hostname.toLowerCase()
    return host.length > 0 && host.length <= 253 ? host : undefined
  } catch {
    return undefined
  }
}

const hasChannel = (t: Touch | undefined): t is Touch =>
  t !== undefined &&
  (t.utm_source !== undefined || t.utm_medium !== undefined || t.utm_campaign !== undefined || t.referrer !== undefined)

/**
 * The channel a signup counts under: the first touch when the cookie named a source, medium,
 * campaign or referrer, else the body's. Source: utm_source, else the referrer's host, else
 * "(direct)"; medium: utm_medium, else "referral" for a referrer, else "(none)"; campaign:
 * utm_campaign, else "(none)".
 */
export function channelOf(a: SignupAttribution): Channel {
  const t = hasChannel(a.firstTouch) ? a.firstTouch : a.body
  const host = hostOf(t.referrer)
  return {
    source: t.utm_source ?? host ?? "(direct)",
    medium: t.utm_medium ?? (t.utm_source === undefined && host !== undefined ? "referral" : "(none)"),
    campaign: t.utm_campaign ?? "(none)",
  }
}
