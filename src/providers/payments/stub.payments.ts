// The stub payment gateway: no network, no money. The checkout link is our own return page, and
// the intent is settled later by POST /billing/webhooks/stub {external_id, status}. It exists only
// in deployments that run PAYMENTS=stub with no real gateway (Payments.ts decides).
import { randomBytes } from "node:crypto"
import {
  assertChargeableAmount,
  type CheckoutRequest,
  type CheckoutSession,
  type PaymentGateway,
  type SavedChargeRequest,
  type SavedChargeResult,
  trimSlash,
} from "./payments.interface.js"

export function makeStubGateway(): PaymentGateway {
  return {
    name: "stub",
    async createCheckout(req: CheckoutRequest): Promise<CheckoutSession> {
      assertChargeableAmount("stub", req.amountMinor)
      const externalId = `stub_${randomBytes(12).toString("hex")}`
      return {
        externalId,
        checkoutUrl:
          `${trimSlash(req.baseUrl)}/billing/return?status=pending` + `&order_id=${encodeURIComponent(externalId)}`,
      }
    },
    // A stub-saved method (from a stub top-up settled with save_payment_method) always pays.
    async chargeSaved(req: SavedChargeRequest): Promise<SavedChargeResult> {
      assertChargeableAmount("stub", req.amountMinor)
      return {
        status: "succeeded",
        externalId: `stub_ac_${randomBytes(12).toString("hex")}`,
        amountMinor: req.amountMinor,
        currency: req.currency,
        raw: { stub: true },
      }
    },
  }
}
