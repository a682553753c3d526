// Supervisors' verdicts on the agent's turns (POST and GET /kb/feedback) and what they teach: each
// verdict is stored as a row of its own and run through the learning policy (learning.ts) in one
// transaction.
import { Effect } from "effect"
import { actorOf, type Principal } from "../auth/principal.js"
import { Clock } from "../platform/Clock.js"
import { Db, type Tx } from "../platform/Db.js"
import { NotFound, ValidationFailed } from "../platform/errors.js"
import { iso } from "../platform/time.js"
import { fillPlaceholders } from "../providers/llm/llm.interface.js"
import { findVoice } from "../voices/voices.catalog.js"
import * as repo from "./feedback.repo.js"
import { findLearntRule, insertRules, type KbEvent, type RuleRow, recordEvents, updateRule } from "./kb.repo.js"
import { type CallVars, clipText, defill, handlerOf, type Lesson, learn, lineKey, type Verdict } from "./learning.js"
import { announceRulesChanged } from "./rules.changed.js"

export const NOTE_MAX = 1000
export const FEEDBACK_LIST_DEFAULT = 200
export const FEEDBACK_LIST_MAX = 1000
/** The agent's name when the rule book's persona names no voice (as the runtime does). */
const DEFAULT_AGENT_NAME = "Alex"

export interface Reviewer {
  readonly kind: "user" | "api_key"
  readonly id: number
}

const reviewerJson = (reviewer: string): Reviewer => {
  const [kind, id] = reviewer.split(":")
  return { kind: kind === "key" ? "api_key" : "user", id: Number(id) }
}

export const feedbackJson = (f: repo.FeedbackRow, ruleIds: ReadonlyArray<number>) => ({
  id: f.id,
  turn_id: f.turn_id,
  run_id: f.run_id,
  workflow_id: f.workflow_id,
  verdict: f.verdict,
  note: f.note,
  line: f.line,
  reviewer: reviewerJson(f.reviewer),
  rule_ids: [...ruleIds],
  current: f.current,
  created_at: iso(f.created_at),
  updated_at: iso(f.updated_at),
})

export type FeedbackJson = ReturnType<typeof feedbackJson>

/** The values the turn's call filled its placeholders with. */
const varsOf = (t: repo.TurnContext): CallVars => ({
  name: t.callee_name,
  agentName: (t.persona === null ? undefined : findVoice(t.persona)?.name) ?? DEFAULT_AGENT_NAME,
  company: t.company,
})

interface Given {
  readonly row: repo.FeedbackRow
  /** The rule learnt or changed by this verdict, if any. */
  readonly rule: RuleRow | undefined
}

/**
 * Stores `verdict` on one of the workspace's agent turns as a new row (the reviewer's earlier
 * verdicts stay on record) and applies the learning policy, for which it now stands in for the
 * reviewer's earlier verdicts on the line.
 */
