// A rule book as the simulated writer makes it for a plain prompt (INR, free plan, no objection
// library), validated: for suites of the conversation that need a book, not a particular one.
import { type RuleBook, validateRuleBook } from "../../src/workflows/rulebook.schema.js"
import { simulateRuleBook } from "../../src/workflows/rulebook.sim-writer.js"

export function simulatedBook(over: Partial<RuleBook> = {}): RuleBook {
  const raw = simulateRuleBook({
    prompt: "Call our broadband customers about the new fibre plan.",
    currency: "INR",
    country: "IN",
    planTier: "free",
    objections: [],
  })
  const v = validateRuleBook({ ...raw, ...over }, { currency: "INR", planTier: "free" })
  if (!v.ok) throw new Error(JSON.stringify(v.errors))
  return v.value
}
