// Process configuration: the environment parsed once by zod. A malformed value stops start-up
// with a message that names the variable; nothing else in the program reads process.env.
// Each concern's variables and its part of Config are in config/; this file joins them.
import { z } from "zod"
import { type CallingConfig, callingConfig, callingEnv } from "./config/calling.js"
import { type PaymentsConfig, paymentsConfig, paymentsEnv } from "./config/payments.js"
import { type ProvidersConfig, providersConfig, providersEnv } from "./config/providers.js"
import { missingS3Settings, type RecordingsConfig, recordingsConfig, recordingsEnv } from "./config/recordings.js"
import { type SecurityConfig, securityConfig, securityEnv } from "./config/security.js"
import { type ServerConfig, serverConfig, serverEnv } from "./config/server.js"
import { type StorageConfig, storageConfig, storageEnv } from "./config/storage.js"

export { isBase64Key } from "./config/fields.js"

// One object, so one parse reports every malformed variable at once.
const Env = z.object({
  ...serverEnv,
  ...storageEnv,
  ...securityEnv,
  ...providersEnv,
  ...paymentsEnv,
  ...callingEnv,
  ...recordingsEnv,
})

export type Config = Readonly<
  ServerConfig & StorageConfig & SecurityConfig & ProvidersConfig & PaymentsConfig & CallingConfig & RecordingsConfig
>

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
  const missingS3 = missingS3Settings(e)
  if (missingS3.length > 0)
    throw new ConfigError(
      `invalid configuration:\n${missingS3.map((v) => `  ${v}: required when RECORDING_STORE=s3`).join("\n")}`,
    )
  return {
    ...serverConfig(e),
    ...storageConfig(e),
    ...securityConfig(e),
    ...providersConfig(e),
    ...paymentsConfig(e),
    ...callingConfig(e),
    ...recordingsConfig(e),
  }
}
