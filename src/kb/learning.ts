// How supervisors' verdicts on the agent's lines become knowledge-base rules: the policy, as pure
// functions of the verdicts already given on a line (feedback.service.ts gathers them and writes).
//
// The policy. Verdicts are grouped by (workflow, line), the line being the agent turn's text with
// the call's placeholders put back ({name}, {agent_name}, {company}) and normalised (normaliseLine),
// so "Hi Asha, this is Alex from Acme." said to two callees is one line. Every verdict is kept, but
// only each reviewer's latest verdict on the line counts (it "stands"): repeating a verdict, on the
// same turn or on the line said to another callee, adds nothing, and a changed mind replaces the
// reviewer's earlier vote. The counts below are of standing verdicts.
// - ban: at once an ACTIVE rule in `banned_phrases` for the turn's workflow whose body is the line
//   (title `Never say “…”`, priority 100): the agent never says it again. Further bans of the same
//   line, by anyone, are linked to that rule instead of making another.
// - punish: when two or more verdicts on the line are punish and no live rule was learnt from
//   punishes of it, a PAUSED rule for a person to review (they activate, edit or archive it):
//   bucket `objection.<category>` with trigger {category} when the line's objection category is
//   known, else bucket `review` with no trigger; title `Say something else than “…”`; body the
//   newest non-empty note among those punishes (a reviewer's suggested alternative), else the rule
//   book's handler response for the category when it differs from the line, else `Rephrase instead
//   of saying: “…”`. Priority 0. Further punishes are linked to it.
// - reward: when two or more verdicts on the line are reward, rewards outnumber punishes and the
//   line's category is known, an ACTIVE rule in `objection.<category>` with trigger {category}
//   whose body is the line, priority = the reward count (at most 100): the agent answers that
//   objection with the rewarded line. Each further reward is linked and raises the priority to the
//   reward count when that is higher (at most 100; never lowered by a verdict): left as made, each
//   new reviewer's reward raises it by 1, and one reviewer's again, or back after a change of mind,
//   raises nothing.
//   A line of no known category gets no rule: there is no objection to weigh it in.
// - A rule made from verdicts links every standing verdict of its kind on the line at that moment.
// - A rule links standing verdicts only: a reviewer's new verdict on the line takes their earlier
//   ones off every rule (the rules stay as they are), then is applied as above.
// - The line's category: the rule book the run used, the objection handler whose response (filled
//   and de-filled as on the call) is the line; else the handler whose trigger shares the most
//   content words with the callee's turn just before the agent's; else unknown.

import { fillPlaceholders, type RuleTrigger } from "../providers/llm/llm.interface.js"
import { wordsOf } from "../providers/llm/sim.text.js"
import type { LearntKind, NewRule, RuleRow } from "./kb.repo.js"
import { BANNED_BUCKET, normaliseLine } from "./rule-matching.js"

export type Verdict = LearntKind
export const VERDICTS = ["reward", "punish", "ban"] as const satisfies ReadonlyArray<Verdict>

/** Rules from bans outrank every other kind. */
export const BAN_PRIORITY = 100
/** The most a reward rule's priority grows to. */
export const REWARD_PRIORITY_MAX = 100
/** How many punishes, and how many rewards, a line needs before a rule is made from them. */
export const PUNISH_THRESHOLD = 2
export const REWARD_THRESHOLD = 2
/** The bucket of a punished line whose objection category is unknown. */
export const REVIEW_BUCKET = "review"
/** A learnt rule's body is cut to the rules' body limit. */
export const BODY_MAX = 2000

