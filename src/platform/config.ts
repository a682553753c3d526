// Process configuration: the environment parsed once by zod. A malformed value stops start-up
// with a message that names the variable; nothing else in the program reads process.env.
import { join } from "node:path"
import { z } from "zod"
import { DEFAULT_PGLITE_SHARED_BUFFERS, pgMemoryBytes, WASM_TIER_UP, type WasmTierUp } from "./pglite.options.js"

/**
 * true when `text` is exactly `bytes` bytes of canonical base64 (surrounding blanks ignored).
 * Buffer.from skips characters that are not base64: re-encoding catches a mangled key.
 */
export function isBase64Key(text: string, bytes: number): boolean {
  const s = text.trim()
  const key = Buffer.from(s, "base64")
  return key.length === bytes && key.toString("base64").replace(/=+$/, "") === s.replace(/=+$/, "")
}

const port = z.coerce.number().int().min(0).max(65535)
const positiveInt = z.coerce.number().int().positive()
const nonNegativeInt = z.coerce.number().int().min(0)
const optionalString = z
  .string()
  .transform((s) => s.trim())
  .pipe(z.string())
  .optional()
  .transform((s) => (s === undefined || s === "" ? undefined : s))

const Env = z.object({
  HOST: z.string().min(1).default("0.0.0.0"),
  PORT: port.default(8080),
  /** Postgres connection string; unset → embedded PGlite in DATA_DIR. */
  DATABASE_URL: optionalString.pipe(
    z
      .string()
      .regex(/^postgres(ql)?:\/\//, "must be a postgres:// URL")
      .optional(),
  ),
  DB_POOL_MAX: positiveInt.max(200).default(10),
  /** NATS server(s), comma-separated; unset → in-process bus. */
  NATS_URL: optionalString.pipe(
    z
      .string()
      .regex(/^(nats|tls|ws|wss):\/\//, "must be a nats:// URL")
      .optional(),
  ),
  /** Prefix for every bus subject of this deployment (share one NATS between deployments). */
  BUS_NAMESPACE: z
    .string()
    .regex(/^([A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*)?$/, "must be dot-separated tokens of letters, digits, _ and -")
    .default(""),
  DATA_DIR: z.string().min(1).default("./data"),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  /** Largest JSON (or other non-multipart) request body, in bytes. */
  BODY_LIMIT_BYTES: positiveInt.default(1024 * 1024),
  /** Largest multipart upload (audience CSVs, voice clips), in bytes. */
  UPLOAD_LIMIT_BYTES: positiveInt.default(50 * 1024 * 1024),
  /** How long shutdown waits for in-flight requests before closing what is left. */
  SHUTDOWN_TIMEOUT_MS: positiveInt.default(10_000),
  /** Absolute base for links the server hands out (sample MP3s, checkout pages). */
  PUBLIC_BASE_URL: optionalString.pipe(z.url().optional()),
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
  /** Origins allowed to send cookie-authenticated state changes (CSRF), comma-separated. */
  ALLOWED_ORIGINS: z
    .string()
    .default("")
    .transform((s) =>
      s
        .split(",")
        .map((o) => o.trim().replace(/\/+$/, ""))
        .filter((o) => o !== ""),
    )
    .pipe(z.array(z.url({ protocol: /^https?$/, error: "must be a comma-separated list of http(s) origins" }))),
  /** true → signup, OTP start and demo calls need a solved ALTCHA challenge in field `altcha`. */
  ALTCHA_REQUIRED: z
    .enum(["true", "false"])
    .default("false")
    .transform((v) => v === "true"),
  /** HMAC key for ALTCHA challenges; unset → derived from the deployment's generated secret. */
  ALTCHA_HMAC_KEY: optionalString.pipe(z.string().min(16, "must be at least 16 characters").optional()),
  /** Where the outbox mail simulator appends messages; default <DATA_DIR>/outbox.jsonl. */
  OUTBOX_FILE: optionalString,
  /** A real mail API (POST {MAIL_API_URL}/messages); unset → the outbox simulator. */
  MAIL_API_URL: optionalString.pipe(z.url().optional()),
  MAIL_API_KEY: optionalString,
  MAIL_FROM: z.string().default("Parley <no-reply@parley.local>"),
  /** Card gateway (USD checkouts): API base, secret key, webhook signing secret. */
  GW_CARD_API_URL: optionalString.pipe(z.url().optional()),
  GW_CARD_SECRET_KEY: optionalString,
  GW_CARD_WEBHOOK_SECRET: optionalString,
  /** UPI gateway (INR orders): API base, key id and secret, webhook signing secret. */
  GW_UPI_API_URL: optionalString.pipe(z.url().optional()),
  GW_UPI_KEY_ID: optionalString,
  GW_UPI_KEY_SECRET: optionalString,
  GW_UPI_WEBHOOK_SECRET: optionalString,
  /** The UPI gateway's browser checkout script, loaded by /billing/gw_upi/checkout. */
  GW_UPI_CHECKOUT_SCRIPT: optionalString.pipe(z.url({ protocol: /^https?$/ }).optional()),
  /** Signing secret of the generic payment webhook (X-SVC-Signature). */
  PAYMENT_WEBHOOK_SECRET: optionalString,
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
  ALLOW_PRIVATE_PROVIDER_URLS: z
    .enum(["true", "false"])
    .default("false")
    .transform((v) => v === "true"),
  /** Proxies whose X-Forwarded-Proto/Host are believed when rebuilding a signed webhook's URL (comma-separated IPs). */
  TRUSTED_PROXIES: z
    .string()
    .default("")
    .transform((s) =>
      s
        .split(",")
        .map((x) => x.trim())
        .filter((x) => x !== ""),
    ),
  /** An OpenAI-compatible API root including its version (…/v1); unset → the language-model simulator. */
  LLM_BASE_URL: optionalString.pipe(z.url().optional()),
  /** Bearer key for LLM_BASE_URL; optional, since local model servers often need none. */
  LLM_API_KEY: optionalString,
  LLM_MODEL: z.string().trim().min(1).default("gpt-4o-mini"),
  /** Limit for each attempt at a language-model call (the adapter retries within its own budget). */
  LLM_TIMEOUT_MS: positiveInt.default(20_000),
  /**
   * An ElevenLabs-style speech API root (https://api.elevenlabs.io; paths /v1/…) and its key (sent as
   * xi-api-key): voice cloning and cloned voices' speech. Unset (either) → the speech simulator.
   */
  SPEECH_API_URL: optionalString.pipe(z.url().optional()),
  SPEECH_API_KEY: optionalString,
  /** The vendor voice that speaks the catalogue personas; unset → the simulator speaks them. */
  SPEECH_DEFAULT_VOICE_ID: optionalString,
  /** Multiplies the telephony simulator's ring and talk times and the dialer's retry backoff (tests: 0.01). */
  SIM_TIME_SCALE: optionalString.pipe(z.coerce.number<string>().min(0, "must be a non-negative number").optional()),
  /** "any" lifts every workflow's calling window (test harnesses); unset → the windows apply. */
  CALLING_HOURS: optionalString.pipe(z.enum(["any"], { error: 'must be "any" or unset' }).optional()),
  /** How long a runtime process owns a run without renewing; a dead owner's runs move after this. */
  RUN_LEASE_MS: positiveInt.min(500).max(300_000).default(15_000),
  /** How often runtime processes look for runs that need an owner. */
  RUN_CLAIM_INTERVAL_MS: positiveInt.max(60_000).default(1_000),
  /**
   * Deployment-wide ceilings on calls started per second, per carrier account and per workspace:
   * the limits themselves are the account's (telco_a: 3/s) and the workspace plan's (src/dialing/).
   */
  DIALER_CPS_PER_CARRIER: z.coerce.number().positive().max(100_000).default(1000),
  DIALER_CPS_PER_TENANT: z.coerce.number().positive().max(100_000).default(1000),
  /** Ceilings on calls in flight at once, per workflow and per workspace (below the plan's, they win). */
  DIALER_MAX_CONCURRENT_PER_WORKFLOW: positiveInt.default(10_000),
  DIALER_MAX_CONCURRENT_PER_TENANT: positiveInt.default(10_000),
  /** Attempts per target for busy / no answer / carrier failure, and the first retry's backoff. */
  DIALER_MAX_ATTEMPTS: positiveInt.max(10).default(3),
  DIALER_RETRY_BACKOFF_MS: positiveInt.default(30 * 60_000),
  /** How long a call waits for a human's decision before the agent moves on (scaled by SIM_TIME_SCALE). */
  APPROVAL_HOLD_MS: positiveInt.default(30_000),
  APPROVAL_HOLD_FLOOR_MS: nonNegativeInt.default(20_000),
  /** Patch-in (POST /api/internal/outreach/patch-in): the operator dialed into the conference by default. */
  OPERATOR_NUMBER: z
    .string()
    .regex(/^\+[1-9]\d{6,14}$/)
    .optional(),
  /** How long a proposal stays decidable (not scaled). */
  APPROVAL_TTL_MS: positiveInt.default(24 * 3_600_000),
  /**
   * Post-call analysis (runtime/workers/analysis-worker.ts): how often a runtime process looks for ended
   * calls to analyse, how many it analyses at once, how long one attempt may take (the lease is
   * twice that), how many attempts a call gets, and the first retry's delay (doubling, at most 10 min).
   */
  ANALYSIS_POLL_MS: positiveInt.default(1_000),
  ANALYSIS_CONCURRENCY: positiveInt.max(256).default(16),
  ANALYSIS_TIMEOUT_MS: positiveInt.default(60_000),
  ANALYSIS_MAX_ATTEMPTS: positiveInt.max(20).default(5),
  ANALYSIS_RETRY_BACKOFF_MS: positiveInt.default(5_000),
  /**
   * A simulation campaign's question (src/rehearsals/): how long, in real time whatever the campaign's time
   * scale, its simulated call holds for the operator's answer; the question expires with it.
   */
  SIM_APPROVAL_HOLD_MS: positiveInt.default(30 * 60_000),
  /** Turn streams: a comment this often when nothing else was sent, closed after this long without a turn. */
  SSE_KEEPALIVE_MS: positiveInt.default(15_000),
  SSE_IDLE_TIMEOUT_MS: positiveInt.default(30 * 60_000),
  /** A turn-stream client with more than this unsent is dropped (it stopped reading). */
  SSE_MAX_BUFFER_BYTES: positiveInt.default(1024 * 1024),
  /**
   * Event streams one API key or session, and one workspace, may hold open at once in each api
   * process (429 RATE_LIMITED past either; api/pipeline/stream-caps.ts).
   */
  SSE_MAX_STREAMS_PER_KEY: positiveInt.max(1_000_000).default(100),
  SSE_MAX_STREAMS_PER_WORKSPACE: positiveInt.max(1_000_000).default(500),
  /**
   * "stub" enables the stub payment gateway (unsigned settlement: for trying Parley, never for
   * production); "gateways" allows only the real ones. Unset → "stub" on the embedded database
   * (no DATABASE_URL), "gateways" otherwise. The stub is off whenever a real gateway is configured.
   */
  PAYMENTS: optionalString.pipe(z.enum(["stub", "gateways"], { error: 'must be "stub" or "gateways"' }).optional()),
  /** Hosts (host[:port]) whose Host header may stand in for PUBLIC_BASE_URL in links we hand out. */
  ALLOWED_HOSTS: z
    .string()
    .default("")
    .transform((s) =>
      s
        .split(",")
        .map((x) => x.trim().toLowerCase())
        .filter((x) => x !== ""),
    ),
  /** Failed OTP guesses per address, and per client IP, in an hour before further guesses are refused. */
  OTP_GUESSES_PER_ADDRESS_HOUR: positiveInt.max(1000).default(10),
  OTP_GUESSES_PER_IP_HOUR: positiveInt.max(100_000).default(50),
  /** Signups from one client IP in an hour. */
  SIGNUPS_PER_IP_HOUR: positiveInt.max(1_000_000).default(10),
  /** Anonymous opening-line previews from one client IP in an hour (signed-in workspaces are not counted here). */
  PREVIEWS_ANON_PER_IP_HOUR: positiveInt.max(1_000_000).default(30),
  /** Synthesised preview clips not played for this many days are deleted. */
  PREVIEW_CLIP_TTL_DAYS: positiveInt.max(3650).default(30),
  /**
   * The public demo (POST /demo/call): calls one client IP, and one phone number, may ask for in a
   * day (429 with Retry-After past either; the 7-day cool-down also holds a number after a call).
   */
  DEMO_CALLS_PER_IP_DAY: positiveInt.max(1_000_000).default(5),
  DEMO_CALLS_PER_NUMBER_DAY: positiveInt.max(1000).default(2),
  /** How long a demo call's feed token (GET /demo/feed) stays valid. */
  DEMO_FEED_TTL_SECONDS: positiveInt.min(60).max(86_400).default(3600),
  /** Longest demo call (the demo rule book's max_call_seconds). */
  DEMO_MAX_CALL_SECONDS: positiveInt.min(30).max(120).default(120),
  /** Anonymous demo voice clones (POST /demo/clone-voice): how long one lives, and how many an IP may make a day. */
  DEMO_CLONE_TTL_MINUTES: positiveInt.max(7 * 24 * 60).default(60),
  DEMO_CLONES_PER_IP_DAY: positiveInt.max(1_000_000).default(5),
  /** Longest text POST /demo/voice-preview speaks (422 past it). */
  DEMO_PREVIEW_TEXT_MAX_CHARS: positiveInt.min(200).max(500).default(300),
  /**
   * Multiplies the webhook retry schedule (1 min … 24 h) and the 5 days after which a failing
   * endpoint is disabled (tests: 0.00003).
   */
  WEBHOOK_RETRY_SCALE: z.coerce.number().positive().max(1000).default(1),
  /** Longest one webhook attempt may take, from connecting to the end of the answer. */
  WEBHOOK_TIMEOUT_MS: positiveInt.max(120_000).default(10_000),
  /** Largest answer read from any provider's HTTP API (model, telephony, mail, payments, tenant URLs). */
  PROVIDER_RESPONSE_LIMIT_BYTES: positiveInt.default(2 * 1024 * 1024),
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
  /** Longest one SQL statement may run before Postgres cancels it. */
  DB_STATEMENT_TIMEOUT_MS: positiveInt.max(3_600_000).default(30_000),
  /** The embedded database's shared_buffers (128kB–1GB), all of it resident from start; PGlite's own is 128MB. */
  PGLITE_SHARED_BUFFERS: z
    .string()
    .trim()
    .refine((s) => {
      const bytes = pgMemoryBytes(s)
      return bytes !== undefined && bytes >= 128 * 1024 && bytes <= 1024 ** 3
    }, "must be a size from 128kB to 1GB, such as 16MB")
    .default(DEFAULT_PGLITE_SHARED_BUFFERS),
  /** How V8 compiles the embedded database's WASM: hot (default), off (least memory, slower SQL), v8. */
  PGLITE_WASM_TIER_UP: z.enum(WASM_TIER_UP, { error: 'must be "hot", "off" or "v8"' }).default("hot"),
  /** GET /metrics on its own port (any path; keep the port private); unset → no metrics listener. */
  METRICS_PORT: optionalString.pipe(z.coerce.number<string>().int().min(0).max(65535).optional()),
  /** Bearer token for /metrics: required on the public port (unset → 404 there), and on METRICS_PORT when set. */
  METRICS_TOKEN: optionalString.pipe(z.string().min(16, "must be at least 16 characters").optional()),
  /** Requests per second one workspace may make, across every api process; unset → no limit. */
  RATE_LIMIT_RPS: optionalString.pipe(z.coerce.number<string>().int().positive().max(1_000_000).optional()),
})

export type Config = Readonly<{
  host: string
  port: number
  databaseUrl: string | undefined
  dbPoolMax: number
  natsUrl: string | undefined
  busNamespace: string
  dataDir: string
  logLevel: z.infer<typeof Env>["LOG_LEVEL"]
  bodyLimitBytes: number
  uploadLimitBytes: number
  shutdownTimeoutMs: number
  publicBaseUrl: string | undefined
  systemKey: string | undefined
  jwtSecret: string | undefined
  credentialsMasterKey: string | undefined
  keyUsageFlushMs: number
  allowedOrigins: readonly string[]
  altchaRequired: boolean
  altchaHmacKey: string | undefined
  outboxFile: string
  mailApiUrl: string | undefined
  mailApiKey: string | undefined
  mailFrom: string
  gwCard: { apiUrl: string; secretKey: string } | undefined
  gwCardWebhookSecret: string | undefined
  gwUpi: { apiUrl: string; keyId: string; keySecret: string } | undefined
  gwUpiWebhookSecret: string | undefined
  gwUpiCheckoutScript: string | undefined
  paymentWebhookSecret: string | undefined
  mailAWebhookSecret: string | undefined
  mailBWebhookSecret: string | undefined
  telcoA: { apiUrl: string; accountSid: string; authToken: string } | undefined
  telcoACallerId: string | undefined
  trustedProxies: readonly string[]
  allowPrivateProviderUrls: boolean
  llmBaseUrl: string | undefined
  llmApiKey: string | undefined
  llmModel: string
  llmTimeoutMs: number
  speechApi: { url: string; apiKey: string; defaultVoiceId: string | undefined } | undefined
  simTimeScale: number
  callingHoursAny: boolean
  runLeaseMs: number
  runClaimIntervalMs: number
  dialer: {
    cpsPerCarrier: number
    cpsPerTenant: number
    maxConcurrentPerWorkflow: number
    maxConcurrentPerTenant: number
    maxAttempts: number
    retryBackoffMs: number
  }
  approvalHoldMs: number
  /** The least real time a held callee waits, whatever SIM_TIME_SCALE (0: scaled all the way). */
  approvalHoldFloorMs: number
  operatorNumber: string | undefined
  approvalTtlMs: number
  analysis: { pollMs: number; concurrency: number; timeoutMs: number; maxAttempts: number; retryBackoffMs: number }
  simApprovalHoldMs: number
  sse: { keepaliveMs: number; idleMs: number; maxBufferedBytes: number }
  /** Event streams open at once per API key or session, and per workspace, in each api process. */
  sseCaps: { perCredential: number; perWorkspace: number }
  /** Whether the unsigned stub gateway may settle top-ups (see PAYMENTS). */
  paymentsMode: "stub" | "gateways"
  allowedHosts: readonly string[]
  otpGuessesPerAddressHour: number
  otpGuessesPerIpHour: number
  signupsPerIpHour: number
  previewsAnonPerIpHour: number
  previewClipTtlDays: number
  demo: {
    callsPerIpDay: number
    callsPerNumberDay: number
    feedTtlSeconds: number
    maxCallSeconds: number
    cloneTtlMinutes: number
    clonesPerIpDay: number
    previewTextMaxChars: number
  }
  providerResponseLimitBytes: number
  webhookRetryScale: number
  webhookTimeoutMs: number
  dbStatementTimeoutMs: number
  /** The embedded database's memory settings (PGLITE_*). */
  pglite: { sharedBuffers: string; wasmTierUp: WasmTierUp }
  metricsPort: number | undefined
  metricsToken: string | undefined
  rateLimitRps: number | undefined
  storefront: {
    /** The app's credentials; undefined → the simulator. */
    app: { apiKey: string; apiSecret: string } | undefined
    platformDomain: string
    baseUrlOverride: string | undefined
  }
}>

export class ConfigError extends Error {
  override readonly name = "ConfigError"
}

/** Parses the environment; throws ConfigError naming every malformed variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = Env.safeParse(env)
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`)
    throw new ConfigError(`invalid configuration:\n${lines.join("\n")}`)
  }
  const e = parsed.data
  if (e.STOREFRONT_BASE_URL_OVERRIDE !== undefined && !e.ALLOW_PRIVATE_PROVIDER_URLS)
    throw new ConfigError(
      "invalid configuration:\n  STOREFRONT_BASE_URL_OVERRIDE: needs ALLOW_PRIVATE_PROVIDER_URLS=true (tests only)",
    )
  return {
    host: e.HOST,
    port: e.PORT,
    databaseUrl: e.DATABASE_URL,
    dbPoolMax: e.DB_POOL_MAX,
    natsUrl: e.NATS_URL,
    busNamespace: e.BUS_NAMESPACE,
    dataDir: e.DATA_DIR,
    logLevel: e.LOG_LEVEL,
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    uploadLimitBytes: e.UPLOAD_LIMIT_BYTES,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    publicBaseUrl: e.PUBLIC_BASE_URL?.replace(/\/+$/, ""),
    systemKey: e.SYSTEM_KEY,
    jwtSecret: e.JWT_SECRET,
    credentialsMasterKey: e.CREDENTIALS_MASTER_KEY,
    keyUsageFlushMs: e.KEY_USAGE_FLUSH_MS,
    allowedOrigins: e.ALLOWED_ORIGINS,
    altchaRequired: e.ALTCHA_REQUIRED,
    altchaHmacKey: e.ALTCHA_HMAC_KEY,
    outboxFile: e.OUTBOX_FILE ?? join(e.DATA_DIR, "outbox.jsonl"),
    mailApiUrl: e.MAIL_API_URL?.replace(/\/+$/, ""),
    mailApiKey: e.MAIL_API_KEY,
    mailFrom: e.MAIL_FROM,
    // A gateway is live only with everything it needs; otherwise top-ups use the stub gateway.
    gwCard:
      e.GW_CARD_API_URL && e.GW_CARD_SECRET_KEY
        ? { apiUrl: e.GW_CARD_API_URL.replace(/\/+$/, ""), secretKey: e.GW_CARD_SECRET_KEY }
        : undefined,
    gwCardWebhookSecret: e.GW_CARD_WEBHOOK_SECRET,
    gwUpi:
      e.GW_UPI_API_URL && e.GW_UPI_KEY_ID && e.GW_UPI_KEY_SECRET
        ? { apiUrl: e.GW_UPI_API_URL.replace(/\/+$/, ""), keyId: e.GW_UPI_KEY_ID, keySecret: e.GW_UPI_KEY_SECRET }
        : undefined,
    gwUpiWebhookSecret: e.GW_UPI_WEBHOOK_SECRET,
    gwUpiCheckoutScript: e.GW_UPI_CHECKOUT_SCRIPT,
    paymentWebhookSecret: e.PAYMENT_WEBHOOK_SECRET,
    mailAWebhookSecret: e.MAIL_A_WEBHOOK_SECRET,
    mailBWebhookSecret: e.MAIL_B_WEBHOOK_SECRET,
    telcoACallerId: e.TELCO_A_CALLER_ID,
    trustedProxies: e.TRUSTED_PROXIES,
    allowPrivateProviderUrls: e.ALLOW_PRIVATE_PROVIDER_URLS,
    telcoA:
      e.TELCO_A_API_URL && e.TELCO_A_ACCOUNT_SID && e.TELCO_A_AUTH_TOKEN
        ? {
            apiUrl: e.TELCO_A_API_URL.replace(/\/+$/, ""),
            accountSid: e.TELCO_A_ACCOUNT_SID,
            authToken: e.TELCO_A_AUTH_TOKEN,
          }
        : undefined,
    llmBaseUrl: e.LLM_BASE_URL?.replace(/\/+$/, ""),
    llmApiKey: e.LLM_API_KEY,
    llmModel: e.LLM_MODEL,
    llmTimeoutMs: e.LLM_TIMEOUT_MS,
    speechApi:
      e.SPEECH_API_URL && e.SPEECH_API_KEY
        ? {
            url: e.SPEECH_API_URL.replace(/\/+$/, ""),
            apiKey: e.SPEECH_API_KEY,
            defaultVoiceId: e.SPEECH_DEFAULT_VOICE_ID,
          }
        : undefined,
    simTimeScale: e.SIM_TIME_SCALE ?? 1,
    callingHoursAny: e.CALLING_HOURS === "any",
    runLeaseMs: e.RUN_LEASE_MS,
    runClaimIntervalMs: e.RUN_CLAIM_INTERVAL_MS,
    dialer: {
      cpsPerCarrier: e.DIALER_CPS_PER_CARRIER,
      cpsPerTenant: e.DIALER_CPS_PER_TENANT,
      maxConcurrentPerWorkflow: e.DIALER_MAX_CONCURRENT_PER_WORKFLOW,
      maxConcurrentPerTenant: e.DIALER_MAX_CONCURRENT_PER_TENANT,
      maxAttempts: e.DIALER_MAX_ATTEMPTS,
      retryBackoffMs: e.DIALER_RETRY_BACKOFF_MS,
    },
    approvalHoldMs: e.APPROVAL_HOLD_MS,
    approvalHoldFloorMs: e.APPROVAL_HOLD_FLOOR_MS,
    operatorNumber: e.OPERATOR_NUMBER,
    approvalTtlMs: e.APPROVAL_TTL_MS,
    analysis: {
      pollMs: e.ANALYSIS_POLL_MS,
      concurrency: e.ANALYSIS_CONCURRENCY,
      timeoutMs: e.ANALYSIS_TIMEOUT_MS,
      maxAttempts: e.ANALYSIS_MAX_ATTEMPTS,
      retryBackoffMs: e.ANALYSIS_RETRY_BACKOFF_MS,
    },
    simApprovalHoldMs: e.SIM_APPROVAL_HOLD_MS,
    sse: { keepaliveMs: e.SSE_KEEPALIVE_MS, idleMs: e.SSE_IDLE_TIMEOUT_MS, maxBufferedBytes: e.SSE_MAX_BUFFER_BYTES },
    sseCaps: { perCredential: e.SSE_MAX_STREAMS_PER_KEY, perWorkspace: e.SSE_MAX_STREAMS_PER_WORKSPACE },
    paymentsMode: e.PAYMENTS ?? (e.DATABASE_URL === undefined ? "stub" : "gateways"),
    allowedHosts: e.ALLOWED_HOSTS,
    otpGuessesPerAddressHour: e.OTP_GUESSES_PER_ADDRESS_HOUR,
    otpGuessesPerIpHour: e.OTP_GUESSES_PER_IP_HOUR,
    signupsPerIpHour: e.SIGNUPS_PER_IP_HOUR,
    previewsAnonPerIpHour: e.PREVIEWS_ANON_PER_IP_HOUR,
    previewClipTtlDays: e.PREVIEW_CLIP_TTL_DAYS,
    demo: {
      callsPerIpDay: e.DEMO_CALLS_PER_IP_DAY,
      callsPerNumberDay: e.DEMO_CALLS_PER_NUMBER_DAY,
      feedTtlSeconds: e.DEMO_FEED_TTL_SECONDS,
      maxCallSeconds: e.DEMO_MAX_CALL_SECONDS,
      cloneTtlMinutes: e.DEMO_CLONE_TTL_MINUTES,
      clonesPerIpDay: e.DEMO_CLONES_PER_IP_DAY,
      previewTextMaxChars: e.DEMO_PREVIEW_TEXT_MAX_CHARS,
    },
    providerResponseLimitBytes: e.PROVIDER_RESPONSE_LIMIT_BYTES,
    webhookRetryScale: e.WEBHOOK_RETRY_SCALE,
    webhookTimeoutMs: e.WEBHOOK_TIMEOUT_MS,
    dbStatementTimeoutMs: e.DB_STATEMENT_TIMEOUT_MS,
    pglite: { sharedBuffers: e.PGLITE_SHARED_BUFFERS, wasmTierUp: e.PGLITE_WASM_TIER_UP },
    metricsPort: e.METRICS_PORT,
    metricsToken: e.METRICS_TOKEN,
    rateLimitRps: e.RATE_LIMIT_RPS,
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
