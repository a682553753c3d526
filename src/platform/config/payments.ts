// How top-ups are paid: the card and UPI gateways with their webhook secrets, the generic payment
// webhook's secret, and whether the unsigned stub gateway may settle (PAYMENTS).
import { z } from "zod"
import { optionalString, type Parsed } from "./fields.js"
import type { StorageEnv } from "./storage.js"

export const paymentsEnv = {
  /** Card gateway (USD checkouts): API base, secret key, webhook signing secret. */
  GW_CARD_API_URL: optionalString.pipe(z.url().optional()),
  GW_CARD_SECRET_KEY: optionalString,
  GW_CARD_WEBHOOK_SECRET: optionalString,
  /** UPI gateway (INR orders): API base, key id and secret, webhook signing secret. */
  GW_UPI_API_URL: optionalString.pipe(z.url().optional()),
  GW_UPI_KEY_ID: optionalString,
  GW_UPI_KEY_SECRET: optionalString,
  GW_UPI_WEBHOOK_SECRET: optionalString,
  /** The UPI gateway's browser checkout script, loaded by /billing/gw_upi/checkout. */
  GW_UPI_CHECKOUT_SCRIPT: optionalString.pipe(z.url({ protocol: /^https?$/ }).optional()),
  /** Signing secret of the generic payment webhook (X-SVC-Signature). */
  PAYMENT_WEBHOOK_SECRET: optionalString,
  /**
   * "stub" enables the stub payment gateway (unsigned settlement: for trying Parley, never for
   * production); "gateways" allows only the real ones. Unset → "stub" on the embedded database
   * (no DATABASE_URL), "gateways" otherwise. The stub is off whenever a real gateway is configured.
   */
  PAYMENTS: optionalString.pipe(z.enum(["stub", "gateways"], { error: 'must be "stub" or "gateways"' }).optional()),
}
export type PaymentsEnv = Parsed<typeof paymentsEnv>

export type PaymentsConfig = Readonly<{
  gwCard: { apiUrl: string; secretKey: string } | undefined
  gwCardWebhookSecret: string | undefined
  gwUpi: { apiUrl: string; keyId: string; keySecret: string } | undefined
  gwUpiWebhookSecret: string | undefined
  gwUpiCheckoutScript: string | undefined
  paymentWebhookSecret: string | undefined
  /** Whether the unsigned stub gateway may settle top-ups (see PAYMENTS). */
  paymentsMode: "stub" | "gateways"
}>

/** PAYMENTS' default follows the database: the stub is for trying Parley on the embedded one. */
export function paymentsConfig(e: PaymentsEnv & Pick<StorageEnv, "DATABASE_URL">): PaymentsConfig {
  return {
    // A gateway is live only with everything it needs; otherwise top-ups use the stub gateway.
    gwCard:
      e.GW_CARD_API_URL && e.GW_CARD_SECRET_KEY
        ? { apiUrl: e.GW_CARD_API_URL.replace(/\/+$/, ""), secretKey: e.GW_CARD_SECRET_KEY }
        : undefined,
    gwCardWebhookSecret: e.GW_CARD_WEBHOOK_SECRET,
    gwUpi:
      e.GW_UPI_API_URL && e.GW_UPI_KEY_ID && e.GW_UPI_KEY_SECRET
        ? { apiUrl: e.GW_UPI_API_URL.replace(/\/+$/, ""), keyId: e.GW_UPI_KEY_ID, keySecret: e.GW_UPI_KEY_SECRET }
        : undefined,
    gwUpiWebhookSecret: e.GW_UPI_WEBHOOK_SECRET,
    gwUpiCheckoutScript: e.GW_UPI_CHECKOUT_SCRIPT,
    paymentWebhookSecret: e.PAYMENT_WEBHOOK_SECRET,
    paymentsMode: e.PAYMENTS ?? (e.DATABASE_URL === undefined ? "stub" : "gateways"),
  }
}
