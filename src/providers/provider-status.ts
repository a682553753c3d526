// Which implementation backs each provider kind in this deployment, for /healthz. Every kind
// starts on its built-in simulator; real adapters report "live" once configured.
export type ProviderKind = "telephony" | "llm" | "speech" | "payments" | "mail"

export interface ProviderStatus {
  readonly provider: string
  readonly mode: "simulator" | "live"
  readonly configured: boolean
}

export function providerStatus(): Record<ProviderKind, ProviderStatus> {
  return {
    telephony: { provider: "sim", mode: "simulator", configured: true },
    llm: { provider: "sim", mode: "simulator", configured: true },
    speech: { provider: "sim", mode: "simulator", configured: true },
    payments: { provider: "stub", mode: "simulator", configured: true },
    mail: { provider: "outbox", mode: "simulator", configured: true },
  }
}
