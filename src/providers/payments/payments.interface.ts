// The payment-gateway contract: one top-up intent in, a checkout the payer is sent to out. The stub,
// the card gateway (gw_card) and the UPI gateway (gw_upi) implement it; webhooks settle intents.
import { describeNetworkError, parseRetryAfter, ProviderCallError, withRetries, type Attempt } from "../http.util.js"

export type GatewayName = "gw_card" | "gw_upi" | "stub"

export type Currency = "INR" | "USD"

/** What the billing service asks a gateway for: a checkout for one stored top-up intent. */
export interface CheckoutRequest {
  intentId: number
  tenantId: number
  /** Minor units of `currency` (paise, cents); a positive integer. */
  amountMinor: number
  currency: Currency
  /** Where the payer's browser lands after paying or giving up (status and order id are appended). */
  returnUrl: string
  /** Our public base (no trailing slash needed), for the pages we host ourselves. */
  baseUrl: string
}

export interface CheckoutSession {
  /** The gateway's id for the checkout (session id, order id): what its webhooks name. */
  externalId: string
  /** Where to send the payer. */
  checkoutUrl: string
}

export interface PaymentGateway {
  readonly name: GatewayName
  /** Resolves once the gateway has created the checkout; rejects with PaymentGatewayError. */
  createCheckout(req: CheckoutRequest): Promise<CheckoutSession>
}

export class PaymentGatewayError extends ProviderCallError {
  override readonly name = "PaymentGatewayError"
}

/** Refuses, before any network call, an amount no gateway could charge. */
export function assertChargeableAmount(gateway: GatewayName, amountMinor: number): void {
  if (!Number.isSafeInteger(amountMinor) || amountMinor <= 0) {
    throw new PaymentGatewayError(`${gateway}: amount must be a positive integer of minor units, got ${String(amountMinor)}`, false)
  }
}

// ---------------------------------------------------------------------------------------------
// The HTTP call both real adapters share: per-attempt timeout, bounded retries with backoff,
// typed errors, and credentials scrubbed from every message.

export interface GatewayPost {
  readonly gateway: GatewayName
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  readonly timeoutMs: number
  readonly fetch: typeof fetch
  /** Strings that must never appear in an error message (keys, encoded credentials). */
  readonly secrets: readonly string[]
  /** Statuses besides 429 and 5xx worth another attempt (e.g. an idempotency-lock 409). */
  readonly alsoRetry?: readonly number[]
}

/** How much of a gateway's error body goes into the error message. */
const ERROR_DETAIL_CHARS = 200

type GatewayAttempt = Attempt<Record<string, unknown>, PaymentGatewayError>

/** POSTs up to MAX_ATTEMPTS times; resolves with the parsed JSON object of the first 2xx answer. */
export async function postToGateway(call: GatewayPost): Promise<Record<string, unknown>> {
  const secrets = call.secrets.filter((s) => s !== "")
  const scrub = (s: string): string => secrets.reduce((acc, secret) => acc.split(secret).join("***"), s)

  async function attempt(): Promise<GatewayAttempt> {
    let res: Response
    let text: string
    try {
      res = await call.fetch(call.url, {
        method: "POST",
        headers: { accept: "application/json", ...call.headers },
        body: call.body,
        signal: AbortSignal.timeout(call.timeoutMs),
      })
      text = await res.text()
    } catch (e) {
      const timedOut = e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError")
      const reason = timedOut ? `no answer within ${call.timeoutMs} ms` : scrub(describeNetworkError(e))
      // The cause may carry the request (and so the credentials): keep it only when it cannot.
      return { ok: false, error: new PaymentGatewayError(`${call.gateway} API unreachable: ${reason}`, true) }
    }
    if (res.ok) {
      const body = parseObject(text)
      if (body !== undefined) return { ok: true, value: body }
      // Accepted but not understood (a wrong base URL answering 200, say): another attempt would
      // not help and might create a second checkout.
      return { ok: false, error: new PaymentGatewayError(`${call.gateway} API answered ${res.status} without a JSON object`, false, { status: res.status }) }
    }
    const detail = scrub(errorDetail(text)).replace(/\s+/g, " ").trim().slice(0, ERROR_DETAIL_CHARS)
    const message = `${call.gateway} API answered ${res.status}${detail === "" ? "" : `: ${detail}`}`
    if (res.status === 429 || res.status >= 500 || (call.alsoRetry ?? []).includes(res.status)) {
      const retryAfterMs = parseRetryAfter(res.headers.get("retry-after"))
      return { ok: false, error: new PaymentGatewayError(message, true, { status: res.status }), ...(retryAfterMs !== undefined && { retryAfterMs }) }
    }
    // Any other 4xx (bad key, bad parameters) fails the same way every time.
    return { ok: false, error: new PaymentGatewayError(message, false, { status: res.status }) }
  }

  return withRetries(attempt, (message, cause) => new PaymentGatewayError(message, true, { cause, ...(cause.status !== undefined && { status: cause.status }) }))
}

/** A non-empty string field of a gateway answer, or undefined. */
export function stringField(body: Record<string, unknown>, key: string): string | undefined {
  const v = body[key]
  return typeof v === "string" && v !== "" ? v : undefined
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(text)
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>
  } catch {
    // Not JSON: the caller reports it.
  }
  return undefined
}

/** The human part of a gateway error body: error.message (card) or error.description (UPI), else the text. */
function errorDetail(text: string): string {
  const body = parseObject(text)
  const err = body?.error
  if (typeof err === "object" && err !== null) {
    const e = err as Record<string, unknown>
    const human = typeof e.message === "string" ? e.message : typeof e.description === "string" ? e.description : undefined
    if (human !== undefined) return typeof e.code === "string" ? `${e.code}: ${human}` : human
  }
  return text
}


/** `url` with `query` appended (before any fragment); values are used verbatim, already encoded. */
export function appendQuery(url: string, query: string): string {
  const hash = url.indexOf("#")
  const base = hash === -1 ? url : url.slice(0, hash)
  const fragment = hash === -1 ? "" : url.slice(hash)
  const sep = base.includes("?") ? (base.endsWith("?") || base.endsWith("&") ? "" : "&") : "?"
  return `${base}${sep}${query}${fragment}`
}

export const trimSlash = (s: string): string => s.replace(/\/+$/, "")
