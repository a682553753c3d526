// The absolute base for links the server hands out: PUBLIC_BASE_URL when set, else the Host the
// client used, but only a Host we trust (ALLOWED_HOSTS, or a loopback name), since a link built
// from an attacker's Host header would send a victim's browser (and its tokens) to the attacker.
import type { Config } from "../src/platform/config.js"

const HOST = /^[A-Za-z0-9.\-:[\]]+$/
const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])(:\d{1,5})?$/i

/** The base every link should use, or undefined when neither PUBLIC_BASE_URL nor a trusted Host gives one. */
export function trustedBaseUrl(
  config: Pick<Config, "publicBaseUrl" | "allowedHosts">,
  headers: Readonly<Record<string, string>>,
): string | undefined {
  if (config.publicBaseUrl !== undefined) return config.publicBaseUrl
  const host = headers["host"]?.toLowerCase()
  if (host === undefined || !HOST.test(host)) return undefined
  return LOOPBACK.test(host) || config.allowedHosts.includes(host) ? `http://${host}` : undefined
}

/** As trustedBaseUrl, but "" (links relative to wherever the client is) when there is none. */
export function baseUrl(
  config: Pick<Config, "publicBaseUrl" | "allowedHosts">,
  headers: Readonly<Record<string, string>>,
): string {
  return trustedBaseUrl(config, headers) ?? ""
}
