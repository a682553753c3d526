// Tenants' provider credentials for the runtime: the decrypted credential a byok tenant's calls and
// generations use (validated, tenant in byok mode), as a plain function and as an Effect service.
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import type { Config } from "../platform/config.js"
import { Db, type Sql, type Tx } from "../platform/Db.js"
import { telcoAccountResolver } from "../providers/accounts.js"
import { type CredentialCrypto, makeCredentialCrypto } from "./credentials.crypto.js"
import { activeCredentialRow } from "./onboarding.repo.js"
import type { ProviderId } from "./providers.catalogue.js"

export { type CredentialCrypto, makeCredentialCrypto } from "./credentials.crypto.js"

export interface ActiveCredential {
  readonly provider: ProviderId
  /** telco_a: the account SID; telco_b: the account id; null for providers without one. */
  readonly primaryId: string | null
  readonly secret: string
  /** The catalogue's extra fields as saved (base_url, model, api_base_url, caller_id, voice_map). */
  readonly extra: Readonly<Record<string, unknown>>
}

/**
 * The tenant's credential for `provider` when the tenant is in byok mode and the credential is
 * validated; undefined otherwise (the caller then uses the platform's account). Without a crypto
 * (no master key) nothing can have been saved, so undefined. Throws CredentialDecryptError when
 * the stored value does not authenticate (altered row, or another master key): loud on purpose.
 */
export async function activeCredential(
  sql: Sql | Tx,
  crypto: CredentialCrypto | undefined,
  tenantId: number,
  provider: ProviderId,
): Promise<ActiveCredential | undefined> {
  if (crypto === undefined) return undefined
  const row = await activeCredentialRow(sql, tenantId, provider)
  if (row === undefined) return undefined
  return {
    provider,
    primaryId: row.primary_id,
    secret: crypto.decrypt(row.secret_enc, { tenantId, provider }),
    extra: row.extra,
  }
}

let cached: { readonly key: string; readonly crypto: CredentialCrypto } | undefined

/** The crypto for the configured master key (built once per key), or undefined when none is set. */
export function credentialCryptoFor(config: Pick<Config, "credentialsMasterKey">): CredentialCrypto | undefined {
  const key = config.credentialsMasterKey
  if (key === undefined) return undefined
  if (cached?.key !== key) cached = { key, crypto: makeCredentialCrypto(key) }
  return cached.crypto
}

export interface CredentialsService {
  /** Undefined when CREDENTIALS_MASTER_KEY is unset. */
  readonly crypto: CredentialCrypto | undefined
  /** activeCredential against the deployment's database and key. */
  active(tenantId: number, provider: ProviderId): Promise<ActiveCredential | undefined>
  /**
   * The tenant's own telco_a account in the shape numbers' TelcoAccountResolver wants; its API
   * root is the credential's extra.api_base_url, else the platform's TELCO_A_API_URL. Undefined
   * when there is no active credential or no API root to reach it at.
   */
  telcoAAccount(tenantId: number): Promise<{ sid: string; token: string; apiUrl: string } | undefined>
}

export class Credentials extends Context.Tag("parley/Credentials")<Credentials, CredentialsService>() {}

export const CredentialsLive: Layer.Layer<Credentials, never, AppConfig | Db> = Layer.effect(
  Credentials,
  Effect.gen(function* () {
    const config = yield* AppConfig
    const { sql } = yield* Db
    const crypto = credentialCryptoFor(config)
    const active = (tenantId: number, provider: ProviderId) => activeCredential(sql, crypto, tenantId, provider)
    return {
      crypto,
      active,
      telcoAAccount: telcoAccountResolver({ active }, config),
    }
  }),
)
