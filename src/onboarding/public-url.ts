// Whether a URL a tenant gave us points at the public internet. Live validation (and later, calls)
// send requests to tenants' provider base URLs; one naming a loopback, private or link-local
// address would let a tenant probe the platform's own network.
import { lookup } from "node:dns/promises"
import { BlockList, isIP } from "node:net"

const blocked = new BlockList()
for (const [net, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const)
  blocked.addSubnet(net, prefix, "ipv4")
for (const [net, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
] as const)
  blocked.addSubnet(net, prefix, "ipv6")

/** An address in a range that is not the public internet (IPv4-mapped IPv6 checked as IPv4). */
export function isPrivateAddress(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1]
  if (mapped !== undefined) return blocked.check(mapped, "ipv4")
  const family = isIP(address)
  return family === 0 ? true : blocked.check(address, family === 4 ? "ipv4" : "ipv6")
}

/** undefined when every address the URL's host resolves to is public; else why not. */
export async function privateUrlReason(url: string): Promise<string | undefined> {
  let host: string
  try {
    host = new URL(url).hostname.replace(/^\[|\]$/g, "")
  } catch {
    return "is not a URL"
  }
  const addresses = isIP(host) !== 0 ? [host] : await lookup(host, { all: true, verbatim: true }).then((r) => r.map((a) => a.address), () => [])
  if (addresses.length === 0) return `names a host that does not resolve (${host})`
  const inner = addresses.find(isPrivateAddress)
  return inner === undefined ? undefined : `must be a public address; ${host} is ${inner}`
}
