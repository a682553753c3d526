// The price catalogue (GET /pricing): what a minute, the byok fee, the trial credit and a top-up
// cost in each currency. Billing reads the same constants, so the page and the wallet agree.
import { CURRENCIES, type Currency, formatAmount } from "../platform/money.js"

export type PerCurrency<T> = Readonly<Record<Currency, T>>

/** Bundled (all-inclusive) price of one connected minute, in minor units. */
export const RATE_PER_MINUTE_MINOR: PerCurrency<number> = { INR: 700, USD: 10 }
/**
 * Hosted speech on the platform's accounts (STT_API_KEY, SPEECH_API_KEY): a call heard through the
 * platform's hosted recogniser or voice pays for it per connected minute on top of the bundled rate,
 * billed per second with it. The offline engines and a workspace's own keys add nothing.
 */
export type HostedSpeechPart = "recognition" | "voice"
export const HOSTED_SPEECH_PER_MINUTE_MINOR: Readonly<Record<HostedSpeechPart, PerCurrency<number>>> = {
  recognition: { INR: 100, USD: 1 },
  voice: { INR: 300, USD: 4 },
}

/** The per-minute rate of a call on the platform's accounts, with the hosted speech it is heard through. */
export const callRatePerMinuteMinor = (currency: Currency, hosted: readonly HostedSpeechPart[] = []): number =>
  RATE_PER_MINUTE_MINOR[currency] +
  [...new Set(hosted)].reduce((sum, part) => sum + HOSTED_SPEECH_PER_MINUTE_MINOR[part][currency], 0)

/** Monthly platform fee of the byok plan. */
export const BYOK_FEE_MINOR: PerCurrency<number> = { INR: 249_900, USD: 2_900 }
/**
 * Monthly rental of a phone number bought under the platform's account (bundled workspaces):
 * the first month is charged from the wallet when the number is provisioned, then each month
 * until it is released (no refund of a part month). byok workspaces' numbers live on their own
 * provider account, which bills them; Parley charges nothing for those.
 */
export const NUMBER_MONTHLY_MINOR: PerCurrency<number> = { INR: 50_000, USD: 115 }
/**
 * Post-call analysis of one connected call on the platform's model (or its simulator, which stands
 * for it): ₹0.50 / $0.01, charged once per analysed call. Analyses on a workspace's own model are
 * not charged.
 */
export const ANALYSIS_PER_CALL_MINOR: PerCurrency<number> = { INR: 50, USD: 1 }
/** Credited at signup as a ledger entry. */
export const TRIAL_CREDIT_MINOR: PerCurrency<number> = { INR: 20_000, USD: 300 }
/** Smallest top-up the checkout pages offer; the API accepts 1 to 10,000,000 minor units. */
export const TOPUP_MINIMUM_MINOR: PerCurrency<number> = { INR: 50_000, USD: 1_000 }
/** Top-up buttons shown with the wallet. */
export const TOPUP_PRESETS_MINOR: PerCurrency<readonly number[]> = {
  INR: [50_000, 100_000, 250_000, 500_000],
  USD: [1_000, 2_500, 5_000, 10_000],
}

/**
 * Metered usage reported through POST /api/internal/usage-events, charged from the wallet: `minor`
 * minor units per `per` units of `unit` (the event's unit must match; a different unit is recorded
 * as unbilled). An event costs ceil(quantity × minor / per), rounded up per event to a whole minor
 * unit. A kind not listed here is recorded and never charged.
 */
export interface UsagePrice {
  readonly unit: string
  readonly per: number
  readonly minor: PerCurrency<number>
}
export const USAGE_PRICES: Readonly<Record<string, UsagePrice>> = {
  /** ₹0.25 / $0.01 per SMS message. */
  sms: { unit: "message", per: 1, minor: { INR: 25, USD: 1 } },
  /** ₹0.10 / $0.01 per 10 emails. */
  email: { unit: "message", per: 10, minor: { INR: 10, USD: 1 } },
  /** ₹0.50 / $0.01 per 1,000 LLM tokens. */
  llm_tokens: { unit: "token", per: 1000, minor: { INR: 50, USD: 1 } },
}

