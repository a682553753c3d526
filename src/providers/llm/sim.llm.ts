// The offline language-model simulator: answers a call's turns from the agent's brief and the
// call's knowledge-base rules by plain text rules, deterministically, with no model account. A
// structured request (a rule book, say) it answers with the caller's offline stand-in: what to
// write is the caller's business.

import { formatAmount } from "../../platform/money.js"
import {
  type AgentBrief,
  type AgentObjectionHandler,
  type AgentOutcome,
  type AgentReply,
  fillPlaceholders,
  type JsonAnswer,
  type JsonRequest,
  type LanguageModel,
  LlmCallError,
  NEUTRAL_LINES,
  type ProposalAction,
  type ReplyRequest,
  type ToolChatAnswer,
} from "./llm.interface.js"
import { clip, wordsOf } from "./sim.text.js"

/** The simulator's model name, which is also the version it reports: its rules change with the code. */
const SIM_MODEL = "sim-1"

/** The handler category a "don't call me again" is answered from. */
const DO_NOT_CALL_CATEGORY = "do_not_call"

/** How the simulator writes a streamed reply: after a first-token delay, a word every tokenMs. */
export interface SimLlmOptions {
  /** From the request to the reply's first word (a hosted model's time to first token; default 0). */
  readonly firstTokenMs?: number
  /** Between one word and the next (default 0: the rest at once). */
  readonly tokenMs?: number
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export function makeSimLlm(o: SimLlmOptions = {}): LanguageModel {
  const firstTokenMs = o.firstTokenMs ?? 0
  const tokenMs = o.tokenMs ?? 0
  const generateJson = async (req: JsonRequest): Promise<Record<string, unknown>> => {
    if (req.offline !== undefined) return req.offline()
    throw new LlmCallError(`the simulator cannot write ${req.format.name} without an offline answer`, false)
  }
  return {
    name: "sim",
    model: SIM_MODEL,
    generateJson,
    async generateJsonAnswer(req: JsonRequest): Promise<JsonAnswer> {
      return { value: await generateJson(req), modelVersion: SIM_MODEL }
    },
    async reply(req: ReplyRequest): Promise<AgentReply> {
      return simulateReply(req)
    },
    // The reply is decided at once (rules, not a model) and written out word by word at the pace set.
    async streamReply(req: ReplyRequest, onText: (piece: string) => void): Promise<AgentReply> {
      const reply = simulateReply(req)
      if (firstTokenMs > 0) await sleep(firstTokenMs)
      const words = reply.text.split(/(?<=\s)/)
      for (const [i, word] of words.entries()) {
        if (i > 0 && tokenMs > 0) await sleep(tokenMs)
        onText(word)
      }
      return reply
    },
    // No model, so no tool calls: callers with an offline answer (src/data/chat.sim.ts) use it instead.
    async chatWithTools(): Promise<ToolChatAnswer> {
      return { text: null, tool_calls: [] }
    },
  }
}

// ---------------------------------------------------------------------------------------------
// Answering turns
//
// The simulator keeps no state between turns: everything it needs is in the request (the
// transcript, the latest human decision), so any runtime process can answer any call's next turn.

/** The simulator ends a call without a decision when its answer would be this many turns in. */
export const SIM_TURN_CAP = 16

const DO_NOT_CALL_ASK =
  /\b(?:(?:don't|do not|never) (?:ever )?call (?:me|this number)|stop calling|remove (?:me|my number)|take me off)\b/
const HUMAN_ASK = /\b(?:human|real person|a person|manager|supervisor|representative|operator)\b/
const CALLBACK_ASK = /\b(?:call (?:me )?back|callback|call me later|another time|tomorrow)\b/
const DECLINE =
  /\b(?:not interested|no thanks|no,? thank you|not for me|i'll pass|(?:don't|do not) (?:\w+ ){0,3}need)\b/
const DISCOUNT_ASK = /\b(?:discount|better price|lower price|cheaper|better deal|reduce the price|any offers?)\b/
const AGREE = /\b(?:yes|yeah|yep|sure|sounds good|okay|ok|go ahead|that works|i'm in|let's do it|deal)\b/

/**
 * The concession the simulator asks a human to approve: half the rule book's cap (at least one
 * minor unit), so the approver sees a request with headroom below the ceiling and the callee hears
 * a round amount (cap ₹800 → ₹400).
 */
export function simConcessionMinor(book: AgentBrief): number {
  return Math.max(1, Math.floor(book.concession_policy.cap_minor / 2))
}

/**
 * The simulator's next agent line: a pure function of the request. The call's rules are honoured
 * deterministically: a rule the callee's line calls for speaks its body in place of the rule
 * book's handler, and a line the caller refuses (a banned line, or one in `avoid`) becomes the
 * first allowed of the handler's response, the pitch and the neutral lines, keeping what the
 * reply proposes or ends with.
 */
export function simulateReply(req: ReplyRequest): AgentReply {
  const reply = answer(req)
  const refuses = req.refuses
  if (refuses === undefined || !refuses(reply.text)) return reply
  const last = req.history.at(-1)
  const handler = last?.speaker === "callee" ? bestHandler(req.ruleBook, lower(last.text)) : undefined
  const fill = filler(req)
  const candidates = [handler?.response, pitch(req.ruleBook), ...NEUTRAL_LINES].flatMap((c) =>
    c === undefined ? [] : [fill(c)],
  )
  const allowed = candidates.find((c) => !refuses(c))
  // Nothing allowed to say: the banned line stands, and the conversation loop apologises.
  return allowed === undefined ? reply : { ...reply, text: allowed }
}

const lower = (text: string): string => text.toLowerCase().replace(/[\u2018\u2019]/g, "'")

/** `text` with the call's placeholders filled; never empty. */
const filler =
  (req: ReplyRequest) =>
  (text: string): string => {
    const filled = fillPlaceholders(text, {
      name: req.callee.name,
      agentName: req.agentName,
      company: req.company,
    }).trim()
    return filled === "" ? "I see." : filled
  }

/** What the simulator would say, from the rule book and the rules the callee's line calls for; refusals aside. */
function answer(req: ReplyRequest): AgentReply {
  const book = req.ruleBook
  const fill = filler(req)
  const say = (text: string): AgentReply => ({ text: fill(text) })
  const end = (text: string, outcome: AgentOutcome): AgentReply => ({ text: fill(text), end: { outcome } })
  const decided = req.decision
  // The amount a human approved (they may set another than proposed), else the one proposed.
  const approvedMinor =
    decided?.action === "concession" && typeof decided.value_minor === "number" && decided.value_minor > 0
      ? decided.value_minor
      : simConcessionMinor(book)
  const amount = formatAmount(approvedMinor, book.concession_policy.currency)
  const last = req.history.at(-1)

  // Right after a decision, the transcript still ends with the agent's "one moment" line.
  if (decided !== undefined && last?.speaker === "agent") {
    const { action, status } = decided
    if (status === "timeout") {
      const what =
        action === "concession"
          ? "confirm that discount"
          : action === "callback"
            ? "confirm a callback time"
            : "reach a colleague"
      return end(
        `I couldn't ${what} just now, {name}; I'll confirm by message shortly. Thank you for your time, goodbye.`,
        "pending_approval",
      )
    }
    if (action === "concession") {
      return status === "approved"
        ? say(`Good news, {name}: I can take ${amount} off for you. Shall we go ahead?`)
        : say(
            "I'm sorry, {name}, I can't offer a discount on this one. Would you still like to go ahead at the " +
              "regular price?",
          )
    }
    if (action === "callback") {
      return status === "approved"
        ? end(
            "All set, {name}: someone from {company} will call you back tomorrow. Thank you for your time, goodbye.",
            "callback_scheduled",
          )
        : say("I'm sorry, {name}, I can't book a callback right now. Do you have two minutes now instead?")
    }
    return status === "approved"
      ? end("Thank you for holding, {name}. I'm connecting you to a colleague now.", "escalated")
      : say("I'm sorry, {name}, no colleague is free right now, so I can't transfer you. Can I help you myself?")
  }

  if (req.history.length >= SIM_TURN_CAP - 1)
    return end("I'll let you go now, {name}. Thank you for your time, and goodbye.", "no_decision")
  if (last?.speaker !== "callee") return say("Are you still there, {name}?")

  const heard = lower(last.text)
  const quoted = `"${clip(last.text.replace(/\s+/g, " ").trim(), 200)}"`
  const agentTurns = req.history.filter((h) => h.speaker === "agent").length
  const pending = (action: ProposalAction): boolean => decided?.action !== action
  const propose = (
    text: string,
    action: ProposalAction,
    value_minor: number | null,
    rationale: string,
  ): AgentReply => ({
    text: fill(text),
    propose: { action, value_minor, rationale },
  })

  if (DO_NOT_CALL_ASK.test(heard)) {
    const handler = book.objection_handlers.find((h) => h.category === DO_NOT_CALL_CATEGORY)
    return end(handler?.response ?? "Understood. You won't hear from {company} again. Goodbye.", "do_not_call")
  }
  if (HUMAN_ASK.test(heard)) {
    if (book.escalation_policy.allowed && pending("escalate")) {
      return propose(
        "Of course, {name}. Let me see whether a colleague can take over; one moment, please.",
        "escalate",
        null,
        `The callee asked for a human: ${quoted}.`,
      )
    }
    return say(
      "I'm sorry, {name}, no colleague is free to take this call, but I'm happy to help myself. What would you like " +
        "to know?",
    )
  }
  if (CALLBACK_ASK.test(heard)) {
    if (book.callback_policy.allowed && pending("callback")) {
      return propose(
        "Of course, {name}. Let me check that we can call you back tomorrow; one moment, please.",
        "callback",
        null,
        `The callee asked to be called back: ${quoted}.`,
      )
    }
    return say("I'm sorry, {name}, I can't book a callback right now. Do you have two minutes now instead?")
  }
  // Declining twice ends the call; a first "no" gets an answer below.
  const declining = DECLINE.test(heard)
  if (declining) {
    const declines = req.history.filter((h) => h.speaker === "callee" && DECLINE.test(lower(h.text))).length
    if (declines >= 2) return end("I understand, {name}. Thank you for your time, and have a good day.", "declined")
  }
  if (!declining && DISCOUNT_ASK.test(heard)) {
    const policy = book.concession_policy
    if (policy.allowed && policy.cap_minor > 0 && pending("concession")) {
      return propose(
        "I understand, {name}. Let me check with my team what I can do on the price; one moment, please.",
        "concession",
        simConcessionMinor(book),
        `The callee asked for a discount: ${quoted}. ` +
          `Proposing half of the ${formatAmount(policy.cap_minor, policy.currency)} cap.`,
      )
    }
    if (decided?.action === "concession" && decided.status === "approved")
      return say(`As I said, {name}, I can take ${amount} off for you. Shall we go ahead?`)
    return say("I'm sorry, {name}, I can't offer a discount on this. Would you still like to go ahead?")
  }
  const agrees = !declining && AGREE.test(heard)
  if (agrees && decided?.action === "concession" && decided.status === "approved") {
    return end(
      "Wonderful, {name}. I've applied the discount and noted that you're in; {company} will send you the details " +
        "shortly. Thank you, goodbye.",
      "agreed_with_concession",
    )
  }
  // The first "yes" answers "do you have a minute?": it earns the pitch, not a sale.
  if (agrees && agentTurns >= 2)
    return end(
      "Wonderful, {name}. I've noted that you're in; {company} will send you the details shortly. Thank you for " +
        "your time, goodbye.",
      "agreed",
    )

  // A knowledge-base rule this line calls for comes before the rule book's handler; the handler's
  // category is the objection's. A callee who agrees raises no objection, so only their words can
  // call for a rule.
  const handler = agrees ? undefined : bestHandler(book, heard)
  const category = handler?.category ?? null
  const rule = req.triggered?.find((t) => t.category === null || t.category === category)?.rule
  if (rule !== undefined) return say(rule.body)
  if (declining)
    return say(
      handler?.response ??
        "I understand, {name}. Before you decide, may I take thirty seconds to explain how this could help you?",
    )
  if (agrees) return say(pitch(book))
  if (handler !== undefined) return say(handler.response)
  return say(agentTurns <= 1 ? pitch(book) : "I see. Would you like to go ahead, {name}?")
}

/** The offer in a sentence, from the opening line's "about …" when it has one. */
function pitch(book: AgentBrief): string {
  const topic = /\babout ([^.?!]{3,120})[.?!]/.exec(book.opening_line)?.[1]?.trim()
  const offer = "takes just a minute to set up, and I can do it for you right now. Shall we go ahead?"
  return topic === undefined
    ? `Thank you, {name}. It ${offer}`
    : `Thank you, {name}. I'm calling about ${topic}: it ${offer}`
}

/** The handler whose trigger shares the most words with what the callee said (first on a tie). */
function bestHandler(book: AgentBrief, heard: string): AgentObjectionHandler | undefined {
  const said = wordsOf(heard)
  let best: { h: AgentObjectionHandler; overlap: number } | undefined
  for (const h of book.objection_handlers) {
    let overlap = 0
    for (const w of wordsOf(h.trigger)) if (said.has(w)) overlap++
    if (overlap > 0 && (best === undefined || overlap > best.overlap)) best = { h, overlap }
  }
  return best?.h
}
