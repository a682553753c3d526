// Live validation of a provider credential: one authenticated GET to the provider's account
// endpoint (per-attempt timeout, one retry when the provider may recover), or, with no base URL
// to call (the simulators), the format check the catalogue already made. A base URL from the
// credential is the tenant's: it goes through the connect-time address guard.
import { setTimeout as sleep } from "node:timers/promises"
import { type Attempt, ProviderCallError } from "../providers/http.util.js"
import { DEFAULT_RESPONSE_LIMIT_BYTES, outboundFor, retryableStatus, vendorAttempt } from "../providers/outbound.js"
import type { CheckedCredential, ProviderId } from "./providers.catalogue.js"

export type ValidationOutcome =
  /** The provider accepted the credential (or, with no endpoint to call, its format is right). */
  | { readonly result: "valid"; readonly method: "live" | "format" }
  /** The provider refused it (401/403): stored as failed. */
  | { readonly result: "rejected"; readonly message: string }
  /** The provider could not say (network, timeout, any other status): stored as unvalidated. */
  | { readonly result: "unavailable"; readonly message: string }

/** The platform's own API roots, used when the credential names none. */
export interface PlatformUrls {
  readonly llmBaseUrl?: string | undefined
  readonly telcoAApiUrl?: string | undefined
}

export interface ValidatorOptions {
  readonly platform: PlatformUrls
  /** Limit for each attempt; default 5000 ms. */
  readonly timeoutMs?: number
  /** Replaces undici's fetch (tests). */
  readonly fetch?: typeof fetch
  /** ALLOW_PRIVATE_PROVIDER_URLS: a tenant's base URL may reach private addresses; default false. */
  readonly allowPrivateProviderUrls?: boolean
  /** PROVIDER_RESPONSE_LIMIT_BYTES; default 2 MiB. */
  readonly providerResponseLimitBytes?: number
}

/** Attempts per validation: the first and one retry. */
const ATTEMPTS = 2
const RETRY_BACKOFF_MS = 250
const MAX_RETRY_AFTER_MS = 2_000

interface Probe {
  readonly url: string
  /** The Authorization header; absent for a vendor that takes its key in a header of its own. */
  readonly authorization?: string
  /** Further headers (the language model's OpenAI-Organization, the voice vendor's xi-api-key). */
  readonly headers?: Readonly<Record<string, string>>
  /** Whose URL it is: the credential's own base URL, or the platform's. */
  readonly source: "tenant" | "platform"
}

const LABEL: Readonly<Record<ProviderId, string>> = {
  llm: "the language model API",
  telco_a: "telco_a",
  telco_b: "telco_b",
  tts: "the speech synthesis API",
  stt: "the speech recognition API",
}

const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined)
const trimSlash = (u: string): string => u.replace(/\/+$/, "")
const httpOf = (u: string): string => u.replace(/^ws/, "http")

/** The account-endpoint request for a credential, or undefined when there is no endpoint to call. */
export function probeFor(provider: ProviderId, cred: CheckedCredential, platform: PlatformUrls): Probe | undefined {
  const bearer = `Bearer ${cred.secret}`
  switch (provider) {
    case "llm": {
      const own = str(cred.extra.base_url)
      const base = own ?? platform.llmBaseUrl
      if (base === undefined) return undefined
      return {
        url: `${trimSlash(base)}/models`,
        authorization: bearer,
        ...(cred.primaryId !== null && { headers: { "openai-organization": cred.primaryId } }),
        source: own === undefined ? "platform" : "tenant",
      }
    }
    case "telco_a": {
      const own = str(cred.extra.api_base_url)
      const base = own ?? platform.telcoAApiUrl
      if (base === undefined || cred.primaryId === null) return undefined
      return {
        url: `${trimSlash(base)}/2010-04-01/Accounts/${encodeURIComponent(cred.primaryId)}.json`,
        authorization: `Basic ${Buffer.from(`${cred.primaryId}:${cred.secret}`).toString("base64")}`,
        source: own === undefined ? "platform" : "tenant",
      }
    }
    case "telco_b": {
      const base = str(cred.extra.api_base_url)
      return base === undefined
        ? undefined
        : { url: `${trimSlash(base)}/v1/account`, authorization: bearer, source: "tenant" }
    }
    // The speech vendors' own account endpoints, as their keys are sent on the media path: Deepgram's
    // projects (Authorization: Token …) and ElevenLabs' user (xi-api-key). A ws(s) root is asked over http(s).
    case "stt": {
      const base = str(cred.extra.api_base_url)
      return base === undefined
        ? undefined
        : { url: `${httpOf(trimSlash(base))}/v1/projects`, authorization: `Token ${cred.secret}`, source: "tenant" }
    }
    case "tts": {
      const base = str(cred.extra.api_base_url)
      return base === undefined
        ? undefined
        : { url: `${httpOf(trimSlash(base))}/v1/user`, headers: { "xi-api-key": cred.secret }, source: "tenant" }
    }
  }
}

