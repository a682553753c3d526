// The agent loop of one connected call: speak the disclosure and opening, then listen, ask the
// language model, speak, and hold for a human's decision when the model proposes something.
//
// The loop owns the leg from the first word to the hang-up: it always hangs up before resolving.
// It also holds the knowledge base's banned lines for any model: a reply that says one is asked
// again once, then replaced by a neutral line (the simulator never needs this; a real model may).
import { replyRules } from "../kb/reply-rules.js"
import { type CallRules, firstAllowed, isBanned, NO_RULES } from "../kb/rule-matching.js"
import { Queue } from "../platform/async-queue.js"
import {
  AGENT_OUTCOMES,
  type AgentReply,
  type ApprovalAnswer,
  type Decided,
  type DecisionStatus,
  fillPlaceholders,
  type LanguageModel,
  NEUTRAL_LINES,
  type Proposal,
  type ProposalAction,
  type ReplyRequest,
  type TranscriptLine,
} from "../providers/llm/llm.interface.js"
import { SentenceCutter } from "../providers/speech/sentences.js"
import type { CallLeg, Spoken, TurnLatency } from "../providers/telephony/telephony.interface.js"
import { type RuleBook, repromptsOf } from "../workflows/rulebook.schema.js"

export interface ConversationTurn {
  speaker: "agent" | "callee"
  text: string
  /** Epoch ms: when the agent started speaking / when the callee's utterance began. */
  at: number
  /** 0, 1, 2, … within this call. */
  turnIndex: number
  /** An agent turn the callee spoke over: `text` is what they heard whole. */
  interrupted?: true
  /** An agent turn on an audio leg answering the callee: from the end of their speech to its first audio. */
  latencyMs?: TurnLatency
}

export interface ConversationOptions {
  leg: CallLeg
  llm: LanguageModel
  ruleBook: RuleBook
  callee: { name: string | null }
  agentName: string
  company: string
  /** The knowledge-base rules of this call, prepared for it (prepareCallRules); default none. */
  rules?: CallRules
  /** Each turn as it happens; an agent turn is reported before it is spoken. */
  onTurn(turn: ConversationTurn): void
  /**
   * Called when the agent proposes; resolves with the human decision or "timeout" (the runtime
   * decides how long to hold), and for an approved concession the amount approved when the human
   * set one (the agent then offers that amount). Not called when the rule book's policy for the
   * action needs no approval (→ approved) or does not allow it (→ denied). A rejection counts as
   * "timeout".
   */
  requestApproval(p: Proposal): Promise<DecisionStatus | ApprovalAnswer>
  /** Aborted = max duration reached or shutdown: the loop stops at once, with outcome "aborted". */
  signal: AbortSignal
  /** Hard cap on turns in this call (default 32); reached → outcome "no_decision". */
  maxTurns?: number
  /**
   * Who answered, from the carrier's ANSWERED event (default human). For a machine the rule book's
   * `voicemail` setting applies: leave the disclosure and opening line after the greeting
   * ("voicemail_left"), or hang up at once ("voicemail").
   */
  answeredBy?: "human" | "machine"
  /** Clock for agent turn times (epoch ms); default Date.now. */
  now?: () => number
}

export interface ConversationResult {
  outcome: string
  turns: number
  calleeHungUp: boolean
}

/** Outcomes the loop itself produces, beside the model's AGENT_OUTCOMES. */
export const LOOP_OUTCOMES = ["callee_hung_up", "agent_error", "aborted", "voicemail_left", "voicemail"] as const
export const CONVERSATION_OUTCOMES = [...AGENT_OUTCOMES, ...LOOP_OUTCOMES] as const
export type ConversationOutcome = (typeof CONVERSATION_OUTCOMES)[number]

export const DEFAULT_MAX_TURNS = 32

/** Said when the callee was silent, or not understood (an audio leg's listen() answered ""). */
const REPROMPT = "Sorry, I didn't catch that. Could you say that again?"
/** Said after the rule book's reprompts in a row went unanswered (repromptsOf: two by default). */
const SILENT_GOODBYE = "I'm sorry, I can't hear you. Someone from {company} will get back to you. Goodbye."
/** How long after a voicemail's greeting the message waits for the beep before it is left anyway. */
const BEEP_WAIT_MS = 4_000

const APOLOGY =
  "I'm sorry, {name}, I'm having some trouble on my side. Someone from {company} will get back to you. Goodbye."

