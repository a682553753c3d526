// The stub payment gateway: no network, no money. The checkout link is our own return page, and
// the intent is settled later by POST /billing/webhooks/stub {external_id, status}.
import { randomBytes } from "node:crypto"
import { assertChargeableAmount, trimSlash, type CheckoutRequest, type CheckoutSession, type PaymentGateway } from "./payments.interface.js"

export function makeStubGateway(): PaymentGateway {
  return {
    name: "stub",
    async createCheckout(req: CheckoutRequest): Promise<CheckoutSession> {
      assertChargeableAmount("stub", req.amountMinor)
      const externalId = `stub_${randomBytes(12).toString("hex")}`
      return {
        externalId,
        checkoutUrl: `${trimSlash(req.baseUrl)}/billing/return?status=pending&order_id=${encodeURIComponent(externalId)}`,
      }
    },
  }
}
