// Amounts as people read and hear them ("₹400.00", "$12.50"): one formatter for the price list,
// the billing pages and what the agent says, so providers and billing share it without importing each other.
/** The currencies a workspace's wallet, prices and agreed amounts are in. */
export const CURRENCIES = ["INR", "USD"] as const
export type Currency = (typeof CURRENCIES)[number]

const money = (locale: string, currency: Currency) =>
  new Intl.NumberFormat(locale, { style: "currency", currency, minimumFractionDigits: 2 })
const formatters: Readonly<Record<Currency, Intl.NumberFormat>> = {
  INR: money("en-IN", "INR"),
  USD: money("en-US", "USD"),
}

/** `amountMinor` minor units (1/100) of `currency`, formatted for speech and prompts. */
export function formatAmount(amountMinor: number, currency: Currency): string {
  return formatters[currency].format(amountMinor / 100)
}