export const giveFeedback = (principal: Principal, input: { turn_id: number; verdict: Verdict; note: string | null }) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const now = (yield* Clock).now()
    const tenantId = principal.tenantId
    const turn = yield* Effect.promise(() => repo.turnContext(sql, tenantId, input.turn_id))
    if (turn === undefined) return yield* Effect.fail(new NotFound({ message: `turn ${input.turn_id} not found` }))
    if (turn.speaker !== "agent")
      return yield* Effect.fail(
        new ValidationFailed({
          message: `turn_id: feedback is on the agent's turns; turn ${turn.id} is the ${turn.speaker}'s`,
          errors: [{ field: "turn_id", message: `must be an agent turn (this one is the ${turn.speaker}'s)` }],
        }),
      )

    const vars = varsOf(turn)
    const line = defill(turn.text, vars).trim()
    const key = lineKey(line)
    const calleeBefore = yield* Effect.promise(() => repo.calleeTurnBefore(sql, turn))
    const found = handlerOf(turn.handlers ?? [], key, vars, calleeBefore)
    const handler =
      found === undefined
        ? undefined
        : { category: found.category, response: defill(fillPlaceholders(found.response, vars), vars).trim() }
    const reviewer = actorOf(principal)

    const given = yield* Effect.promise(() =>
      sql.begin(async (tx): Promise<Given> => {
        await repo.lockLine(tx, tenantId, turn.workflow_id, key)
        const before = await repo.findStanding(tx, tenantId, turn.workflow_id, key, reviewer)
        const row = await repo.insertFeedback(
          tx,
          tenantId,
          {
            turn_id: turn.id,
            run_id: turn.run_id,
            workflow_id: turn.workflow_id,
            reviewer,
            verdict: input.verdict,
            note: input.note,
            line,
            line_key: key,
          },
          now,
        )
        if (before !== undefined) await repo.unlinkSuperseded(tx, tenantId, turn.workflow_id, key, reviewer, row.id)

        const events: KbEvent[] = [
          {
            workflow_id: turn.workflow_id,
            action: "feedback_given",
            feedback_id: row.id,
            detail: {
              actor: reviewer,
              verdict: row.verdict,
              // The reviewer's verdict on the line that this one replaces in the policy's counts.
              previous_verdict: before?.verdict ?? null,
              supersedes: before?.id ?? null,
              turn_id: turn.id,
              run_id: turn.run_id,
              line: clipText(line, 160),
            },
          },
        ]
        let rule: RuleRow | undefined
        // A line of nothing but punctuation cannot be matched, so nothing is learnt from it.
        if (key !== "") {
          const existing = await findLearntRule(tx, tenantId, turn.workflow_id, input.verdict, key)
          const lesson: Lesson = learn({
            verdict: input.verdict,
            feedbackId: row.id,
            workflowId: turn.workflow_id,
            line,
            key,
            handler,
            peers: await repo.standingOnLine(tx, tenantId, turn.workflow_id, key),
            existing,
          })
          rule = await apply(tx, tenantId, lesson, row, reviewer, events, now)
        }
        await recordEvents(tx, tenantId, events, now)
        return { row, rule }
      }),
    )
    if (given.rule !== undefined) yield* announceRulesChanged(tenantId, given.rule.workflow_id)
    const ruleIds = yield* Effect.promise(() => repo.ruleIdsOf(sql, [given.row.id]))
    return feedbackJson(given.row, ruleIds.get(given.row.id) ?? [])
  })

/** Writes what the policy decided; the rule made or changed, if one was. */
async function apply(
  tx: Tx,
  tenantId: number,
  lesson: Lesson,
  row: repo.FeedbackRow,
  actor: string,
  events: KbEvent[],
  now: Date,
): Promise<RuleRow | undefined> {
  const ruleEvent = (action: string, rule: RuleRow, detail: Record<string, unknown> = {}): KbEvent => ({
    workflow_id: rule.workflow_id,
    action,
    rule_id: rule.id,
    feedback_id: row.id,
    detail: {
      actor,
      title: rule.title,
      bucket: rule.bucket,
      status: rule.status,
      priority: rule.priority,
      learnt_kind: rule.learnt_kind,
      ...detail,
    },
  })
  switch (lesson.kind) {
    case "nothing":
      return undefined
    case "create": {
      const [rule] = await insertRules(tx, tenantId, [lesson.rule], now)
      await repo.linkFeedback(tx, rule!.id, lesson.feedbackIds)
      events.push(ruleEvent("rule_learnt", rule!, { feedback_ids: lesson.feedbackIds }))
      return rule
    }
    case "link": {
      await repo.linkFeedback(tx, lesson.ruleId, [row.id])
      if (lesson.priority === undefined) return undefined
      const rule = await updateRule(tx, tenantId, lesson.ruleId, { priority: lesson.priority }, now)
      if (rule === undefined) return undefined
      events.push(ruleEvent("rule_updated", rule, { changes: ["priority"], reason: "reward" }))
      return rule
    }
  }
}

/** The workspace's verdicts, every one given, newest first. */
export const listFeedback = (tenantId: number, filter: repo.FeedbackFilter) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const rows = yield* Effect.promise(() => repo.listFeedback(sql, tenantId, filter))
    const rules = yield* Effect.promise(() =>
      repo.ruleIdsOf(
        sql,
        rows.map((r) => r.id),
      ),
    )
    return { feedback: rows.map((r) => feedbackJson(r, rules.get(r.id) ?? [])) }
  })