/**
 * Autocharge bounds. The amount is at least the smallest top-up and each of amount and threshold
 * at most ten times the largest preset: ₹50,000 / $1,000. A write-scope key that sets them can
 * never make one off-session charge larger than that.
 */
export const AUTOCHARGE_MAX_MINOR: PerCurrency<number> = {
  INR: 10 * Math.max(...TOPUP_PRESETS_MINOR.INR),
  USD: 10 * Math.max(...TOPUP_PRESETS_MINOR.USD),
}
/** Consecutive failed autocharges after which autocharge turns itself off and the admins are told. */
export const AUTOCHARGE_MAX_FAILURES = 3

/**
 * Largest concession (discount, waiver) a rule book may let the agent offer on one call, in minor
 * units: ₹5,000 or $100. Every concession still goes to a human approval; this bounds what can be
 * asked for.
 */
export const MAX_CONCESSION_MINOR: PerCurrency<number> = { INR: 500_000, USD: 10_000 }

/**
 * The concession ceiling for a tenant. Every plan tier shares one ceiling today; the tier is a
 * parameter so a plan-specific ceiling changes this function and no caller.
 */
export function maxConcessionMinor(currency: Currency, _planTier: string): number {
  return MAX_CONCESSION_MINOR[currency]
}

/**
 * The utilisation example: one agent line dialing through business hours, 8 hours a day on
 * 22 working days, at the bundled rate.
 */
const EXAMPLE_HOURS_PER_MONTH = 8 * 22

const perCurrency = <T>(f: (c: Currency) => T): PerCurrency<T> => ({ INR: f("INR"), USD: f("USD") })
const display = (minor: PerCurrency<number>): PerCurrency<string> => perCurrency((c) => formatAmount(minor[c], c))

export function priceCatalogue() {
  const minutes = EXAMPLE_HOURS_PER_MONTH * 60
  return {
    currencies: CURRENCIES,
    minor_unit_digits: perCurrency(() => 2),
    plans: {
      all_inclusive: {
        billing: "per connected minute, billed per second",
        rate_per_minute_minor: RATE_PER_MINUTE_MINOR,
        rate_per_minute_display: display(RATE_PER_MINUTE_MINOR),
      },
      byok: {
        billing: "monthly platform fee; calls are billed by your own providers",
        fee_minor: BYOK_FEE_MINOR,
        fee_display: display(BYOK_FEE_MINOR),
      },
    },
    hosted_speech: {
      billing:
        "per connected minute on top of the all-inclusive rate, billed per second, for calls heard through the " +
        "platform's hosted recogniser or voice; none with the offline engines or your own speech keys (byok)",
      recognition_per_minute_minor: HOSTED_SPEECH_PER_MINUTE_MINOR.recognition,
      recognition_per_minute_display: display(HOSTED_SPEECH_PER_MINUTE_MINOR.recognition),
      voice_per_minute_minor: HOSTED_SPEECH_PER_MINUTE_MINOR.voice,
      voice_per_minute_display: display(HOSTED_SPEECH_PER_MINUTE_MINOR.voice),
    },
    numbers: {
      billing:
        "monthly per number on the platform's account, from the wallet; first month at provisioning, none after " +
        "release",
      monthly_minor: NUMBER_MONTHLY_MINOR,
      monthly_display: display(NUMBER_MONTHLY_MINOR),
    },
    call_analysis: {
      billing: "per analysed call on the platform's language model; none on your own model (byok) or when turned off",
      per_call_minor: ANALYSIS_PER_CALL_MINOR,
      per_call_display: display(ANALYSIS_PER_CALL_MINOR),
    },
    trial_credit_minor: TRIAL_CREDIT_MINOR,
    trial_credit_display: display(TRIAL_CREDIT_MINOR),
    topup: {
      minimum_minor: TOPUP_MINIMUM_MINOR,
      minimum_display: display(TOPUP_MINIMUM_MINOR),
      presets_minor: TOPUP_PRESETS_MINOR,
      autocharge_max_minor: AUTOCHARGE_MAX_MINOR,
    },
    examples: {
      max_utilisation_hours_per_month: EXAMPLE_HOURS_PER_MONTH,
      max_utilisation_minutes: minutes,
      max_utilisation_cost_display: perCurrency((c) => formatAmount(minutes * RATE_PER_MINUTE_MINOR[c], c)),
    },
  }
}