/** What a call filled its placeholders with. */
export interface CallVars {
  readonly name: string | null
  readonly agentName: string
  readonly company: string
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/**
 * `text` with this call's values put back as placeholders: the callee's name → {name}, the
 * agent's → {agent_name}, the company → {company}. Whole words only, case aside, longest first
 * (a company "Alex & Co" stays {company} when the agent is Alex); one pass, so a placeholder put
 * back is never read again.
 */
export function defill(text: string, v: CallVars): string {
  const pairs: Array<[string, string]> = []
  const add = (value: string | null, placeholder: string) => {
    const t = value?.trim() ?? ""
    if (t !== "" && !pairs.some(([p]) => p.toLowerCase() === t.toLowerCase())) pairs.push([t, placeholder])
  }
  add(v.name, "{name}")
  add(v.agentName, "{agent_name}")
  add(v.company, "{company}")
  if (pairs.length === 0) return text
  pairs.sort((a, b) => b[0].length - a[0].length)
  const byValue = new Map(pairs.map(([value, p]) => [value.toLowerCase(), p]))
  const re = new RegExp(
    `(?<![\\p{L}\\p{N}])(?:${pairs.map(([p]) => escapeRegExp(p)).join("|")})(?![\\p{L}\\p{N}])`,
    "giu",
  )
  return text.replace(re, (m) => byValue.get(m.toLowerCase()) ?? m)
}

/** The key verdicts on a line are grouped by. */
export const lineKey = (defilled: string): string => normaliseLine(defilled)

/** `text` cut to `max` characters with an ellipsis. */
export const clipText = (text: string, max: number): string => {
  const t = text.replace(/\s+/g, " ").trim()
  return t.length <= max ? t : `${t.slice(0, max - 1).trimEnd()}…`
}

/** A rule book's category as a rule trigger's category (/^[a-z_]{1,60}$/, ≤ 54 to fit the bucket). */
export function categoryToken(category: string): string | null {
  const t = category
    .toLowerCase()
    .replace(/[^a-z_]+/g, "_")
    .replace(/^_+|_+$/g, "")
    .slice(0, 54)
  return t === "" ? null : t
}

export interface Handler {
  readonly category: string
  readonly trigger: string
  readonly response: string
}

/**
 * The objection handler the line answered, found as the policy says (undefined: unknown): the
 * handler whose response it is, or whose response alone it begins (a line cut short by the callee).
 */
export function handlerOf(
  handlers: ReadonlyArray<Handler>,
  key: string,
  v: CallVars,
  calleeBefore: string | null,
): Handler | undefined {
  const keys = handlers.map((h) => lineKey(defill(fillPlaceholders(h.response, v), v)))
  const exact = keys.indexOf(key)
  if (exact >= 0) return handlers[exact]
  // A line the callee cut short (a barge-in keeps what was played): the one response it begins.
  const begun = key === "" ? [] : handlers.filter((_, i) => keys[i]!.startsWith(`${key} `))
  if (begun.length === 1) return begun[0]
  if (calleeBefore === null) return undefined
  const said = wordsOf(calleeBefore)
  let best: { h: Handler; overlap: number } | undefined
  for (const h of handlers) {
    let overlap = 0
    for (const w of wordsOf(h.trigger)) if (said.has(w)) overlap++
    if (overlap > 0 && (best === undefined || overlap > best.overlap)) best = { h, overlap }
  }
  return best?.h
}

/** A reviewer's standing verdict on the line (the one being given included). */
export interface Peer {
  readonly id: number
  readonly verdict: Verdict
  readonly note: string | null
}

export interface LearnInput {
  readonly verdict: Verdict
  readonly feedbackId: number
  readonly workflowId: number
  /** The de-filled line and its key. */
  readonly line: string
  readonly key: string
  /** The line's objection handler (undefined: unknown category), its response de-filled. */
  readonly handler: { readonly category: string; readonly response: string } | undefined
  /** Each reviewer's latest verdict on (workflow, key), newest first. */
  readonly peers: ReadonlyArray<Peer>
  /** The live rule already learnt from `verdict`s on this line, if any. */
  readonly existing: RuleRow | undefined
}

/** What the policy does with one verdict. */
export type Lesson =
  | { readonly kind: "nothing" }
  /** Link the feedback to an existing rule; `priority` set: raise the rule to it. */
  | { readonly kind: "link"; readonly ruleId: number; readonly priority?: number }
  /** Make a rule and link these feedback ids to it. */
  | { readonly kind: "create"; readonly rule: NewRule; readonly feedbackIds: ReadonlyArray<number> }

const quote = (line: string) => `“${clipText(line, 60)}”`
const bodyOf = (text: string) => text.slice(0, BODY_MAX)

/** The policy (see the header) for one verdict. */
export function learn(i: LearnInput): Lesson {
  const of = (v: Verdict) => i.peers.filter((p) => p.verdict === v)
  const category = i.handler === undefined ? null : categoryToken(i.handler.category)
  const trigger: RuleTrigger | null = category === null ? null : { phrases: [], category }
  const base = { workflow_id: i.workflowId, source_kind: "feedback" as const, learnt_line: i.key }

  switch (i.verdict) {
    case "ban": {
      if (i.existing !== undefined) return { kind: "link", ruleId: i.existing.id }
      return {
        kind: "create",
        rule: {
          ...base,
          bucket: BANNED_BUCKET,
          title: `Never say ${quote(i.line)}`,
          body: bodyOf(i.line),
          trigger: null,
          priority: BAN_PRIORITY,
          status: "active",
          learnt_kind: "ban",
        },
        feedbackIds: of("ban").map((p) => p.id),
      }
    }
    case "punish": {
      if (i.existing !== undefined) return { kind: "link", ruleId: i.existing.id }
      const punishes = of("punish")
      if (punishes.length < PUNISH_THRESHOLD) return { kind: "nothing" }
      const note = punishes.map((p) => p.note?.trim() ?? "").find((n) => n !== "")
      const response = i.handler?.response.trim()
      const body =
        note ??
        (response !== undefined && response !== "" && lineKey(response) !== i.key
          ? response
          : `Rephrase instead of saying: “${i.line}”`)
      return {
        kind: "create",
        rule: {
          ...base,
          bucket: category === null ? REVIEW_BUCKET : `objection.${category}`,
          title: `Say something else than ${quote(i.line)}`,
          body: bodyOf(body),
          trigger,
          priority: 0,
          status: "paused",
          learnt_kind: "punish",
        },
        feedbackIds: punishes.map((p) => p.id),
      }
    }
    case "reward": {
      const rewards = of("reward")
      if (i.existing !== undefined) {
        const raised = Math.min(REWARD_PRIORITY_MAX, rewards.length)
        return raised > i.existing.priority
          ? { kind: "link", ruleId: i.existing.id, priority: raised }
          : { kind: "link", ruleId: i.existing.id }
      }
      if (rewards.length < REWARD_THRESHOLD || rewards.length <= of("punish").length || trigger === null)
        return { kind: "nothing" }
      return {
        kind: "create",
        rule: {
          ...base,
          bucket: `objection.${category}`,
          title: `Answer ${category!.replace(/_/g, " ")} objections with ${quote(i.line)}`,
          body: bodyOf(i.line),
          trigger,
          priority: Math.min(REWARD_PRIORITY_MAX, rewards.length),
          status: "active",
          learnt_kind: "reward",
        },
        feedbackIds: rewards.map((p) => p.id),
      }
    }
  }
}
