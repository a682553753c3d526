// The connected shop's customers as data-source rows, for the data-fetch worker: the stored token
// decrypted and the deployment's storefront adapter (src/providers/Storefront.ts) asked.
import { credentialCryptoFor } from "../onboarding/Credentials.js"
import type { Config } from "../platform/config.js"
import type { Sql, Tx } from "../platform/Db.js"
import { storefrontAdapterFor } from "../providers/Storefront.js"
import type { StorefrontConfig } from "../providers/storefront/http.storefront.js"
import { getConnection } from "./storefront.repo.js"

/** The AAD the token is encrypted under, as provider credentials are (tenant, "provider"). */
export const TOKEN_AAD_PROVIDER = "storefront"

/**
 * The workspace's shop's customers, one flat object per customer. Rejects with an Error whose
 * message says why (not connected, token unreadable, the shop refused or could not be reached):
 * the fetch worker stores it as the source's error.
 */
export async function storefrontRows(
  sql: Sql | Tx,
  config: StorefrontConfig & Pick<Config, "credentialsMasterKey">,
  tenantId: number,
): Promise<Record<string, unknown>[]> {
  const conn = await getConnection(sql, tenantId)
  if (conn === undefined) throw new Error("the storefront is not connected (connect it with GET /storefront/install)")
  const crypto = credentialCryptoFor(config)
  if (crypto === undefined) throw new Error("the storefront token cannot be read: no CREDENTIALS_MASTER_KEY configured")
  const token = crypto.decrypt(conn.access_token_enc, { tenantId, provider: TOKEN_AAD_PROVIDER })
  const customers = await storefrontAdapterFor(config).customers(conn.shop, token)
  return customers.map((c) => ({ ...c }))
}
