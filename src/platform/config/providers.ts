// The platform's own vendor accounts (mail, telco_a, the language model, speech, the storefront
// app) and the limits on every provider call; an account left unset means its simulator.
import { join } from "node:path"
import { z } from "zod"
import { flag, nonNegativeInt, optionalString, type Parsed, positiveInt } from "./fields.js"
import type { StorageEnv } from "./storage.js"

export const providersEnv = {
  /** Where the outbox mail simulator appends messages; default <DATA_DIR>/outbox.jsonl. */
  OUTBOX_FILE: optionalString,
  /** A real mail API (POST {MAIL_API_URL}/messages); unset → the outbox simulator. */
  MAIL_API_URL: optionalString.pipe(z.url().optional()),
  MAIL_API_KEY: optionalString,
  MAIL_FROM: z.string().default("Parley <no-reply@parley.local>"),
  /** Shared secret of the mail_a webhook (?key=); unset → the webhook is accepted without a key. */
  MAIL_A_WEBHOOK_SECRET: optionalString,
  /** Signing secret of the mail_b webhook (X-mail_b-Signature, hex HMAC-SHA256 of the raw body). */
  MAIL_B_WEBHOOK_SECRET: optionalString,
  /**
   * The platform's telco_a account (numbers and calls of bundled workspaces): API root, account
   * sid, auth token. Unset (any of the three) → the simulator's number inventory.
   */
  TELCO_A_API_URL: optionalString.pipe(z.url().optional()),
  TELCO_A_ACCOUNT_SID: optionalString,
  TELCO_A_AUTH_TOKEN: optionalString,
  /** The platform account's caller id for outbound calls (E.164). */
  TELCO_A_CALLER_ID: optionalString.pipe(
    z
      .string()
      .regex(/^\+[1-9]\d{6,14}$/, "must be an E.164 number")
      .optional(),
  ),
  /** true: tenants' provider base URLs may name loopback or private addresses (tests, private deployments). */
  ALLOW_PRIVATE_PROVIDER_URLS: flag,
  /** Largest answer read from any provider's HTTP API (model, telephony, mail, payments, tenant URLs). */
  PROVIDER_RESPONSE_LIMIT_BYTES: positiveInt.default(2 * 1024 * 1024),
  /** An OpenAI-compatible API root including its version (…/v1); unset → the language-model simulator. */
  LLM_BASE_URL: optionalString.pipe(z.url().optional()),
  /** Bearer key for LLM_BASE_URL; optional, since local model servers often need none. */
  LLM_API_KEY: optionalString,
  LLM_MODEL: z.string().trim().min(1).default("gpt-4o-mini"),
  /** Limit for each attempt at a language-model call (the adapter retries within its own budget). */
  LLM_TIMEOUT_MS: positiveInt.default(20_000),
  /**
   * The language-model simulator's streamed replies (what a call speaks as it is written): from the
   * request to the first word (a hosted model's time to first token), and between words. Default 0.
   */
  SIM_LLM_FIRST_TOKEN_MS: nonNegativeInt.max(60_000).default(0),
  SIM_LLM_TOKEN_MS: nonNegativeInt.max(5_000).default(0),
  /**
   * An ElevenLabs-style speech API root (https://api.elevenlabs.io; paths /v1/…) and its key (sent as
   * xi-api-key): voice cloning and cloned voices' speech. Unset (either) → the speech simulator.
   */
  SPEECH_API_URL: optionalString.pipe(z.url().optional()),
  SPEECH_API_KEY: optionalString,
  /** The vendor voice that speaks the catalogue personas; unset → the simulator speaks them. */
  SPEECH_DEFAULT_VOICE_ID: optionalString,
  /**
   * The platform's Deepgram-style streaming recogniser for calls heard as audio: its key (sent as
   * Authorization: Token …) and API root (default wss://api.deepgram.com). Unset key → the offline one.
   */
  STT_API_KEY: optionalString,
  STT_API_URL: optionalString.pipe(z.url({ protocol: /^(wss?|https?)$/ }).optional()),
  /**
   * The storefront app's client id and secret (Shopify-style OAuth install; the secret also checks
   * the platform's hmac query signatures). Unset (either) → the storefront simulator (a demo shop).
   */
  STOREFRONT_API_KEY: optionalString,
  STOREFRONT_API_SECRET: optionalString,
  /** The domain every shop lives under: a shop is <name>.<this>. */
  STOREFRONT_PLATFORM_DOMAIN: z
    .string()
    .trim()
    .toLowerCase()
    .regex(/^[a-z0-9-]+(\.[a-z0-9-]+)+$/, "must be a domain name")
    .default("myshopify.com"),
  /** Tests only: the shop's API root instead of https://<shop> (needs ALLOW_PRIVATE_PROVIDER_URLS=true). */
  STOREFRONT_BASE_URL_OVERRIDE: optionalString.pipe(z.url().optional()),
}
export type ProvidersEnv = Parsed<typeof providersEnv>

