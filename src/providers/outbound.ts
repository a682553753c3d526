// How every request to a provider's HTTP API leaves the process: redirects are never followed,
// answers are read up to a size cap, and URLs a tenant supplied connect only to public addresses,
// checked on the address actually dialled (after DNS), so a name that resolves publicly when the
// credential is saved and privately later (DNS rebinding) is still refused.

import type { LookupAddress, LookupOptions } from "node:dns"
import { lookup as dnsLookup } from "node:dns/promises"
import { BlockList, isIP } from "node:net"
import { Agent, buildConnector, type Dispatcher, fetch as undiciFetch } from "undici"
import { describeNetworkError, ProviderCallError } from "./http.util.js"

/** The answer size cap when the caller names none (the PROVIDER_RESPONSE_LIMIT_BYTES default). */
export const DEFAULT_RESPONSE_LIMIT_BYTES = 2 * 1024 * 1024

// ---------------------------------------------------------------------------------------------
// Which addresses are not the public internet

const blocked = new BlockList()
for (const [net, prefix] of [
  ["0.0.0.0", 8], // "this network", unspecified
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // CGNAT
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local, cloud metadata
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15], // benchmarking
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, broadcast
] as const)
  blocked.addSubnet(net, prefix, "ipv4")
for (const [net, prefix] of [
  ["::", 96], // unspecified, loopback and the deprecated IPv4-compatible form
  ["64:ff9b::", 96], // NAT64: reaches IPv4 through a translator, possibly a private one
  ["100::", 64], // discard
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["ff00::", 8], // multicast
] as const)
  blocked.addSubnet(net, prefix, "ipv6")

/** An address in a range that is not the public internet (IPv4-mapped IPv6 checked as IPv4). */
export function isPrivateAddress(address: string): boolean {
  const bare = address.replace(/^\[|\]$/g, "")
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(bare)?.[1]
  if (mapped !== undefined) return blocked.check(mapped, "ipv4")
  const family = isIP(bare)
  // BlockList checks IPv4-mapped IPv6 in hex form (::ffff:7f00:1) against the IPv4 rules itself.
  return family === 0 ? true : blocked.check(bare, family === 4 ? "ipv4" : "ipv6")
}

// ---------------------------------------------------------------------------------------------
// Name resolution, replaceable in tests (there is no public DNS there)

export type HostResolver = (host: string) => Promise<ReadonlyArray<{ address: string; family: number }>>

const systemResolver: HostResolver = (host) => dnsLookup(host, { all: true, verbatim: true })
let resolver: HostResolver = systemResolver

/**
 * Replaces how host names are resolved, for both the save-time check and the connect-time guard;
 * undefined restores the system resolver. Tests only: lets a name resolve publicly, then privately.
 */
export function setHostResolver(r: HostResolver | undefined): void {
  resolver = r ?? systemResolver
}

/** Every address `host` resolves to (the host itself when it is an IP literal); [] when it does not resolve. */
export async function resolveHost(host: string): Promise<string[]> {
  const bare = host.replace(/^\[|\]$/g, "")
  if (isIP(bare) !== 0) return [bare]
  return resolver(bare).then(
    (r) => r.map((a) => a.address),
    () => [],
  )
}

/** A connection refused because its host is, or resolved to, a non-public address. */
export class PrivateAddressRefused extends Error {
  override readonly name = "PrivateAddressRefused"
  readonly code = "EPRIVATEADDRESS"
  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(
      host === address
        ? `refused to connect to ${address}: not a public address`
        : `refused to connect to ${host}: it resolves to ${address}, not a public address`,
    )
  }
}

/** net's `lookup` hook: resolves with the injectable resolver and refuses when any address is private. */
function guardedLookup(
  hostname: string,
  options: LookupOptions,
  callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
): void {
  resolver(hostname).then(
    (found) => {
      if (found.length === 0)
        return callback(Object.assign(new Error(`${hostname} does not resolve`), { code: "ENOTFOUND" }), "")
      // Any private answer refuses the name, as the save-time check does: the resolver may hand
      // either address to the next connection.
      const inner = found.find((a) => isPrivateAddress(a.address))
      if (inner !== undefined) return callback(new PrivateAddressRefused(hostname, inner.address), "")
      const wanted =
        options.family === 4 || options.family === "IPv4"
          ? 4
          : options.family === 6 || options.family === "IPv6"
            ? 6
            : 0
      const usable = found.filter((a) => wanted === 0 || a.family === wanted)
      if (usable.length === 0)
        return callback(Object.assign(new Error(`${hostname} has no IPv${wanted} address`), { code: "ENOTFOUND" }), "")
      if (options.all === true)
        return callback(
          null,
          usable.map((a) => ({ address: a.address, family: a.family })),
        )
      return callback(null, usable[0]!.address, usable[0]!.family)
    },
    (e: unknown) => callback(e instanceof Error ? e : new Error(String(e)), ""),
  )
}

/**
 * An undici Agent that dials only public addresses: IP-literal hosts are checked before the
 * connection, names through `guardedLookup` at each new connection, so the address checked is the
 * one connected to.
 */
function makeGuardedAgent(): Agent {
  const connect = buildConnector({ lookup: guardedLookup })
  return new Agent({
    connect(opts, callback) {
      const literal = opts.hostname.replace(/^\[|\]$/g, "")
      if (isIP(literal) !== 0 && isPrivateAddress(literal))
        return callback(new PrivateAddressRefused(literal, literal), null)
      connect(opts, callback)
    },
  })
}

let guardedAgent: Agent | undefined

/**
 * The dispatcher for URLs a tenant supplied: the shared guarded agent, or none (undici's default) when private URLs
 * are allowed.
 */