/** Validates `cred` against its provider; never throws, and no message carries the secret. */
export async function validateCredential(
  provider: ProviderId,
  cred: CheckedCredential,
  opts: ValidatorOptions,
): Promise<ValidationOutcome> {
  const probe = probeFor(provider, cred, opts.platform)
  if (probe === undefined) return { result: "valid", method: "format" }
  const outbound = outboundFor(
    {
      allowPrivateProviderUrls: opts.allowPrivateProviderUrls ?? false,
      providerResponseLimitBytes: opts.providerResponseLimitBytes ?? DEFAULT_RESPONSE_LIMIT_BYTES,
    },
    probe.source,
  )
  const timeoutMs = opts.timeoutMs ?? 5_000
  const label = LABEL[provider]
  const auth = probe.authorization ?? ""
  const secrets = [cred.secret, auth.slice(auth.indexOf(" ") + 1)]
  // The secret must not reach the stored error, a response or a log line, even if echoed back.
  const scrub = (s: string): string => secrets.reduce((acc, x) => (x === "" ? acc : acc.split(x).join("***")), s)

  const couldNotCheck = (status: number, retryable: boolean) =>
    new ProviderCallError(`${label} answered HTTP ${status}; the credentials could not be checked`, retryable, {
      status,
    })
  const attempt = (): Promise<Attempt<true, ProviderCallError>> =>
    vendorAttempt({
      url: probe.url,
      init: {
        method: "GET",
        headers: {
          ...probe.headers,
          ...(probe.authorization !== undefined && { authorization: probe.authorization }),
          accept: "application/json",
        },
      },
      timeoutMs,
      outbound,
      fetch: opts.fetch,
      // The body is not read into any message (so nothing of it is held): only the status decides.
      body: "discard",
      // A redirect is not an answer about the credential, and must not carry it elsewhere: it is
      // refused (an "answered HTTP 3xx" failure, not retried).
      unreachable: (f) =>
        new ProviderCallError(
          f.status !== undefined
            ? `${label} ${f.message}; the credentials could not be checked`
            : `${label} ${scrub(f.message)}`,
          f.retryable,
          f.status === undefined ? undefined : { status: f.status },
        ),
      answered: ({ status }) =>
        status === 200 ? { ok: true, value: true } : { ok: false, error: couldNotCheck(status, false) },
      refused: ({ status }, kind) =>
        kind === "auth"
          ? new ProviderCallError(`${label} rejected the credentials (HTTP ${status})`, false, { status })
          : couldNotCheck(status, retryableStatus(status)),
    })

  let last: ProviderCallError | undefined
  for (let n = 1; n <= ATTEMPTS; n++) {
    const r = await attempt()
    if (r.ok) return { result: "valid", method: "live" }
    last = r.error
    if (!r.error.retryable || n === ATTEMPTS) break
    await sleep(Math.min(Math.max(RETRY_BACKOFF_MS, r.retryAfterMs ?? 0), MAX_RETRY_AFTER_MS))
  }
  const message = scrub(last!.message)
  return last!.status === 401 || last!.status === 403
    ? { result: "rejected", message }
    : { result: "unavailable", message }
}
