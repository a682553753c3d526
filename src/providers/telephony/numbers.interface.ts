// The number-inventory contract of a telephony provider: find numbers for sale, buy one with our
// webhooks set, take over a number the account already owns, and give a number back.
import { ProviderCallError } from "../http.util.js"

export type NumberProviderName = "sim" | "telco_a"

export interface NumberSearch {
  /** ISO 3166 alpha-2 as the provider takes it (upper case), e.g. US, IN. */
  readonly country: string
  /** Digits the number should start with after the country code (NANP: the 3-digit area code). */
  readonly areaCode?: string
  /** 1 to 50. */
  readonly limit: number
}

export interface AvailableNumber {
  readonly phone_e164: string
  readonly country: string
  readonly region?: string
  readonly locality?: string
  readonly capabilities: { readonly voice: boolean; readonly sms: boolean }
  /** What the provider charges a month, when it says (minor units of its own currency). */
  readonly monthly_cost_minor?: number
}

/** Where the provider sends the number's inbound calls and call-status callbacks (both POST). */
export interface NumberWebhooks {
  readonly voiceUrl: string
  readonly statusUrl: string
}

export interface NumberInventory {
  readonly provider: NumberProviderName
  search(q: NumberSearch): Promise<AvailableNumber[]>
  /** Buys `phoneE164` on the account with the webhooks set. A number the account already owns is taken over instead. */
  provision(req: { readonly phoneE164: string } & NumberWebhooks): Promise<{ providerNumberId: string }>
  /** Points a number the account already owns at our webhooks (import). */
  registerOwned(req: { readonly phoneE164: string } & NumberWebhooks): Promise<{ providerNumberId: string }>
  /**
   * Gives a bought number back to the provider (which ends its webhooks), or with `keep` only
   * clears its webhooks (an imported number stays the owner's). A number already gone is fine.
   */
  release(providerNumberId: string, opts?: { readonly keep?: boolean }): Promise<void>
}

/**
 * Why a number call failed, where the caller answers differently: `not_available` (someone else
 * has it, or it is not for sale), `not_owned` (import of a number the account lacks),
 * `unauthorised` (the account's credentials were refused), `failed` (anything else).
 */
export type NumberFailure = "not_available" | "not_owned" | "unauthorised" | "failed"

export class NumberInventoryError extends ProviderCallError {
  override readonly name = "NumberInventoryError"
  constructor(
    message: string,
    retryable: boolean,
    readonly reason: NumberFailure,
    options?: { cause?: unknown; status?: number },
  ) {
    super(message, retryable, options)
  }
}
