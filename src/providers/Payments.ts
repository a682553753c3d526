// The payment gateways as a service: INR top-ups go to gw_upi and USD to gw_card when their keys
// are configured; any currency without a configured gateway uses the stub gateway.
import { Context, Effect, Layer } from "effect"
import type { Config } from "../config.js"
import { AppConfig } from "../services/AppConfig.js"
import { makeGwCardGateway } from "./payments/gw-card.payments.js"
import { makeGwUpiGateway } from "./payments/gw-upi.payments.js"
import type { Currency, PaymentGateway } from "./payments/payments.interface.js"
import { makeStubGateway } from "./payments/stub.payments.js"

export interface PaymentsService {
  /** The gateway that takes top-ups in this currency. */
  forCurrency(c: Currency): PaymentGateway
  /** Always present, for intents created while no gateway was configured. */
  readonly stub: PaymentGateway
  /** Which real gateways are configured (for /healthz and the webhook routes). */
  readonly live: { readonly gw_card: boolean; readonly gw_upi: boolean }
}

export class Payments extends Context.Tag("parley/Payments")<Payments, PaymentsService>() {}

/** Builds the service from configuration; `fetch` replaces the global one (tests). */
export function makePayments(config: Pick<Config, "gwCard" | "gwUpi">, options: { fetch?: typeof fetch } = {}): PaymentsService {
  const stub = makeStubGateway()
  const withFetch = options.fetch === undefined ? {} : { fetch: options.fetch }
  const gwCard = config.gwCard === undefined ? undefined : makeGwCardGateway({ ...config.gwCard, ...withFetch })
  const gwUpi = config.gwUpi === undefined ? undefined : makeGwUpiGateway({ ...config.gwUpi, ...withFetch })
  return {
    forCurrency: (c) => (c === "INR" ? (gwUpi ?? stub) : (gwCard ?? stub)),
    stub,
    live: { gw_card: gwCard !== undefined, gw_upi: gwUpi !== undefined },
  }
}

export const PaymentsLive: Layer.Layer<Payments, never, AppConfig> = Layer.effect(
  Payments,
  Effect.map(AppConfig, (config) => makePayments(config)),
)
