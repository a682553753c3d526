// GET /pricing: the price catalogue, every *_minor and *_display keyed by currency.
import { Effect } from "effect"
import { priceCatalogue } from "../../src/billing/pricing.js"
import { json } from "../reply.js"
import { route } from "../route.js"

const catalogue = priceCatalogue()

export default route({
  method: "GET",
  path: "/pricing",
  auth: "public",
  summary: "Price catalogue in INR and USD",
  tags: ["pricing"],
  handler: () => Effect.succeed(json(catalogue, 200, { "Cache-Control": "public, max-age=300" })),
})
