// The payment-gateway contract: one top-up intent in, a checkout the payer is sent to out. The stub,
// the card gateway (gw_card) and the UPI gateway (gw_upi) implement it; webhooks settle intents.
import { type Attempt, ProviderCallError, parseJsonObject, withRetries } from "../http.util.js"
import { PLATFORM_DEFAULT, retryableStatus, vendorAttempt } from "../outbound.js"

export type GatewayName = "gw_card" | "gw_upi" | "stub"

import type { Currency } from "../../platform/money.js"

export type { Currency }

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
  /** Ask the gateway to keep the payer's method for later off-session charges (autocharge). */
  savePaymentMethod?: boolean
}

export interface CheckoutSession {
  /** The gateway's id for the checkout (session id, order id): what its webhooks name. */
  externalId: string
  /** Where to send the payer. */
  checkoutUrl: string
}

/** An off-session charge of a method saved at an earlier checkout, for one stored intent. */
export interface SavedChargeRequest {
  intentId: number
  tenantId: number
  amountMinor: number
  currency: Currency
  /** The gateway's customer the method belongs to. */
  customerId: string
  /** The saved method: a card PaymentMethod id, or a UPI recurring token id. */
  methodId: string
}

export interface SavedChargeResult {
  /** succeeded: captured now; pending: the gateway's webhook will tell; failed: declined or refused. */
  readonly status: "succeeded" | "pending" | "failed"
  /** The gateway's id for the charge, as its webhooks name it (payment intent id, order id). */
  readonly externalId: string | undefined
  /** What the gateway says it charged, checked against the intent before crediting. */
  readonly amountMinor: number | undefined
  readonly currency: string | undefined
  /** Why a charge failed, for the log and the event record. */
  readonly reason?: string
  readonly raw: unknown
}

export interface PaymentGateway {
  readonly name: GatewayName
  /** Resolves once the gateway has created the checkout; rejects with PaymentGatewayError. */
  createCheckout(req: CheckoutRequest): Promise<CheckoutSession>
  /**
   * Charges a saved method without the payer present. A decline resolves as `failed`; rejects
   * with PaymentGatewayError only when the outcome is unknown (unreachable, 5xx after retries).
   */
  chargeSaved?(req: SavedChargeRequest): Promise<SavedChargeResult>
}

export class PaymentGatewayError extends ProviderCallError {
  override readonly name = "PaymentGatewayError"
}

/** Refuses, before any network call, an amount no gateway could charge. */
export function assertChargeableAmount(gateway: GatewayName, amountMinor: number): void {
  if (!Number.isSafeInteger(amountMinor) || amountMinor <= 0) {
    throw new PaymentGatewayError(
      `${gateway}: amount must be a positive integer of minor units, got ${String(amountMinor)}`,
      false,
    )
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

  const attempt = (): Promise<GatewayAttempt> =>
    vendorAttempt({
      url: call.url,
      init: { method: "POST", headers: { accept: "application/json", ...call.headers }, body: call.body },
      timeoutMs: call.timeoutMs,
      // GW_*_API_URL are the platform's own: no address guard, but no redirects and a capped answer.
      outbound: PLATFORM_DEFAULT,
      fetch: call.fetch,
      // The cause may carry the request (and so the credentials): keep none.
      unreachable: (f) =>
        new PaymentGatewayError(
          `${call.gateway} API ${scrub(f.message)}`,
          f.retryable,
          f.status === undefined ? undefined : { status: f.status },
        ),
      answered: ({ status, text }) => {
        const body = parseJsonObject(text)
        if (body !== undefined) return { ok: true, value: body }
        // Accepted but not understood (a wrong base URL answering 200, say): another attempt would
        // not help and might create a second checkout.
        return {
          ok: false,
          error: new PaymentGatewayError(`${call.gateway} API answered ${status} without a JSON object`, false, {
            status,
          }),
        }
      },
      refused: ({ status, text }) => {
        const detail = scrub(errorDetail(text)).replace(/\s+/g, " ").trim().slice(0, ERROR_DETAIL_CHARS)
        // 429, 5xx and the gateway's own retryable statuses may pass later; any other 4xx (bad key,
        // bad parameters) fails the same way every time.
        return new PaymentGatewayError(
          `${call.gateway} API answered ${status}${detail === "" ? "" : `: ${detail}`}`,
          retryableStatus(status) || (call.alsoRetry ?? []).includes(status),
          { status },
        )
      },
    })

  return withRetries(
    attempt,
    (message, cause) =>
      new PaymentGatewayError(message, true, { cause, ...(cause.status !== undefined && { status: cause.status }) }),
  )
}

/**
 * Runs a gateway call whose refusal is an answer: a 4xx that retrying cannot change (a decline,
 * a detached method) resolves as a failed charge; unknown outcomes still reject.
 */
export async function declinedAsFailure(call: () => Promise<SavedChargeResult>): Promise<SavedChargeResult> {
  try {
    return await call()
  } catch (e) {
    if (
      e instanceof PaymentGatewayError &&
      !e.retryable &&
      e.status !== undefined &&
      e.status >= 400 &&
      e.status < 500
    ) {
      return {
        status: "failed",
        externalId: undefined,
        amountMinor: undefined,
        currency: undefined,
        reason: e.message,
        raw: { status: e.status },
      }
    }
    throw e
  }
}

/** A safe integer field of a gateway answer, or undefined. */
export function intField(body: Record<string, unknown>, key: string): number | undefined {
  const v = body[key]
  return typeof v === "number" && Number.isSafeInteger(v) ? v : undefined
}

/** A non-empty string field of a gateway answer, or undefined. */
export function stringField(body: Record<string, unknown>, key: string): string | undefined {
  const v = body[key]
  return typeof v === "string" && v !== "" ? v : undefined
}

/** The human part of a gateway error body: error.message (card) or error.description (UPI), else the text. */
function errorDetail(text: string): string {
  const body = parseJsonObject(text)
  const err = body?.error
  if (typeof err === "object" && err !== null) {
    const e = err as Record<string, unknown>
    const human =
      typeof e.message === "string" ? e.message : typeof e.description === "string" ? e.description : undefined
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
