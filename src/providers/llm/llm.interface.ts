// The language-model provider contract, in plain data: messages and a JSON Schema in, the parsed
// JSON object out (what a rule book is, and how to ask for one, is src/workflows/'s business); an
// agent brief and a call's transcript in, the agent's next line out. The offline simulator and the
// OpenAI-compatible adapter implement the same interface.
import type { Currency } from "../../platform/money.js"
import { ProviderCallError } from "../http.util.js"

export { fillPlaceholders } from "./placeholders.js"

export interface ChatMessage {
  readonly role: "system" | "user" | "assistant"
  readonly content: string
}

/** One structured answer: the model must answer with a JSON object matching `format.schema`. */
export interface JsonRequest {
  readonly messages: ReadonlyArray<ChatMessage>
  /** The answer's JSON Schema (draft 2020-12); an adapter rewrites it into its own dialect. */
  readonly format: { readonly name: string; readonly schema: Record<string, unknown> }
  /**
   * What an offline model answers: the simulator has no model, so the caller supplies its
   * deterministic stand-in. Without one the simulator rejects (a non-retryable LlmCallError).
   */
  readonly offline?: () => Record<string, unknown>
  /**
   * Aborts the request (and any retry) when it fires: the caller's own time limit. An aborted
   * request rejects with a non-retryable LlmCallError.
   */
  readonly signal?: AbortSignal
}

/** A structured answer with what the provider said about who wrote it. */
export interface JsonAnswer {
  readonly value: Record<string, unknown>
  /**
   * The model version the provider reports having answered with (an OpenAI-compatible API's
   * `model`, e.g. "gpt-4o-mini-2024-07-18"); the simulator reports its own name; null: none said.
   */
  readonly modelVersion: string | null
}

export interface LanguageModel {
  /** Short stable name ("sim", "openai") for status reports and logs. */
  readonly name: string
  /** The model asked ("sim-1", "gpt-4o-mini"), recorded beside what it generated. */
  readonly model: string
  /**
   * Resolves with the model's answer as a raw JSON object: unvalidated beyond what the provider's
   * structured output guarantees, the caller checks it. Rejects with LlmCallError.
   */
  generateJson(req: JsonRequest): Promise<Record<string, unknown>>
  /** generateJson, with the model version the provider reports (what a stored result records). */
  generateJsonAnswer(req: JsonRequest): Promise<JsonAnswer>
  /**
   * The agent's next line in a call, from its brief and the transcript so far. Rejects with
   * LlmCallError (the conversation loop retries once, then ends the call politely).
   */
  reply(req: ReplyRequest): Promise<AgentReply>
  /**
   * reply(), streamed: `onText` gets the reply's text in pieces as the model writes it (joined, they
   * are the reply's text), and the promise resolves with the whole reply once it is written.
   * Rejects as reply() does; pieces already given stand. Optional: a model without it answers whole.
   */
  streamReply?(req: ReplyRequest, onText: (piece: string) => void): Promise<AgentReply>
  /**
   * One round of a tool-calling conversation: the model answers with text, or asks for tools to
   * be run (the caller runs them and asks again with their results). Plain data both ways; what
   * a tool does is the caller's business. Rejects with LlmCallError; the simulator has no model
   * and answers with no tool calls and no text (its callers answer offline themselves).
   */
  chatWithTools(req: ToolChatRequest): Promise<ToolChatAnswer>
}

/** A tool the model may call: its name, what it does, and its arguments' JSON Schema. */
export interface ToolSpec {
  readonly name: string
  readonly description: string
  readonly parameters: Record<string, unknown>
}

/** A call the model asked for; `arguments` is the model's JSON text, unvalidated. */
export interface ToolCall {
  readonly id: string
  readonly name: string
  readonly arguments: string
}

export type ToolChatMessage =
  | { readonly role: "system" | "user"; readonly content: string }
  | { readonly role: "assistant"; readonly content: string | null; readonly tool_calls?: ReadonlyArray<ToolCall> }
  | { readonly role: "tool"; readonly tool_call_id: string; readonly content: string }

export interface ToolChatRequest {
  readonly messages: ReadonlyArray<ToolChatMessage>
  readonly tools: ReadonlyArray<ToolSpec>
}

