// How every request to a provider's HTTP API leaves the process: redirects are never followed,
// answers are read up to a size cap, and URLs a tenant supplied connect only to public addresses,
// checked on the address actually dialled (after DNS), so a name that resolves publicly when the
// credential is saved and privately later (DNS rebinding) is still refused. Webhook deliveries go
// through the same guard (webhookDispatcher). vendorAttempt is the one vendor call every adapter
// makes: request, bounded read, and the status classified into the adapter's own typed error.

import type { LookupAddress, LookupOptions } from "node:dns"
import { Resolver } from "node:dns/promises"
import { BlockList, isIP } from "node:net"
import { Agent, buildConnector, type Dispatcher, fetch as undiciFetch } from "undici"
import { type Attempt, describeNetworkError, ProviderCallError, parseRetryAfter } from "./http.util.js"

/** The answer size cap when the caller names none (the PROVIDER_RESPONSE_LIMIT_BYTES default). */
export const DEFAULT_RESPONSE_LIMIT_BYTES = 2 * 1024 * 1024

// ---------------------------------------------------------------------------------------------
// Which addresses are not the public internet

/** IPv4 ranges that are not the public internet. */
const PRIVATE_V4: ReadonlyArray<readonly [string, number]> = [
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
]

/** The 6to4 prefix (2002::/16) of an IPv4 network: its address sits in the next 32 bits. */
const sixToFour = (v4: string): string => {
  const [a, b, c, d] = v4.split(".").map(Number) as [number, number, number, number]
  return `2002:${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}::`
}

const blocked = new BlockList()
for (const [net, prefix] of PRIVATE_V4) {
  blocked.addSubnet(net, prefix, "ipv4")
  // A 6to4 address is delivered to the IPv4 address inside it by whichever relay routes 2002::/16
  // (possibly one inside our own network): the IPv4 rules apply to it.
  blocked.addSubnet(sixToFour(net), 16 + prefix, "ipv6")
}
// IANA's IPv6 special-purpose registry: what is not globally reachable, and what reaches IPv4 through
// a translator or tunnel (which may deliver to a private IPv4 address).
for (const [net, prefix] of [
  ["::", 96], // unspecified, loopback and the deprecated IPv4-compatible form
  ["::ffff:0:0:0", 96], // SIIT IPv4-translated addresses
  ["64:ff9b::", 96], // NAT64 well-known prefix
  ["64:ff9b:1::", 48], // NAT64 local-use prefix
  ["100::", 64], // discard-only
  ["100:0:0:1::", 64], // dummy prefix
  ["2001::", 23], // IETF protocol assignments: Teredo 2001::/32 (embeds IPv4), benchmarking, ORCHID, AMT …
  ["2001:db8::", 32], // documentation
  ["3fff::", 20], // documentation
  ["5f00::", 16], // SRv6 segment identifiers
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["fec0::", 10], // site-local (deprecated; still routed inside some networks)
  ["ff00::", 8], // multicast
] as const)
  blocked.addSubnet(net, prefix, "ipv6")

const loopback = new BlockList()
loopback.addSubnet("127.0.0.0", 8, "ipv4")
loopback.addAddress("::1", "ipv6")

/** `list.check` of an address (brackets allowed), IPv4-mapped IPv6 checked as IPv4; undefined for a non-address. */
function inList(list: BlockList, address: string): boolean | undefined {
  const bare = address.replace(/^\[|\]$/g, "")
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(bare)?.[1]
  if (mapped !== undefined) return list.check(mapped, "ipv4")
  const family = isIP(bare)
  // BlockList checks IPv4-mapped IPv6 in hex form (::ffff:7f00:1) against the IPv4 rules itself.
  return family === 0 ? undefined : list.check(bare, family === 4 ? "ipv4" : "ipv6")
}

/** An address in a range that is not the public internet (IPv4-mapped IPv6 checked as IPv4). */
export function isPrivateAddress(address: string): boolean {
  return inList(blocked, address) ?? true
}

/** A loopback address: 127.0.0.0/8 or ::1 (IPv4-mapped included). */
export function isLoopbackAddress(address: string): boolean {
  return inList(loopback, address) ?? false
}

