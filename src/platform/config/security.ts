// The deployment's own secrets (system key, session and credential keys) and its defences against
// anonymous abuse: the ALTCHA challenge and per-address and per-IP limits on signups, OTPs, previews.
import { z } from "zod"
import { flag, isBase64Key, optionalString, type Parsed, positiveInt } from "./fields.js"

export const securityEnv = {
  /** Enables /internal/* and /api/internal/* (header X-System-Key); unset → those routes are 404. */
  SYSTEM_KEY: optionalString.pipe(z.string().min(16, "must be at least 16 characters").optional()),
  /** HS256 key for session JWTs; unset → a random key generated once and kept in the database. */
  JWT_SECRET: optionalString.pipe(z.string().min(32, "must be at least 32 characters").optional()),
  /** AES-256-GCM key (32 bytes, base64) for tenants' provider secrets; unset → credential saves answer 503. */
  CREDENTIALS_MASTER_KEY: optionalString.pipe(
    z
      .string()
      .refine((s) => isBase64Key(s, 32), "must be 32 bytes encoded in base64")
      .optional(),
  ),
  /** How often API keys' last_used_at/last_used_ip are written (batched, not per request). */
  KEY_USAGE_FLUSH_MS: positiveInt.max(3_600_000).default(5_000),
  /** true → signup, OTP start and demo calls need a solved ALTCHA challenge in field `altcha`. */
  ALTCHA_REQUIRED: flag,
  /** HMAC key for ALTCHA challenges; unset → derived from the deployment's generated secret. */
  ALTCHA_HMAC_KEY: optionalString.pipe(z.string().min(16, "must be at least 16 characters").optional()),
  /** Failed OTP guesses per address, and per client IP, in an hour before further guesses are refused. */
  OTP_GUESSES_PER_ADDRESS_HOUR: positiveInt.max(1000).default(10),
  OTP_GUESSES_PER_IP_HOUR: positiveInt.max(100_000).default(50),
  /** Signups from one client IP in an hour. */
  SIGNUPS_PER_IP_HOUR: positiveInt.max(1_000_000).default(10),
  /** Anonymous opening-line previews from one client IP in an hour (signed-in workspaces are not counted here). */
  PREVIEWS_ANON_PER_IP_HOUR: positiveInt.max(1_000_000).default(30),
}
export type SecurityEnv = Parsed<typeof securityEnv>

export type SecurityConfig = Readonly<{
  systemKey: string | undefined
  jwtSecret: string | undefined
  credentialsMasterKey: string | undefined
  keyUsageFlushMs: number
  altchaRequired: boolean
  altchaHmacKey: string | undefined
  otpGuessesPerAddressHour: number
  otpGuessesPerIpHour: number
  signupsPerIpHour: number
  previewsAnonPerIpHour: number
}>

export function securityConfig(e: SecurityEnv): SecurityConfig {
  return {
    systemKey: e.SYSTEM_KEY,
    jwtSecret: e.JWT_SECRET,
    credentialsMasterKey: e.CREDENTIALS_MASTER_KEY,
    keyUsageFlushMs: e.KEY_USAGE_FLUSH_MS,
    altchaRequired: e.ALTCHA_REQUIRED,
    altchaHmacKey: e.ALTCHA_HMAC_KEY,
    otpGuessesPerAddressHour: e.OTP_GUESSES_PER_ADDRESS_HOUR,
    otpGuessesPerIpHour: e.OTP_GUESSES_PER_IP_HOUR,
    signupsPerIpHour: e.SIGNUPS_PER_IP_HOUR,
    previewsAnonPerIpHour: e.PREVIEWS_ANON_PER_IP_HOUR,
  }
}