export interface ToolChatAnswer {
  /** The model's text; null when it only asks for tools. */
  readonly text: string | null
  /** Empty when the model answered. */
  readonly tool_calls: ReadonlyArray<ToolCall>
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

/** A human's answer to a proposal: its status and, for an approved concession, the amount approved. */
export interface ApprovalAnswer {
  readonly status: DecisionStatus
  /** The approved concession in minor units, when the approver set it (else the proposal's stands). */
  readonly value_minor?: number | null | undefined
}

export interface TranscriptLine {
  readonly speaker: "agent" | "callee"
  readonly text: string
}

/** A handler the agent answers an objection with (the campaign's rule book has these). */
export interface AgentObjectionHandler {
  readonly category: string
  readonly trigger: string
  readonly response: string
}

/** A policy for one kind of proposal: whether the agent may make it and whether a human approves it. */
export interface AgentPolicy {
  readonly allowed: boolean
  readonly requires_approval: boolean
}

/**
 * What the agent follows on a call, as plain data: the fields of the campaign's rule book
 * (src/workflows/rulebook.schema.ts) that answering turns reads. A validated rule book is one.
 */
export interface AgentBrief {
  readonly system_prompt: string
  readonly opening_line: string
  readonly disclosure_lines: ReadonlyArray<string>
  readonly objection_handlers: ReadonlyArray<AgentObjectionHandler>
  /** The concession ceiling in minor units (1/100) of `currency`. */
  readonly concession_policy: AgentPolicy & { readonly cap_minor: number; readonly currency: Currency }
  readonly callback_policy: AgentPolicy & { readonly max_days_ahead: number }
  readonly escalation_policy: AgentPolicy & { readonly triggers: ReadonlyArray<string> }
}

/** What makes a knowledge-base rule apply to a callee's line. */
export interface RuleTrigger {
  /** The rule applies when the callee says any of these (case and punctuation aside). */
  readonly phrases: ReadonlyArray<string>
  /** …or when the callee's objection is of this category (`price`, `timing`, …). */
  readonly category: string | null
}

/** One active knowledge-base rule that applies to a call (the workspace's and the workflow's), as the agent sees it. */
export interface AgentRule {
  readonly id: number
  readonly bucket: string
  readonly title: string
  /** The instruction; for a banned line the line itself. May use {name}, {agent_name}, {company}. */
  readonly body: string
  /** null: the rule always applies (a general instruction). */
  readonly trigger: RuleTrigger | null
  readonly priority: number
}

/** A call's knowledge-base rules as the model reads them: filled for this callee, highest priority first. */
export interface AgentRules {
  /** The rules to follow, each with when it applies (every rule but the banned lines). */
  readonly instructions: ReadonlyArray<AgentRule>
  /** The lines never to say, as written. */
  readonly banned: ReadonlyArray<string>
}

/**
 * A rule the callee's latest line calls for. `category` null: the line says one of the rule's
 * phrases, so it applies; else it applies when the model judges the line an objection of that
 * category.
 */
export interface TriggeredRule {
  readonly rule: AgentRule
  readonly category: string | null
}

/**
 * What the human decided about the call's latest proposal: for an approved concession, value_minor
 * is the amount approved (the approver's, else the proposal's), the one the agent offers.
 */
export interface Decided {
  readonly action: ProposalAction
  readonly status: DecisionStatus
  readonly value_minor?: number | null | undefined
}

export interface ReplyRequest {
  /** Aborts the request (and any retry) when it fires: the call ended, or the caller's own limit. */
  readonly signal?: AbortSignal
  ruleBook: AgentBrief
  /** The call so far, oldest first; the agent's first line (disclosure + opening) included. */
  history: ReadonlyArray<TranscriptLine>
  callee: { name: string | null }
  agentName: string
  company: string
  /**
   * What the human decided about the call's latest proposal, if any. Present on the answer right
   * after the decision (history then ends with the agent's proposal line) and on every later one.
   */
  decision?: Decided
  /**
   * The knowledge-base rules that apply to this call. The caller matches them (src/kb/), so a model
   * is given what matching decided, never the matching. Absent: the rule book alone.
   */
  rules?: AgentRules
  /**
   * The rules the callee's latest line calls for, highest priority first: the model follows the
   * first that applies (see TriggeredRule). Absent or empty: none, or the agent spoke last.
   */
  triggered?: ReadonlyArray<TriggeredRule>
  /**
   * Lines the model just answered with that were refused (they say a banned line): the model is
   * asked again and must not say them.
   */
  avoid?: ReadonlyArray<string>
  /**
   * Whether the caller refuses a line (it says a banned line, or one of `avoid`): a model that
   * checks its own answer before giving it (the simulator) asks. Absent: nothing is refused.
   */
  refuses?: (text: string) => boolean
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

/** Lines an agent can say in place of a refused one without promising anything. */
export const NEUTRAL_LINES: ReadonlyArray<string> = [
  "I see, {name}. Could you tell me a little more about that?",
  "Understood, {name}. Is there anything I can clarify for you?",
  "Thank you, {name}. What would help you decide?",
]

export interface AgentReply {
  /** What the agent says next; never empty. */
  text: string
  /** Something material the agent wants a human to approve before it is promised. */
  propose?: Proposal
  /** The call is over after `text`, with this outcome. */
  end?: { outcome: string }
}