/** `f()` as a promise, a synchronous throw included. */
const settled = <T>(f: () => Promise<T>): Promise<T> => new Promise<T>((resolve) => resolve(f()))

const ABORTED = Symbol("aborted")
type Aborted = typeof ABORTED
/** How saying an agent turn went: said, the leg gone, no voice to say it with, or the call aborted. */
type Said = "ok" | "gone" | "voiceless" | Aborted

/** Drives one connected call to its outcome; never rejects for provider failures. */
export async function converse(o: ConversationOptions): Promise<ConversationResult> {
  const book = o.ruleBook
  const now = o.now ?? (() => Date.now())
  const maxTurns = o.maxTurns ?? DEFAULT_MAX_TURNS
  const fill = (text: string): string =>
    fillPlaceholders(text, { name: o.callee.name, agentName: o.agentName, company: o.company })
  const rules = o.rules ?? NO_RULES
  const history: TranscriptLine[] = []
  let calleeHungUp = false
  /** An outcome reached before the last line was spoken survives the callee hanging up on it. */
  let reached: string | undefined

  // The loop waits on one thing at a time, so one slot says what an abort interrupts: nothing
  // piles up on a long-lived promise over a long call (10,000 calls share a process).
  let interrupt: ((v: Aborted) => void) | undefined
  const onAbort = (): void => interrupt?.(ABORTED)
  o.signal.addEventListener("abort", onAbort, { once: true })
  const race = <T>(p: Promise<T>): Promise<T | Aborted> =>
    new Promise<T | Aborted>((resolve, reject) => {
      if (o.signal.aborted) return resolve(ABORTED)
      interrupt = resolve
      p.then(resolve, reject)
    })

  const turn = (
    speaker: "agent" | "callee",
    text: string,
    at: number,
    audio?: Pick<ConversationTurn, "interrupted" | "latencyMs">,
  ): void => {
    history.push({ speaker, text })
    o.onTurn({ speaker, text, at, turnIndex: history.length - 1, ...audio })
  }

  /**
   * Speaks one agent turn: "ok", or why the call cannot go on ("voiceless": no voice could speak it,
   * and the leg apologised instead). A turn is recorded before it is spoken, except on a leg that
   * reports what was played (audio): there once spoken, as heard.
   */
  const speak = (text: string): Promise<Said> => {
    const at = now()
    if (o.leg.reportsPlayed !== true) turn("agent", text, at)
    return spoken(text, at, o.leg.say(text))
  }

  /** Waits for an agent turn being said; a leg that reports what was played has it recorded now, as heard. */
  const spoken = async (text: string, at: number, saying: Promise<Spoken>): Promise<Said> => {
    const said = await race(
      saying.then(
        (s) => s,
        () => "gone" as const,
      ),
    )
    if (said === "gone") calleeHungUp = true
    if (o.leg.reportsPlayed === true && said !== ABORTED) {
      const s = said === "gone" ? undefined : said
      const cut = s?.interrupted
      turn("agent", s?.voiceFailed?.played ?? cut?.played ?? text, at, {
        ...(cut !== undefined && { interrupted: true as const }),
        ...(s?.latencyMs !== undefined && { latencyMs: s.latencyMs }),
      })
    }
    if (said === "gone" || said === ABORTED) return said
    return said.voiceFailed === undefined ? "ok" : "voiceless"
  }

  const requestFor = (decision: Decided | undefined, avoid?: ReadonlyArray<string>): ReplyRequest => ({
    ruleBook: book,
    history: history.slice(),
    callee: o.callee,
    agentName: o.agentName,
    company: o.company,
    ...(decision !== undefined && { decision }),
    ...replyRules(rules, history, avoid),
  })

  /** The model's next line, one retry on failure; "error" after the second. */
  const ask = async (
    decision: Decided | undefined,
    avoid?: ReadonlyArray<string>,
  ): Promise<AgentReply | "error" | Aborted> => {
    for (let attempt = 0; attempt < 2; attempt++) {
      const request = requestFor(decision, avoid)
      const answer = await race(
        settled(() => o.llm.reply(request)).then(
          (r) => (typeof r?.text === "string" && r.text.trim() !== "" ? r : undefined),
          () => undefined,
        ),
      )
      if (answer !== undefined) return answer
    }
    return "error"
  }

  /**
   * The model's next line, kept off the banned lines: a reply saying one is asked for again once
   * (told what not to say); a second banned answer keeps its proposal or ending but speaks the
   * first allowed neutral line, and with none allowed the call ends as an agent error.
   */
  const answer = async (decision: Decided | undefined): Promise<AgentReply | "error" | Aborted> => {
    const reply = await ask(decision)
    if (reply === ABORTED || reply === "error" || !isBanned(reply.text, rules)) return reply
    const again = await ask(decision, [reply.text])
    if (again === ABORTED) return again
    if (again !== "error" && !isBanned(again.text, rules)) return again
    const neutral = firstAllowed(NEUTRAL_LINES.map(fill), rules)
    if (neutral === undefined) return "error"
    return { ...(again === "error" ? reply : again), text: neutral }
  }

  /**
   * The model's next line streamed into an audio leg: each sentence is spoken as soon as the model
   * has written it, checked against the banned lines together with what was said before it.
   * Undefined when nothing was said (the model failed, or its first sentence says a banned line):
   * the caller answers as without streaming. A reply cut short by a banned sentence or a failure
   * keeps what was said, and the rest of the reply (its proposal or ending) when it came.
   */
  const streamAnswer = async (
    decision: Decided | undefined,
  ): Promise<{ reply: AgentReply; spoken: Said } | undefined | Aborted> => {
    const { streamReply } = o.llm
    const { sayStreamed } = o.leg
    if (streamReply === undefined || sayStreamed === undefined) return undefined
    const at = now()
    const sentences = new Queue<string>()
    let said = ""
    let refused = false
    let saying: Promise<Spoken> | undefined
    const cutter = new SentenceCutter((sentence) => {
      if (refused) return
      const next = said === "" ? sentence : `${said} ${sentence}`
      if (isBanned(next, rules)) {
        refused = true
        return
      }
      said = next
      sentences.push(sentence)
      saying ??= sayStreamed.call(o.leg, sentences)
    })
    const reply = await race(
      settled(() => streamReply.call(o.llm, requestFor(decision), (piece) => cutter.push(piece))).then(
        (r) => (typeof r?.text === "string" && r.text.trim() !== "" ? r : undefined),
        () => undefined,
      ),
    )
    if (reply !== undefined && reply !== ABORTED) cutter.end()
    sentences.close()
    if (reply === ABORTED) return ABORTED
    if (saying === undefined) return undefined
    const whole: AgentReply = reply === undefined ? { text: said } : { ...reply, text: said }
    if (whole.end !== undefined && whole.propose === undefined) reached = whole.end.outcome
    return { reply: whole, spoken: await spoken(said, at, saying) }
  }

  /**
   * The first thing said, to a person or a voicemail: the disclosure lines, then the opening line
   * (an `opening` rule's, else the rule book's). The disclosures are required by law and always
   * spoken, even if a rule bans them; an opening is left out when it, or the whole first turn it
   * makes (a ban learnt from a first turn is disclosures and opening together), says a banned line.
   */
  const openingTurn = (): string => {
    const disclosures = book.disclosure_lines.map(fill).join(" ")
    const opening = [rules.opening, book.opening_line]
      .flatMap((l) => (l === undefined ? [] : [fill(l)]))
      .find((l) => l.trim() !== "" && !isBanned(l, rules) && !isBanned(`${disclosures} ${l}`, rules))
    const text = (opening === undefined ? disclosures : `${disclosures} ${opening}`).trim()
    return text === "" ? fill("Hello {name}, this is {agent_name} from {company}.") : text
  }

  const decisions = new Map<ProposalAction, Decided>()
  const decide = async (p: Proposal): Promise<Decided | Aborted> => {
    const policy =
      p.action === "concession"
        ? book.concession_policy
        : p.action === "callback"
          ? book.callback_policy
          : book.escalation_policy
    // A repeated proposal gets the answer the human already gave in this call.
    const earlier = decisions.get(p.action)
    if (earlier !== undefined) return earlier
    const cap = book.concession_policy.cap_minor
    const value =
      p.action === "concession" && p.value_minor !== null ? Math.min(Math.max(0, Math.round(p.value_minor)), cap) : null
    let decided: Decided | Aborted
    if (!policy.allowed || (p.action === "concession" && cap <= 0)) decided = { action: p.action, status: "denied" }
    else if (!policy.requires_approval) decided = { action: p.action, status: "approved", value_minor: value }
    else {
      const answer = await race(
        settled(() => o.requestApproval({ action: p.action, value_minor: value, rationale: p.rationale })).catch(
          (): DecisionStatus => "timeout",
        ),
      )
      if (answer === ABORTED) decided = ABORTED
      else {
        const given: ApprovalAnswer = typeof answer === "string" ? { status: answer } : answer
        const status: DecisionStatus =
          given.status === "approved" || given.status === "denied" ? given.status : "timeout"
        // The amount a human approved, kept within the rule book's cap whatever the caller passed.
        const approved =
          p.action === "concession" && status === "approved"
            ? typeof given.value_minor === "number" && given.value_minor > 0
              ? Math.min(Math.round(given.value_minor), cap)
              : value
            : null
        decided = { action: p.action, status, ...(approved !== null && { value_minor: approved }) }
      }
    }
    if (decided !== ABORTED) decisions.set(p.action, decided)
    return decided
  }

  const result = (outcome: string): ConversationResult => ({ outcome, turns: history.length, calleeHungUp })
  /** Where the call stands when the leg is gone, its voice failed, or the signal fired. */
  const stopped = (why: Exclude<Said, "ok">): ConversationResult =>
    result(reached ?? (why === ABORTED ? "aborted" : why === "voiceless" ? "agent_error" : "callee_hung_up"))

  try {
    if (o.signal.aborted) return result("aborted")

    if (o.answeredBy === "machine") {
      if (book.voicemail === "hang_up") return result("voicemail")
      const greeting = await race(o.leg.listen())
      if (greeting === ABORTED) return stopped(ABORTED)
      if (greeting === null) return result("voicemail")
      turn("callee", greeting.text, greeting.at)
      // A leg that hears audio waits for the beep (a message spoken over the greeting is lost).
      if (o.leg.afterBeep !== undefined) {
        const beep = await race(o.leg.afterBeep(BEEP_WAIT_MS))
        if (beep === ABORTED) return stopped(ABORTED)
      }
      reached = "voicemail_left"
      const spoken = await speak(openingTurn())
      // The machine hanging up mid-message still took most of it: the message counts as left.
      if (spoken === "voiceless") return result("agent_error")
      return spoken === ABORTED ? stopped(ABORTED) : result("voicemail_left")
    }

    const opened = await speak(openingTurn())
    if (opened !== "ok") return stopped(opened)

    let decision: Decided | undefined
    let unheard = 0
    for (;;) {
      if (history.length >= maxTurns) return result("no_decision")
      const heard = await race(o.leg.listen())
      if (heard === ABORTED) return stopped(ABORTED)
      if (heard === null) {
        calleeHungUp = true
        return result("callee_hung_up")
      }
      // Nothing heard (silence, or speech not understood): ask again, and after the rule book's reprompts say goodbye.
      if (heard.text.trim() === "") {
        const last = ++unheard > repromptsOf(book.listening)
        const spoken = await speak(fill(last ? SILENT_GOODBYE : REPROMPT))
        if (spoken !== "ok") return stopped(spoken)
        if (last) return result("no_decision")
        continue
      }
      unheard = 0
      turn("callee", heard.text, heard.at)

      // One callee line may take several agent lines: a proposal, then its decision.
      for (;;) {
        if (history.length >= maxTurns) return result("no_decision")
        // On an audio leg the reply is heard as the model writes it; else (or when nothing of it could be said) whole.
        const streamed = await streamAnswer(decision)
        if (streamed === ABORTED) return stopped(ABORTED)
        let reply: AgentReply
        let said: Said
        if (streamed !== undefined) ({ reply, spoken: said } = streamed)
        else {
          const answered = await answer(decision)
          if (answered === ABORTED) return stopped(ABORTED)
          if (answered === "error") {
            reached = "agent_error"
            const apologised = await speak(fill(APOLOGY))
            return apologised === "ok" ? result("agent_error") : stopped(apologised)
          }
          reply = answered
          if (reply.end !== undefined && reply.propose === undefined) reached = reply.end.outcome
          said = await speak(reply.text)
        }
        if (said !== "ok") return stopped(said)
        if (reply.propose !== undefined) {
          const decided = await decide(reply.propose)
          if (decided === ABORTED) return stopped(ABORTED)
          decision = decided
          continue
        }
        if (reply.end !== undefined) return result(reply.end.outcome)
        break
      }
    }
  } finally {
    o.signal.removeEventListener("abort", onAbort)
    interrupt = undefined
    // A failed hang-up is the leg owner's to record (the runtime's legs log, count and sweep it):
    // the conversation is over either way.
    await o.leg.hangup().catch(() => undefined)
  }
}
