// The feedback rollup (GET /kb/rollup): what supervisors said about the agent's lines over a window,
// which turns drew the most verdicts, and which rules the verdicts became.
import { Effect } from "effect"
import { Clock } from "../platform/Clock.js"
import { Db } from "../platform/Db.js"
import { NotFound } from "../platform/errors.js"
import { feedbackIdsOf } from "./kb.repo.js"
import { clipText } from "./learning.js"
import * as repo from "./rollup.repo.js"
import { ruleJson } from "./rule.view.js"

export const WINDOW_DEFAULT_DAYS = 30
export const WINDOW_MAX_DAYS = 365
export const TOP_TURNS = 20
export const RULES_MAX = 100
export const SNIPPET_MAX = 160

/**
 * Verdicts given in the last `windowDays`, the workspace's or one workflow's: counts of every verdict
 * given (a reviewer's repeated or changed verdicts too: each is a flag), the top turns, and the rules
 * learnt from feedback in the window.
 */
export const rollup = (tenantId: number, q: { workflowId: number | undefined; windowDays: number }) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const now = (yield* Clock).now()
    if (q.workflowId !== undefined) {
      const ok = yield* Effect.promise(() => repo.isTenantsWorkflow(sql, tenantId, q.workflowId!))
      if (!ok) return yield* Effect.fail(new NotFound({ message: `workflow ${q.workflowId} not found` }))
    }
    const scope: repo.RollupScope = {
      tenantId,
      workflowId: q.workflowId,
      since: new Date(now.getTime() - q.windowDays * 86_400_000),
    }
    const [counts, turns, rules] = yield* Effect.promise(() =>
      Promise.all([
        repo.verdictCounts(sql, scope),
        repo.topTurns(sql, scope, TOP_TURNS),
        repo.rulesFromFeedback(sql, scope, RULES_MAX),
      ]),
    )
    const links = yield* Effect.promise(() =>
      feedbackIdsOf(
        sql,
        rules.map((r) => r.id),
      ),
    )
    return {
      window_days: q.windowDays,
      workflow_id: q.workflowId ?? null,
      counts,
      top_turns: turns.map((t) => ({
        turn_id: t.turn_id,
        text: clipText(t.text, SNIPPET_MAX),
        verdicts: { reward: t.reward, punish: t.punish, ban: t.ban },
        total: t.total,
      })),
      rules_from_feedback: rules.map((r) => ({
        ...ruleJson(r, links.get(r.id) ?? []),
        feedback_count: r.feedback_count,
      })),
    }
  })