/**
 * Which addresses a guarded connection may reach: public ones only, or loopback as well (webhook
 * receivers under ALLOW_PRIVATE_PROVIDER_URLS: a developer's own machine, never another private range).
 */
export type AddressPolicy = "public" | "public_or_loopback"

export const addressAllowed = (address: string, policy: AddressPolicy): boolean =>
  !isPrivateAddress(address) || (policy === "public_or_loopback" && isLoopbackAddress(address))

// ---------------------------------------------------------------------------------------------
// Name resolution, replaceable in tests (there is no public DNS there)

export type HostResolver = (host: string) => Promise<ReadonlyArray<{ address: string; family: number }>>

/** c-ares: how long one query waits for a name server, and how often each is asked. */
const DNS_QUERY_TIMEOUT_MS = 1_500
const DNS_TRIES = 2
/** The whole resolution of one name, however many servers and tries: a lookup never waits longer. */
export const RESOLVE_DEADLINE_MS = 5_000

const LOOPBACK_ANSWERS = [
  { address: "127.0.0.1", family: 4 },
  { address: "::1", family: 6 },
] as const
/** "localhost" and its subdomains are loopback by definition (RFC 6761): no name server is asked. */
const isLocalhostName = (host: string): boolean => {
  const h = host.toLowerCase().replace(/\.$/, "")
  return h === "localhost" || h.endsWith(".localhost")
}

let dns: Resolver | undefined
/** Name servers other than the system's (tests: a server that never answers); undefined: /etc/resolv.conf's. */
let nameServers: readonly string[] | undefined

/** Points the system resolver at other name servers ("127.0.0.1:5353"); undefined restores the system's. Tests only. */
export function setNameServers(servers: readonly string[] | undefined): void {
  nameServers = servers
  dns = undefined
}

/**
 * A and AAAA through c-ares (dns.promises.Resolver), not dns.lookup: getaddrinfo runs on libuv's
 * four-thread pool, where a name server that never answers would hold threads that argon2 and file
 * I/O need. c-ares waits on sockets instead. (It does not read /etc/hosts; these are public names.)
 */
const systemResolver: HostResolver = async (host) => {
  if (isLocalhostName(host)) return LOOPBACK_ANSWERS
  if (dns === undefined) {
    dns = new Resolver({ timeout: DNS_QUERY_TIMEOUT_MS, tries: DNS_TRIES })
    if (nameServers !== undefined) dns.setServers(nameServers)
  }
  const [v4, v6] = await Promise.allSettled([dns.resolve4(host), dns.resolve6(host)])
  const found = [
    ...(v4.status === "fulfilled" ? v4.value.map((address) => ({ address, family: 4 })) : []),
    ...(v6.status === "fulfilled" ? v6.value.map((address) => ({ address, family: 6 })) : []),
  ]
  if (found.length === 0 && v4.status === "rejected") throw v4.reason
  return found
}
let resolver: HostResolver = systemResolver

/**
 * Replaces how host names are resolved, for both the save-time check and the connect-time guard;
 * undefined restores the system resolver. Tests only: lets a name resolve publicly, then privately.
 */
export function setHostResolver(r: HostResolver | undefined): void {
  resolver = r ?? systemResolver
}

/** The resolver's answer, or an ETIMEOUT error once RESOLVE_DEADLINE_MS has passed. */
function resolveBounded(host: string): Promise<ReadonlyArray<{ address: string; family: number }>> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          Object.assign(new Error(`${host} did not resolve within ${RESOLVE_DEADLINE_MS / 1000} s`), {
            code: "ETIMEOUT",
          }),
        ),
      RESOLVE_DEADLINE_MS,
    )
    timer.unref()
  })
  return Promise.race([resolver(host), late]).finally(() => clearTimeout(timer))
}

/** What resolving a host found: its addresses ([] when it does not resolve), and whether it ran out of time. */
export async function lookupHost(host: string): Promise<{ addresses: string[]; timedOut: boolean }> {
  const bare = host.replace(/^\[|\]$/g, "")
  if (isIP(bare) !== 0) return { addresses: [bare], timedOut: false }
  return resolveBounded(bare).then(
    (r) => ({ addresses: r.map((a) => a.address), timedOut: false }),
    (e: unknown) => ({ addresses: [], timedOut: (e as { code?: unknown } | null)?.code === "ETIMEOUT" }),
  )
}

