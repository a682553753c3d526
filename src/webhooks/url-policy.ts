// Which URLs a webhook endpoint may name, checked when it is saved: https to hosts that resolve only
// to public addresses. Each delivery is checked again when it connects (the guarded agent of
// src/providers/outbound.ts), since DNS may answer differently by then.
import { isIP } from "node:net"
import { type AddressPolicy, addressAllowed, lookupHost, RESOLVE_DEADLINE_MS } from "../providers/outbound.js"

export const WEBHOOK_URL_MAX = 2048

export interface WebhookUrlPolicy {
  /** ALLOW_PRIVATE_PROVIDER_URLS: loopback receivers allowed, over http too (tests, local development). */
  readonly allowPrivateProviderUrls: boolean
}

/** Why a URL may not be saved. */
export interface UrlRefusal {
  /** Said on the `url` field: never an address a name resolved to (an internal DNS answer). */
  readonly reason: string
  /** The non-public address the host resolved to, for the server's log only. */
  readonly address?: string
}

// Loopback only, not every private range: the setting exists so a test or a developer can receive on
// their own machine, not to open the platform's internal network to a workspace.
const isLoopbackHost = (hostname: string): boolean => {
  const bare = hostname.replace(/^\[|\]$/g, "").toLowerCase()
  if (bare === "localhost" || bare.endsWith(".localhost")) return true
  if (isIP(bare) === 4) return bare.startsWith("127.")
  return bare === "::1" || /^::ffff:127\./.test(bare)
}

/** undefined when the URL may be saved; else why not. */
export async function webhookUrlRefusal(url: string, policy: WebhookUrlPolicy): Promise<UrlRefusal | undefined> {
  const refuse = (reason: string, address?: string): UrlRefusal => ({
    reason,
    ...(address !== undefined && { address }),
  })
  if (url.length > WEBHOOK_URL_MAX) return refuse(`must be at most ${WEBHOOK_URL_MAX} characters`)
  let u: URL
  try {
    u = new URL(url)
  } catch {
    return refuse("must be an absolute URL")
  }
  // Credentials in a URL would be shown by every GET of the endpoint; receivers authenticate us by the signature.
  if (u.username !== "" || u.password !== "") return refuse("must not carry a user name or password")
  const loopback = policy.allowPrivateProviderUrls && isLoopbackHost(u.hostname)
  if (u.protocol === "http:" && !loopback)
    return refuse(
      policy.allowPrivateProviderUrls ? "must be an https URL (http only to a loopback host)" : "must be an https URL",
    )
  if (u.protocol !== "https:" && u.protocol !== "http:") return refuse("must be an https URL")
  if (loopback) return undefined
  const host = u.hostname.replace(/^\[|\]$/g, "")
  // Bounded: a name server that never answers must not hold the request (and its connection) open.
  const found = await lookupHost(host)
  if (found.timedOut) return refuse(`names a host that did not resolve within ${RESOLVE_DEADLINE_MS / 1000} s`)
  if (found.addresses.length === 0) return refuse(`names a host that does not resolve (${host})`)
  const allowed: AddressPolicy = policy.allowPrivateProviderUrls ? "public_or_loopback" : "public"
  const inner = found.addresses.find((a) => !addressAllowed(a, allowed))
  if (inner === undefined) return undefined
  // The same refusal whichever address it was, and whether or not the host is a name.
  return refuse(
    isIP(host) !== 0
      ? "must name a public address"
      : `must name a host with public addresses only (${host} resolves to a non-public address)`,
    inner,
  )
}
