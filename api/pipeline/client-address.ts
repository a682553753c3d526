// clientAddress: who the client is, once per request: the socket's peer, or, when that peer
// is a proxy we trust (TRUSTED_PROXIES), the nearest address in X-Forwarded-For not one of ours.
import { isIP } from "node:net"

export interface ClientAddress {
  /** The socket's peer, normalised (a proxy, behind one). */
  readonly remoteAddress: string
  /** The client's address for throttles, audit rows and caps. */
  readonly clientIp: string
}

/** Both addresses of a request from its peer's address and its X-Forwarded-For header. */
export function clientAddress(
  peer: string,
  forwardedFor: string | undefined,
  trustedProxies: readonly string[],
): ClientAddress {
  const remoteAddress = normaliseIp(peer)
  return { remoteAddress, clientIp: clientIp(remoteAddress, forwardedFor, trustedProxies) }
}

/** "::ffff:1.2.3.4" → "1.2.3.4"; anything else as given, lower-cased. */
export function normaliseIp(ip: string): string {
  const s = ip.trim().toLowerCase()
  return s.startsWith("::ffff:") && isIP(s.slice(7)) === 4 ? s.slice(7) : s
}

/**
 * The client address. X-Forwarded-For is read right to left (each proxy appends the address it
 * saw), skipping our own proxies, so a client cannot choose its address by sending the header
 * itself; a malformed entry stops the walk at the last proxy.
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