function tenantDispatcher(allowPrivate: boolean): Dispatcher | undefined {
  if (allowPrivate) return undefined
  return (guardedAgent ??= makeGuardedAgent())
}

// ---------------------------------------------------------------------------------------------
// The policy an adapter is given

/** How one adapter's requests go out: through which dispatcher, and how much of an answer it reads. */
export interface Outbound {
  /** undici dispatcher; the address guard for tenant-supplied URLs, else undefined (the default agent). */
  readonly dispatcher?: Dispatcher | undefined
  readonly responseLimitBytes: number
}

/**
 * The outbound policy for a provider URL. Platform URLs (LLM_BASE_URL, TELCO_A_API_URL,
 * MAIL_API_URL, GW_*) are the operator's own and may be private: they get the size cap and no
 * redirects. A URL from a tenant's credential also gets the address guard, unless
 * ALLOW_PRIVATE_PROVIDER_URLS is set.
 */
export function outboundFor(
  config: { readonly allowPrivateProviderUrls: boolean; readonly providerResponseLimitBytes: number },
  source: "platform" | "tenant",
): Outbound {
  return {
    dispatcher: source === "tenant" ? tenantDispatcher(config.allowPrivateProviderUrls) : undefined,
    responseLimitBytes: config.providerResponseLimitBytes,
  }
}

/** The policy when an adapter is given none: no guard (its URL is the platform's), the default cap. */
export const PLATFORM_DEFAULT: Outbound = { responseLimitBytes: DEFAULT_RESPONSE_LIMIT_BYTES }

// ---------------------------------------------------------------------------------------------
// The request and the answer

/** A provider answered a redirect: never followed (it would carry credentials and bodies elsewhere). */
export class RedirectRefused extends ProviderCallError {
  override readonly name = "RedirectRefused"
  constructor(status: number) {
    super(`answered HTTP ${status} (a redirect; provider calls do not follow redirects)`, false, { status })
  }
}

/** A provider's answer was larger than the cap: cut off, and never retried (it would be as large again). */
export class ResponseTooLarge extends ProviderCallError {
  override readonly name = "ResponseTooLarge"
  constructor(
    readonly limitBytes: number,
    status: number,
  ) {
    super(`answered with more than ${limitBytes} bytes (answer larger than ${limitBytes} bytes, cut off)`, false, {
      status,
    })
  }
}

type FetchInit = RequestInit & { dispatcher?: Dispatcher }

/**
 * One request to a provider: with the policy's dispatcher, no redirect followed (a 3xx other than
 * 304 rejects with RedirectRefused, its body discarded). `doFetch` replaces undici's fetch (tests);
 * the signal in `init` should be the attempt's timeout, which also covers reading the answer.
 */
export async function providerFetch(
  url: string,
  init: RequestInit,
  outbound: Outbound,
  doFetch?: typeof fetch,
): Promise<Response> {
  const f = (doFetch ?? (undiciFetch as unknown as typeof fetch)) as (url: string, init: FetchInit) => Promise<Response>
  const res = await f(url, {
    ...init,
    redirect: "manual",
    ...(outbound.dispatcher !== undefined && { dispatcher: outbound.dispatcher }),
  })
  if (res.status >= 300 && res.status < 400 && res.status !== 304) {
    await res.body?.cancel().catch(() => {})
    throw new RedirectRefused(res.status)
  }
  return res
}

/**
 * The answer's body, read chunk by chunk and abandoned (the connection closed) as soon as it
 * passes `limitBytes`: a provider cannot make us hold more than that, whatever it sends.
 */
export async function readBoundedBytes(res: Response, limitBytes: number): Promise<Buffer> {
  const declared = Number(res.headers.get("content-length") ?? Number.NaN)
  if (Number.isFinite(declared) && declared > limitBytes) {
    await res.body?.cancel().catch(() => {})
    throw new ResponseTooLarge(limitBytes, res.status)
  }
  if (res.body === null) return Buffer.alloc(0)
  const reader = res.body.getReader()
  const chunks: Uint8Array[] = []
  let total = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    total += value.byteLength
    if (total > limitBytes) {
      await reader.cancel().catch(() => {})
      throw new ResponseTooLarge(limitBytes, res.status)
    }
    chunks.push(value)
  }
  return Buffer.concat(chunks)
}

/** The answer's body as text, bounded as readBoundedBytes. */
export async function readBounded(res: Response, limitBytes: number): Promise<string> {
  return new TextDecoder().decode(await readBoundedBytes(res, limitBytes))
}

/** Why a request failed before a usable answer, in words that follow the provider's label. */
export interface FetchFailure {
  /** e.g. "unreachable: no answer within 5000 ms", "answered HTTP 302 (a redirect; …)". */
  readonly message: string
  readonly retryable: boolean
  readonly timedOut: boolean
  readonly status?: number | undefined
}

/** Classifies what providerFetch or readBounded threw. */
export function fetchFailure(e: unknown, timeoutMs: number): FetchFailure {
  if (e instanceof ProviderCallError)
    return { message: e.message, retryable: e.retryable, timedOut: false, status: e.status }
  const timedOut = e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError")
  if (timedOut) return { message: `unreachable: no answer within ${timeoutMs} ms`, retryable: true, timedOut }
  const cause = e instanceof Error ? e.cause : undefined
  // The guard's refusal is the same on every attempt.
  if (cause instanceof PrivateAddressRefused)
    return { message: `unreachable: ${cause.message}`, retryable: false, timedOut }
  return { message: `unreachable: ${describeNetworkError(e)}`, retryable: true, timedOut }
}
