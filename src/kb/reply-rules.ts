// A call's knowledge-base rules as a model is given them for one reply (ReplyRequest's rules,
// triggered and refuses): matched here, so a model receives data and a judge, never the matching.
import type { AgentRule, AgentRules, ReplyRequest, TranscriptLine } from "../providers/llm/llm.interface.js"
import { BANNED_BUCKET, type CallRules, isBanned, NO_RULES, normaliseLine } from "./rule-matching.js"

const readOf = new WeakMap<CallRules, AgentRules>()

/**
 * The rules as the model reads them, one view per call, each part filled when first read: a model
 * that never reads them (the simulator) costs the call nothing.
 */
function agentRules(rules: CallRules): AgentRules {
  const known = readOf.get(rules)
  if (known !== undefined) return known
  let instructions: ReadonlyArray<AgentRule> | undefined
  let banned: ReadonlyArray<string> | undefined
  const read: AgentRules = {
    get instructions() {
      return (instructions ??= rules.rules.filter((r) => r.bucket !== BANNED_BUCKET))
    },
    get banned() {
      return (banned ??= rules.rules.filter((r) => r.bucket === BANNED_BUCKET).map((r) => r.body))
    },
  }
  readOf.set(rules, read)
  return read
}

/**
 * What the model is told of the call's rules for its next line after `history`: the rules, those
 * the callee's latest line calls for, the lines it was just refused (`avoid`), and whether a line
 * would be refused (it says a banned line, or one of those).
 */
export function replyRules(
  rules: CallRules,
  history: ReadonlyArray<TranscriptLine>,
  avoid?: ReadonlyArray<string>,
): Pick<ReplyRequest, "rules" | "triggered" | "avoid" | "refuses"> {
  const avoided = avoid !== undefined && avoid.length > 0 ? avoid.map(normaliseLine) : undefined
  const last = history.at(-1)
  return {
    ...(rules !== NO_RULES && { rules: agentRules(rules) }),
    ...(rules !== NO_RULES && last?.speaker === "callee" && { triggered: rules.triggeredBy(last.text) }),
    ...(avoid !== undefined && { avoid }),
    ...((rules.bannedCount > 0 || avoided !== undefined) && {
      refuses: (text: string) => isBanned(text, rules) || avoided?.includes(normaliseLine(text)) === true,
    }),
  }
}
