// The language-model provider contract: a campaign prompt and the tenant's context in, a raw rule
// book out. The offline simulator and the OpenAI-compatible adapter implement the same interface.
import { ProviderCallError } from "../http.util.js"

/** One row of the global objection library, as the generator may draw on it. */
export interface LibraryObjection {
  readonly id: number
  readonly category: string
  readonly trigger_text: string
  readonly rebuttal_template: string
}

export interface RuleBookRequest {
  /** The tenant's natural-language campaign description (nl_prompt). */
  prompt: string
  /** A persona id chosen by the caller (persona_override); wins over anything the prompt says. */
  persona?: string
  /** The workspace currency: the concession policy is written in it. */
  currency: "INR" | "USD"
  /** The workspace's ISO 3166-1 alpha-2 country (e.g. "IN"), for local rules such as India's NCPR. */
  country: string
  /** The workspace plan tier; it sets the concession ceiling. */
  planTier: string
  /** The objection library, loaded by the caller; handlers are drawn from it. */
  objections: ReadonlyArray<LibraryObjection>
}

export interface LanguageModel {
  /** Short stable name ("sim", "openai") for status reports and logs. */
  readonly name: string
  /** The model asked ("sim-1", "gpt-4o-mini"), recorded beside what it generated. */
  readonly model: string
  /**
   * Resolves with the model's rule book as a raw JSON object: unvalidated, the caller runs
   * validateRuleBook on it. Rejects with LlmCallError.
   */
  generateRuleBook(req: RuleBookRequest): Promise<unknown>
}

export class LlmCallError extends ProviderCallError {
  override readonly name = "LlmCallError"
}
