// Which implementation backs each provider kind in this deployment, for /healthz. Kinds whose
// real adapters are not configured run on their built-in simulators.
import type { Config } from "../platform/config.js"

export type ProviderKind = "telephony" | "llm" | "speech" | "payments" | "mail"

export interface ProviderStatus {
  readonly provider: string
  readonly mode: "simulator" | "live"
  readonly configured: boolean
}

const simulator = (provider: string): ProviderStatus => ({ provider, mode: "simulator", configured: true })

export function providerStatus(
  config: Pick<
    Config,
    "mailApiUrl" | "mailApiKey" | "gwCard" | "gwUpi" | "gwCardWebhookSecret" | "gwUpiWebhookSecret" | "llmBaseUrl"
  >,
): Record<ProviderKind, ProviderStatus> {
  const gateways = [config.gwCard && "gw_card", config.gwUpi && "gw_upi"].filter(Boolean).join("+")
  // A live gateway without its webhook secret takes payments that never reach the wallet.
  const webhooksReady =
    (!config.gwCard || config.gwCardWebhookSecret !== undefined) &&
    (!config.gwUpi || config.gwUpiWebhookSecret !== undefined)
  return {
    telephony: simulator("sim"),
    // The key is optional (local model servers), so a base URL alone makes the adapter live.
    llm: config.llmBaseUrl !== undefined ? { provider: "openai", mode: "live", configured: true } : simulator("sim"),
    speech: simulator("sim"),
    payments: gateways === "" ? simulator("stub") : { provider: gateways, mode: "live", configured: webhooksReady },
    mail:
      config.mailApiUrl !== undefined && config.mailApiKey !== undefined
        ? { provider: "http", mode: "live", configured: true }
        : simulator("outbox"),
  }
}
