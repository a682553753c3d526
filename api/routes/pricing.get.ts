// GET /pricing: the price catalogue, every *_minor and *_display keyed by currency.
import { Effect } from "effect"
import { priceCatalogue } from "../../src/billing/pricing.js"
import { bytes } from "../reply.js"
import { route } from "../route.js"

// A constant: serialised once, written in the request callback.
const reply = bytes("application/json; charset=utf-8", JSON.stringify(priceCatalogue()), 200, {
  "Cache-Control": "public, max-age=300",
})

export default route({
  method: "GET",
  path: "/pricing",
  auth: "public",
  summary: "Price catalogue in INR and USD",
  tags: ["pricing"],
  constant: reply,
  handler: () => Effect.succeed(reply),
})
