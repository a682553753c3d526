// The payment gateways as a service: INR goes to gw_upi and USD to gw_card when their keys are
// configured. The unsigned stub gateway is opt-in: only with PAYMENTS=stub and no real gateway.
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import type { Config } from "../platform/config.js"
import { makeGwCardGateway } from "./payments/gw-card.payments.js"
import { makeGwUpiGateway } from "./payments/gw-upi.payments.js"
import type { Currency, PaymentGateway } from "./payments/payments.interface.js"
import { makeStubGateway } from "./payments/stub.payments.js"

export interface PaymentsService {
  /**
   * The gateway that takes payments in this currency, or undefined when none may: a currency
   * without a real gateway has none unless the whole deployment runs the stub.
   */
  forCurrency(c: Currency): PaymentGateway | undefined
  /**
   * "stub": PAYMENTS=stub and no real gateway configured, so the stub settles every currency on
   * its unsigned webhook (tests, demos, development). "gateways": only real gateways take money.
   */
  readonly mode: "stub" | "gateways"
  /** Which real gateways are configured (for /healthz and the webhook routes). */
  readonly live: { readonly gw_card: boolean; readonly gw_upi: boolean }
}

export class Payments extends Context.Tag("parley/Payments")<Payments, PaymentsService>() {}

/** Builds the service from configuration; `fetch` replaces the global one (tests). */
export function makePayments(
  config: Pick<Config, "gwCard" | "gwUpi" | "paymentsMode">,
  options: { fetch?: typeof fetch } = {},
): PaymentsService {
  const withFetch = options.fetch === undefined ? {} : { fetch: options.fetch }
  const gwCard = config.gwCard === undefined ? undefined : makeGwCardGateway({ ...config.gwCard, ...withFetch })
  const gwUpi = config.gwUpi === undefined ? undefined : makeGwUpiGateway({ ...config.gwUpi, ...withFetch })
  // A deployment with any real gateway never runs the stub, whatever PAYMENTS says: a currency
  // left without its gateway refuses payments instead of crediting on an unsigned request.
  const stub =
    config.paymentsMode === "stub" && gwCard === undefined && gwUpi === undefined ? makeStubGateway() : undefined
  return {
    forCurrency: (c) => stub ?? (c === "INR" ? gwUpi : gwCard),
    mode: stub === undefined ? "gateways" : "stub",
    live: { gw_card: gwCard !== undefined, gw_upi: gwUpi !== undefined },
  }
}

export const PaymentsLive: Layer.Layer<Payments, never, AppConfig> = Layer.effect(
  Payments,
  Effect.map(AppConfig, (config) => makePayments(config)),
)
