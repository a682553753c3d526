// The rows behind a `url` source: one GET over HTTPS through the provider outbound policy (public
// addresses only, checked on the address dialled; no redirects), a bounded read and a time limit.

import { privateUrlReason } from "../onboarding/public-url.js"
import { describeNetworkError } from "../providers/http.util.js"
import { outboundFor, providerFetch, readBoundedBytes } from "../providers/outbound.js"
import { type ParsedRows, parseFetched, RowsFormatError } from "./rows.parse.js"

export const URL_FETCH_LIMIT_BYTES = 10 * 1024 * 1024
export const URL_FETCH_TIMEOUT_MS = 30_000
export const URL_MAX = 2048

export interface UrlPolicy {
  /** ALLOW_PRIVATE_PROVIDER_URLS: loopback and private hosts allowed, and plain http (tests). */
  readonly allowPrivateProviderUrls: boolean
}

/** undefined when the URL may be fetched; else why not (said on the `url` field). */
export async function urlRefusal(url: string, policy: UrlPolicy): Promise<string | undefined> {
  let u: URL
  try {
    u = new URL(url)
  } catch {
    return "must be an absolute URL"
  }
  if (u.username !== "" || u.password !== "") return "must not carry a user name or password"
  if (u.protocol !== "https:" && !(policy.allowPrivateProviderUrls && u.protocol === "http:"))
    return "must be an https URL"
  if (policy.allowPrivateProviderUrls) return undefined
  return privateUrlReason(url)
}

/** Fetches and parses the rows; fails with RowsFormatError (its message says why) on any failure. */
export async function fetchUrlRows(
  url: string,
  policy: UrlPolicy,
  limits: { bytes?: number; timeoutMs?: number } = {},
): Promise<ParsedRows> {
  const refused = await urlRefusal(url, policy)
  if (refused !== undefined) throw new RowsFormatError(`the URL ${refused}`)
  const bytes = limits.bytes ?? URL_FETCH_LIMIT_BYTES
  const outbound = {
    ...outboundFor(
      { allowPrivateProviderUrls: policy.allowPrivateProviderUrls, providerResponseLimitBytes: bytes },
      "tenant",
    ),
  }
  const signal = AbortSignal.timeout(limits.timeoutMs ?? URL_FETCH_TIMEOUT_MS)
  let body: Buffer
  let contentType: string | null
  try {
    const res = await providerFetch(
      url,
      { method: "GET", headers: { accept: "text/csv, application/json" }, signal },
      outbound,
    )
    if (!res.ok) {
      await res.body?.cancel().catch(() => {}) // discarding an unread body: the status is the answer
      throw new RowsFormatError(`the URL answered HTTP ${res.status}`)
    }
    contentType = res.headers.get("content-type")
    body = await readBoundedBytes(res, bytes)
  } catch (e) {
    if (e instanceof RowsFormatError) throw e
    if (signal.aborted)
      throw new RowsFormatError(`the URL did not answer within ${(limits.timeoutMs ?? URL_FETCH_TIMEOUT_MS) / 1000} s`)
    throw new RowsFormatError(`could not fetch the URL: ${describeNetworkError(e)}`)
  }
  return parseFetched(body, contentType)
}
