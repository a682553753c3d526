// Where a person opens the operator console, as the server prints it at start-up: PUBLIC_BASE_URL's
// /console when set, else the address the server listens on, written as a browser takes it.

export interface ConsoleUrlInput {
  /** PUBLIC_BASE_URL, if set (with or without a trailing slash). */
  readonly publicBaseUrl: string | undefined
  /** HOST: an address or name the server listens on; a wildcard means every interface. */
  readonly host: string
  readonly port: number
}

/** The console's URL: `<base>/console`, the base never ending in "/", an IPv6 address in brackets. */
export function consoleUrl(o: ConsoleUrlInput): string {
  if (o.publicBaseUrl !== undefined && o.publicBaseUrl.trim() !== "")
    return `${o.publicBaseUrl.trim().replace(/\/+$/, "")}/console`
  return `http://${hostForUrl(o.host)}:${o.port}/console`
}

/** A listening address as a URL's host: wildcards become localhost; IPv6 goes in brackets (RFC 3986). */
function hostForUrl(host: string): string {
  const h = host.trim()
  if (h === "" || h === "0.0.0.0" || h === "::" || h === "[::]") return "localhost"
  if (h.startsWith("[")) return h
  // A zone id (fe80::1%eth0) is written %25 inside the brackets (RFC 6874).
  return h.includes(":") ? `[${h.replace(/%/g, "%25")}]` : h
}
