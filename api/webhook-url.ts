// The full URL a provider called, for signatures that cover it: the forwarded scheme and host when
// the request came through a trusted proxy (TRUSTED_PROXIES), else PUBLIC_BASE_URL, else the Host.
import type { Config } from "../src/platform/config.js"
import { baseUrl } from "./base-url.js"

const HOST = /^[A-Za-z0-9.\-:[\]]+$/

export function calledUrl(
  config: Pick<Config, "publicBaseUrl" | "trustedProxies" | "allowedHosts">,
  req: { headers: Readonly<Record<string, string>>; remoteAddress: string; path: string; rawQuery: string },
): string {
  const query = req.rawQuery === "" ? "" : `?${req.rawQuery}`
  const proto = req.headers["x-forwarded-proto"]?.split(",")[0]?.trim()
  const host = req.headers["x-forwarded-host"]?.split(",")[0]?.trim()
  if (
    config.trustedProxies.includes(req.remoteAddress) &&
    (proto === "http" || proto === "https") &&
    host !== undefined &&
    HOST.test(host)
  )
    return `${proto}://${host}${req.path}${query}`
  return `${baseUrl(config, req.headers)}${req.path}${query}`
}
