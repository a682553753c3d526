// The absolute base for links the server hands out: PUBLIC_BASE_URL when set (behind a proxy or
// CDN), else the Host the client used.
import type { Config } from "../src/config.js"

export function baseUrl(config: Pick<Config, "publicBaseUrl">, headers: Readonly<Record<string, string>>): string {
  if (config.publicBaseUrl !== undefined) return config.publicBaseUrl
  const host = headers["host"]
  return host !== undefined && /^[A-Za-z0-9.\-:[\]]+$/.test(host) ? `http://${host}` : ""
}