/** Every address `host` resolves to (the host itself when it is an IP literal); [] when it does not resolve. */
export async function resolveHost(host: string): Promise<string[]> {
  return (await lookupHost(host)).addresses
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

  /**
   * The refusal as a workspace may read it: the host it gave, never the address a name resolved to
   * (an internal DNS answer is the operator's to know; log `address` instead).
   */
  get publicMessage(): string {
    return this.host === this.address
      ? `refused to connect to ${this.host}: not a public address`
      : `refused to connect to ${this.host}: it resolves to a non-public address`
  }
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void

/** net's `lookup` hook: resolves with the injectable resolver and refuses when any address is not allowed. */
const guardedLookup =
  (policy: AddressPolicy) =>
  (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    resolveBounded(hostname).then(
      (found) => {
        if (found.length === 0)
          return callback(Object.assign(new Error(`${hostname} does not resolve`), { code: "ENOTFOUND" }), "")
        // Any refused answer refuses the name, as the save-time check does: the resolver may hand
        // either address to the next connection.
        const inner = found.find((a) => !addressAllowed(a.address, policy))
        if (inner !== undefined) return callback(new PrivateAddressRefused(hostname, inner.address), "")
        const wanted =
          options.family === 4 || options.family === "IPv4"
            ? 4
            : options.family === 6 || options.family === "IPv6"
              ? 6
              : 0
        const usable = found.filter((a) => wanted === 0 || a.family === wanted)
        if (usable.length === 0)
          return callback(
            Object.assign(new Error(`${hostname} has no IPv${wanted} address`), { code: "ENOTFOUND" }),
            "",
          )
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
 * An undici Agent that dials only the addresses `policy` allows: IP-literal hosts are checked before
 * the connection, names through `guardedLookup` at each new connection, so the address checked is the
 * one connected to.
 */
function makeGuardedAgent(policy: AddressPolicy): Agent {
  const connect = buildConnector({ lookup: guardedLookup(policy) })
  return new Agent({
    connect(opts, callback) {
      const literal = opts.hostname.replace(/^\[|\]$/g, "")
      if (isIP(literal) !== 0 && !addressAllowed(literal, policy))
        return callback(new PrivateAddressRefused(literal, literal), null)
      connect(opts, callback)
    },
  })
}

const guardedAgents = new Map<AddressPolicy, Agent>()
const guardedAgent = (policy: AddressPolicy): Agent => {
  let agent = guardedAgents.get(policy)
  if (agent === undefined) guardedAgents.set(policy, (agent = makeGuardedAgent(policy)))
  return agent
}

/**
 * The dispatcher for URLs a tenant supplied: the shared guarded agent, or none (undici's default) when private URLs
 * are allowed.
 */
function tenantDispatcher(allowPrivate: boolean): Dispatcher | undefined {
  if (allowPrivate) return undefined
  return guardedAgent("public")
}

/**
 * The dispatcher of webhook deliveries, always guarded. ALLOW_PRIVATE_PROVIDER_URLS lets a receiver
 * be on loopback (a test, a developer's machine) and nothing more: unlike a provider credential's URL,
 * for which the setting turns the guard off, a webhook URL never reaches another private range.
 */
export function webhookDispatcher(config: { readonly allowPrivateProviderUrls: boolean }): Dispatcher {
  return guardedAgent(config.allowPrivateProviderUrls ? "public_or_loopback" : "public")
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
    await res.body?.cancel().catch(() => {}) // discarding an unread body: a closed stream has nothing to lose
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
    await res.body?.cancel().catch(() => {}) // discarding an unread body: a closed stream has nothing to lose
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
      await reader.cancel().catch(() => {}) // abandoning the answer: the error thrown next says why
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
  // The guard's refusal is the same on every attempt. The message reaches the workspace: the host
  // it gave, never the address a name resolved to (an internal DNS answer is the operator's to know).
  if (cause instanceof PrivateAddressRefused)
    return { message: `unreachable: ${cause.publicMessage}`, retryable: false, timedOut }
  return { message: `unreachable: ${describeNetworkError(e)}`, retryable: true, timedOut }
}

// ---------------------------------------------------------------------------------------------
// One vendor call

/** A vendor's answer, read within the cap. */
export interface VendorAnswer {
  readonly status: number
  readonly headers: Headers
  /** The body (empty when the call discards it). */
  readonly bytes: Buffer
  /** The body as text, decoded when first asked for. */
  readonly text: string
}

class Answer implements VendorAnswer {
  #text: string | undefined
  constructor(
    readonly status: number,
    readonly headers: Headers,
    readonly bytes: Buffer,
  ) {}
  get text(): string {
    this.#text ??= new TextDecoder().decode(this.bytes)
    return this.#text
  }
}

/** What a status other than 2xx says, for the adapter's typed error. */
export type StatusKind = "rate_limited" | "unavailable" | "auth" | "refused"

/** 429: rate_limited; 5xx: unavailable; 401 and 403: auth; any other (a bad request, not found): refused. */
export const statusKind = (status: number): StatusKind =>
  status === 429
    ? "rate_limited"
    : status >= 500
      ? "unavailable"
      : status === 401 || status === 403
        ? "auth"
        : "refused"

/** Whether the same request may be answered otherwise later: rate limited or unavailable (429, 5xx). */
export const retryableStatus = (status: number): boolean => status === 429 || status >= 500

/** One request to a vendor, and how its outcomes become the adapter's value or typed error. */
export interface VendorCall<T, E extends Error> {
  readonly url: string
  readonly init: Omit<RequestInit, "signal">
  /** Limit for the attempt: connect, request and the whole answer (a vendor dripping its body hits it too). */
  readonly timeoutMs: number
  /** The caller's own abort, besides the timeout. */
  readonly signal?: AbortSignal | undefined
  readonly outbound: Outbound
  /** Replaces undici's fetch (tests). */
  readonly fetch?: typeof fetch | undefined
  /** "discard": only the status matters and the body is never read (nothing of it is held); default "read". */
  readonly body?: "read" | "discard"
  /** No usable answer: unreachable, timed out, a redirect, an answer past the cap. */
  unreachable(failure: FetchFailure, cause: unknown): E
  /** A 2xx answer: the value, or why it is not one. */
  answered(answer: VendorAnswer): Attempt<T, E>
  /** Any other status. A retryable ProviderCallError carries the vendor's Retry-After with it. */
  refused(answer: VendorAnswer, kind: StatusKind): E
}

/**
 * One attempt at a vendor call: the request under the outbound policy (no redirect followed) with
 * its timeout, the answer read within the cap, and the outcome handed to the adapter's own
 * mapping. Resolves with an Attempt for withRetries (or a single try); never rejects by itself.
 */
export async function vendorAttempt<T, E extends Error>(call: VendorCall<T, E>): Promise<Attempt<T, E>> {
  const timeout = AbortSignal.timeout(call.timeoutMs)
  let answer: Answer
  try {
    const res = await providerFetch(
      call.url,
      { ...call.init, signal: call.signal === undefined ? timeout : AbortSignal.any([timeout, call.signal]) },
      call.outbound,
      call.fetch,
    )
    let bytes: Buffer = Buffer.alloc(0)
    if (call.body === "discard")
      await res.body?.cancel().catch(() => {}) // unread: only the status decides
    else bytes = await readBoundedBytes(res, call.outbound.responseLimitBytes)
    answer = new Answer(res.status, res.headers, bytes)
  } catch (e) {
    return { ok: false, error: call.unreachable(fetchFailure(e, call.timeoutMs), e) }
  }
  if (answer.status >= 200 && answer.status < 300) return call.answered(answer)
  const error = call.refused(answer, statusKind(answer.status))
  const retryAfterMs =
    error instanceof ProviderCallError && error.retryable
      ? parseRetryAfter(answer.headers.get("retry-after"))
      : undefined
  return { ok: false, error, ...(retryAfterMs !== undefined && { retryAfterMs }) }
}
