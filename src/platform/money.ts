// Amounts as people read and hear them ("₹400.00", "$12.50"): one formatter for the price list,
// the billing pages and what the agent says, so providers and billing share it without importing each other.
export type AgentCurrency = "INR" | "USD"

const money = (locale: string, currency: AgentCurrency) =>
  new Intl.NumberFormat(locale, { style: "currency", currency, minimumFractionDigits: 2 })
const formatters: Readonly<Record<AgentCurrency, Intl.NumberFormat>> = {
  INR: money("en-IN", "INR"),
  USD: money("en-US", "USD"),
}

/** `amountMinor` minor units (1/100) of `currency`, formatted for speech and prompts. */
export function formatAmount(amountMinor: number, currency: AgentCurrency): string {
  return formatters[currency].format(amountMinor / 100)
}
