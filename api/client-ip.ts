// Who the client is, once per request: the socket's peer, or, when that peer is a proxy we trust
// (TRUSTED_PROXIES), the nearest address in X-Forwarded-For that is not one of our proxies.
import { isIP } from "node:net"

/** "::ffff:1.2.3.4" → "1.2.3.4"; anything else as given, lower-cased. */
export function normaliseIp(ip: string): string {
  const s = ip.trim().toLowerCase()
  return s.startsWith("::ffff:") && isIP(s.slice(7)) === 4 ? s.slice(7) : s
}

/**
 * The client address for throttles, audit rows and caps. X-Forwarded-For is read right to left
 * (each proxy appends the address it saw), skipping our own proxies, so a client cannot choose
 * its address by sending the header itself; a malformed entry stops the walk at the last proxy.
 */
export function clientIp(peer: string, forwardedFor: string | undefined, trustedProxies: readonly string[]): string {
  const trusted = (ip: string) => trustedProxies.includes(ip)
  let ip = normaliseIp(peer)
  if (forwardedFor === undefined || !trusted(ip)) return ip
  const hops = forwardedFor.split(",")
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = normaliseIp(hops[i]!)
    if (isIP(hop) === 0) break
    ip = hop
    if (!trusted(hop)) break
  }
  return ip
}
