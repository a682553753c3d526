// The storefront platform adapter this deployment uses: the HTTP one when STOREFRONT_API_KEY and
// STOREFRONT_API_SECRET are set, else the demo shop simulator.
import { makeHttpStorefront, type StorefrontConfig } from "./storefront/http.storefront.js"
import { makeSimStorefront } from "./storefront/sim.storefront.js"
import type { StorefrontAdapter } from "./storefront/storefront.interface.js"

/** The adapter for this deployment's configuration. */
export function storefrontAdapterFor(config: StorefrontConfig): StorefrontAdapter {
  return config.storefront.app === undefined ? makeSimStorefront() : makeHttpStorefront(config)
}