export type ProvidersConfig = Readonly<{
  outboxFile: string
  mailApiUrl: string | undefined
  mailApiKey: string | undefined
  mailFrom: string
  mailAWebhookSecret: string | undefined
  mailBWebhookSecret: string | undefined
  telcoA: { apiUrl: string; accountSid: string; authToken: string } | undefined
  telcoACallerId: string | undefined
  allowPrivateProviderUrls: boolean
  providerResponseLimitBytes: number
  llmBaseUrl: string | undefined
  llmApiKey: string | undefined
  llmModel: string
  llmTimeoutMs: number
  simLlm: { firstTokenMs: number; tokenMs: number }
  speechApi: { url: string; apiKey: string; defaultVoiceId: string | undefined } | undefined
  /** The platform's streaming recogniser (Deepgram's protocol), or undefined: the offline one. */
  sttApi: { url: string; apiKey: string } | undefined
  storefront: {
    /** The app's credentials; undefined → the simulator. */
    app: { apiKey: string; apiSecret: string } | undefined
    platformDomain: string
    baseUrlOverride: string | undefined
  }
}>

/** The outbox simulator writes beside the embedded database unless told otherwise. */
export function providersConfig(e: ProvidersEnv & Pick<StorageEnv, "DATA_DIR">): ProvidersConfig {
  return {
    outboxFile: e.OUTBOX_FILE ?? join(e.DATA_DIR, "outbox.jsonl"),
    mailApiUrl: e.MAIL_API_URL?.replace(/\/+$/, ""),
    mailApiKey: e.MAIL_API_KEY,
    mailFrom: e.MAIL_FROM,
    mailAWebhookSecret: e.MAIL_A_WEBHOOK_SECRET,
    mailBWebhookSecret: e.MAIL_B_WEBHOOK_SECRET,
    telcoA:
      e.TELCO_A_API_URL && e.TELCO_A_ACCOUNT_SID && e.TELCO_A_AUTH_TOKEN
        ? {
            apiUrl: e.TELCO_A_API_URL.replace(/\/+$/, ""),
            accountSid: e.TELCO_A_ACCOUNT_SID,
            authToken: e.TELCO_A_AUTH_TOKEN,
          }
        : undefined,
    telcoACallerId: e.TELCO_A_CALLER_ID,
    allowPrivateProviderUrls: e.ALLOW_PRIVATE_PROVIDER_URLS,
    providerResponseLimitBytes: e.PROVIDER_RESPONSE_LIMIT_BYTES,
    llmBaseUrl: e.LLM_BASE_URL?.replace(/\/+$/, ""),
    llmApiKey: e.LLM_API_KEY,
    llmModel: e.LLM_MODEL,
    llmTimeoutMs: e.LLM_TIMEOUT_MS,
    simLlm: { firstTokenMs: e.SIM_LLM_FIRST_TOKEN_MS, tokenMs: e.SIM_LLM_TOKEN_MS },
    sttApi: e.STT_API_KEY
      ? { url: (e.STT_API_URL ?? "wss://api.deepgram.com").replace(/\/+$/, ""), apiKey: e.STT_API_KEY }
      : undefined,
    speechApi:
      e.SPEECH_API_URL && e.SPEECH_API_KEY
        ? {
            url: e.SPEECH_API_URL.replace(/\/+$/, ""),
            apiKey: e.SPEECH_API_KEY,
            defaultVoiceId: e.SPEECH_DEFAULT_VOICE_ID,
          }
        : undefined,
    storefront: {
      app:
        e.STOREFRONT_API_KEY && e.STOREFRONT_API_SECRET
          ? { apiKey: e.STOREFRONT_API_KEY, apiSecret: e.STOREFRONT_API_SECRET }
          : undefined,
      platformDomain: e.STOREFRONT_PLATFORM_DOMAIN,
      baseUrlOverride: e.STOREFRONT_BASE_URL_OVERRIDE?.replace(/\/+$/, ""),
    },
  }
}
