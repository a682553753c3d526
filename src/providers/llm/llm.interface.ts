// The language-model provider contract: a campaign prompt and the tenant's context in, a raw rule
// book out; a rule book and a call's transcript in, the agent's next line out. The offline
// simulator and the OpenAI-compatible adapter implement the same interface.
import type { RuleBook } from "../../workflows/rulebook.schema.js"
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
  /**
   * The agent's next line in a call, from its rule book and the transcript so far. Rejects with
   * LlmCallError (the conversation loop retries once, then ends the call politely).
   */
  reply(req: ReplyRequest): Promise<AgentReply>
}

export class LlmCallError extends ProviderCallError {
  override readonly name = "LlmCallError"
}

// ---------------------------------------------------------------------------------------------
// Answering turns

/** What the agent may propose; each needs a human's approval when its rule-book policy says so. */
export type ProposalAction = "concession" | "callback" | "escalate"

export interface Proposal {
  readonly action: ProposalAction
  /** The concession in the rule book's currency, minor units; null for callback and escalate. */
  readonly value_minor: number | null
  /** Why the agent proposes it, for the human who decides. */
  readonly rationale: string
}

export type DecisionStatus = "approved" | "denied" | "timeout"

export interface TranscriptLine {
  readonly speaker: "agent" | "callee"
  readonly text: string
}

export interface ReplyRequest {
  ruleBook: RuleBook
  /** The call so far, oldest first; the agent's first line (disclosure + opening) included. */
  history: ReadonlyArray<TranscriptLine>
  callee: { name: string | null }
  agentName: string
  company: string
  /**
   * What the human decided about the call's latest proposal, if any. Present on the answer right
   * after the decision (history then ends with the agent's proposal line) and on every later one.
   */
  decision?: { action: ProposalAction; status: DecisionStatus }
}

/**
 * Outcomes the model may end a call with. The conversation loop adds its own (callee_hung_up,
 * agent_error, aborted, voicemail_left, voicemail).
 */
export const AGENT_OUTCOMES = [
  "agreed",
  "agreed_with_concession",
  "declined",
  "callback_scheduled",
  "escalated",
  "pending_approval",
  "do_not_call",
  "no_decision",
] as const
export type AgentOutcome = (typeof AGENT_OUTCOMES)[number]

export interface AgentReply {
  /** What the agent says next; never empty. */
  text: string
  /** Something material the agent wants a human to approve before it is promised. */
  propose?: Proposal
  /** The call is over after `text`, with this outcome. */
  end?: { outcome: string }
}

/**
 * `text` with the rule book's placeholders filled for one call. Without a callee name the
 * placeholder goes with its comma ("Hello {name}, this is" → "Hello, this is"), so nothing reads
 * "Hello there" to someone whose name we do not know.
 */
export function fillPlaceholders(text: string, v: { name: string | null; agentName: string; company: string }): string {
  const name = v.name?.trim() ?? ""
  let out = text
  if (name === "") out = out.replace(/,\s*\{name\}(?=[\s.,!?;:]|$)/g, "").replace(/\s*\{name\}/g, "")
  return out.replace(/\{(name|agent_name|company)\}/g, (_, key: string) => (key === "name" ? name : key === "agent_name" ? v.agentName : v.company))
}
