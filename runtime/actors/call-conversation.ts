// A call's conversation: the agent loop (src/calls/conversation.ts) on the call's leg, with the run's
// rules as they are when the call is answered, each turn told to the call actor and the run's stream,
// and a proposal held until its approval is decided.
import type { LineInput } from "../../machines/index.js"
import { converse } from "../../src/calls/conversation.js"
import { prepareCallRules } from "../../src/kb/rule-matching.js"
import type { ApprovalAnswer, Proposal } from "../../src/providers/llm/llm.interface.js"
import { observeTurnLatency } from "../voice/voice.metrics.js"
import type { LiveCall, RunScope } from "./run-scope.js"

/** Lines of the conversation an approval carries, so whoever decides sees what led to it. */
const TRANSCRIPT_EXCERPT_LINES = 6

/** Runs the agent loop on the call's leg, reporting turns to the call actor and the run's stream. */
export async function converseOn(
  s: RunScope,
  live: LiveCall,
  input: LineInput,
  signal: AbortSignal,
  answeredBy: "human" | "machine",
  sendBack: (e: { type: string; [k: string]: unknown }) => void,
): Promise<void> {
  const leg = live.leg
  if (leg === undefined) {
    sendBack({ type: "CALLEE_HUNG_UP", at: Date.now() })
    return
  }
  // Each call takes the run's rules as they are when it is answered: a change reaches the next call.
  const who = { name: live.name, agentName: live.variant.agentName, company: s.company }
  const rules = prepareCallRules(await s.agentRules(), who)
  const result = await converse({
    leg,
    llm: s.deps.llm,
    ruleBook: live.variant.ruleBook,
    callee: { name: live.name },
    agentName: live.variant.agentName,
    company: s.company,
    rules,
    answeredBy,
    signal,
    onTurn: (turn) => {
      if (turn.latencyMs !== undefined) observeTurnLatency(turn.latencyMs)
      live.turns++
      live.recent.push(`${turn.speaker}: ${turn.text}`)
      if (live.recent.length > TRANSCRIPT_EXCERPT_LINES) live.recent.shift()
      s.deps.turns.push({
        tenantId: s.tenantId,
        runId: s.runId,
        targetId: input.targetId,
        callId: input.callId,
        turnIndex: turn.turnIndex,
        speaker: turn.speaker,
        text: turn.text,
        at: turn.at,
        ...(turn.interrupted === true && { interrupted: true }),
        ...(turn.latencyMs !== undefined && { latencyMs: turn.latencyMs }),
        ...(live.variant.arm !== undefined && { arm: live.variant.arm.arm }),
      })
      sendBack({ type: "TURN", speaker: turn.speaker, text: turn.text, at: turn.at })
    },
    requestApproval: (p: Proposal) =>
      new Promise<ApprovalAnswer>((resolve) => {
        live.pendingDecision = resolve
        sendBack({ type: "PROPOSE", action: p.action, valueMinor: p.value_minor, rationale: p.rationale })
      }),
  }).catch((err: unknown) => {
    s.deps.log.error({ err, call_id: input.callId }, "conversation failed")
    return { outcome: "agent_error", turns: live.turns, calleeHungUp: false }
  })
  if (signal.aborted) return
  sendBack({ type: "CONVERSATION_ENDED", outcome: result.outcome, at: Date.now() })
}
