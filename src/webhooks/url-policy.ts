// Which URLs a webhook endpoint may name, checked when it is saved: https to hosts that resolve only
// to public addresses. Each delivery is checked again when it connects (the guarded agent of
// src/providers/outbound.ts), since DNS may answer differently by then.
import { isIP } from "node:net"
import { privateUrlReason } from "../onboarding/public-url.js"

export const WEBHOOK_URL_MAX = 2048
const RESOLVE_TIMEOUT_MS = 5_000

export interface WebhookUrlPolicy {
  /** ALLOW_PRIVATE_PROVIDER_URLS: loopback receivers allowed, over http too (tests, local development). */
  readonly allowPrivateProviderUrls: boolean
}

// Loopback only, not every private range: the setting exists so a test or a developer can receive on
// their own machine, not to open the platform's internal network to a workspace.
const isLoopbackHost = (hostname: string): boolean => {
  const bare = hostname.replace(/^\[|\]$/g, "").toLowerCase()
  if (bare === "localhost" || bare.endsWith(".localhost")) return true
  if (isIP(bare) === 4) return bare.startsWith("127.")
  return bare === "::1" || /^::ffff:127\./.test(bare)
}

/** undefined when the URL may be saved; else why not (said on the `url` field). */
export async function webhookUrlRefusal(url: string, policy: WebhookUrlPolicy): Promise<string | undefined> {
  if (url.length > WEBHOOK_URL_MAX) return `must be at most ${WEBHOOK_URL_MAX} characters`
  let u: URL
  try {
    u = new URL(url)
  } catch {
    return "must be an absolute URL"
  }
  // Credentials in a URL would be shown by every GET of the endpoint; receivers authenticate us by the signature.
  if (u.username !== "" || u.password !== "") return "must not carry a user name or password"
  const loopback = policy.allowPrivateProviderUrls && isLoopbackHost(u.hostname)
  if (u.protocol === "http:" && !loopback)
    return policy.allowPrivateProviderUrls
      ? "must be an https URL (http only to a loopback host)"
      : "must be an https URL"
  if (u.protocol !== "https:" && u.protocol !== "http:") return "must be an https URL"
  if (loopback) return undefined
  // A name server that never answers must not hold the request (and its connection) open.
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<string>((resolve) => {
    timer = setTimeout(
      () => resolve(`names a host that did not resolve within ${RESOLVE_TIMEOUT_MS / 1000} s`),
      RESOLVE_TIMEOUT_MS,
    )
  })
  try {
    return await Promise.race([privateUrlReason(u.href), late])
  } finally {
    clearTimeout(timer)
  }
}
